import azure.functions as func


def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    """Returns the blob's bytes as they reached the function (the bench checks every byte and the version in them)."""
    if inblob is None:
        return func.HttpResponse(b"", status_code=404)
    return func.HttpResponse(inblob.read(), mimetype="application/octet-stream")
