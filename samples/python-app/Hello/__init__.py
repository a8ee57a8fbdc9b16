import logging

import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    name = req.params.get("name")
    if not name:
        try:
            name = (req.get_json() or {}).get("name")
        except ValueError:
            name = None
    if not name:
        return func.HttpResponse("Pass a name in the query string or in a JSON body.", status_code=400)
    logging.info("Saying hello to %s", name)
    return func.HttpResponse(f"Hello, {name}!")
