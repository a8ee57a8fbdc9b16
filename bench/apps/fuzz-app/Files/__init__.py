import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(req.route_params.get("path") or "", mimetype="text/plain")
