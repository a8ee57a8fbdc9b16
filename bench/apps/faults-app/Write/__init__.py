import azure.functions as func


def main(req: func.HttpRequest, outblob: func.Out[bytes]) -> func.HttpResponse:
    """Writes the request body as the blob: the response acknowledges the write (the bench counts it as acknowledged)."""
    body = req.get_body()
    outblob.set(body)
    return func.HttpResponse(str(len(body)))
