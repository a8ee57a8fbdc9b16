import hashlib

import azure.functions as func


def main(req: func.HttpRequest, blob: func.InputStream) -> func.HttpResponse:
    """Reads objects/{name} through the cache (and the flash tier on a miss); answers its length and SHA-256."""
    if blob is None:
        return func.HttpResponse("not found", status_code=404)
    data = blob.read()
    return func.HttpResponse(f"{len(data)} {hashlib.sha256(data).hexdigest()}")
