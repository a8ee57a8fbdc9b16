import azure.functions as func


def main(req: func.HttpRequest, current: func.InputStream, updated: func.Out[str]) -> func.HttpResponse:
    """Adds one to a shared counter kept in a blob: read, increment, write (Faa$T §6.6)."""
    value = int(current.read()) if current is not None else 0
    updated.set(str(value + 1))
    return func.HttpResponse(str(value + 1))
