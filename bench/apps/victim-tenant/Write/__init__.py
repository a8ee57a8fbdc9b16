import azure.functions as func


def main(req: func.HttpRequest, outblob: func.Out[bytes]) -> func.HttpResponse:
    body = req.get_body() or b""
    outblob.set(body)
    return func.HttpResponse(str(len(body)))
