import azure.functions as func


def main(req: func.HttpRequest, stored: func.Out[str]) -> func.HttpResponse:
    stored.set(req.get_body().decode())
    return func.HttpResponse("stored", status_code=201)
