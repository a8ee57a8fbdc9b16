import azure.functions as func


def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    """{key} comes from the JSON body's top-level "key" (or the query)."""
    if inblob is None:
        return func.HttpResponse("none", status_code=404)
    return func.HttpResponse(str(len(inblob.read())))
