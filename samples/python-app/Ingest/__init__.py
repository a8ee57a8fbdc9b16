import azure.functions as func


def main(req: func.HttpRequest, raw: func.Out[bytes]) -> func.HttpResponse:
    """Stage 1 of the pipeline: stores the posted text as pipeline-raw/{name}, which triggers Normalize."""
    body = req.get_body()
    raw.set(body)
    return func.HttpResponse(f"stored {len(body)} bytes as pipeline-raw/{req.route_params['name']}", status_code=202)
