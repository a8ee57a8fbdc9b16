import azure.functions as func


def main(req: func.HttpRequest, blob: func.Out[bytes]) -> func.HttpResponse:
    """Writes the request body as objects/{name} (a new version: the flash tier's old copy is never served)."""
    body = req.get_body()
    blob.set(body)
    return func.HttpResponse(str(len(body)))
