import azure.functions as func


def main(req: func.HttpRequest, current: func.InputStream) -> func.HttpResponse:
    """The counter's value as this instance reads it."""
    return func.HttpResponse(current.read().decode() if current is not None else "0")
