import azure.functions as func


def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    """What unchanged code does with an input blob: read all of it."""
    return func.HttpResponse(str(len(inblob.read())))
