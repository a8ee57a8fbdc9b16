import azure.functions as func


def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    if inblob is None:
        return func.HttpResponse("none", status_code=404)
    return func.HttpResponse(inblob.read())
