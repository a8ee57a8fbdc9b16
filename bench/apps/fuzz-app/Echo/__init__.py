import json

import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    """Answers what it got; never fails, so any 5xx on this route is the host's."""
    body = req.get_body() or b""
    return func.HttpResponse(json.dumps({
        "method": req.method,
        "name": req.route_params.get("name"),
        "length": len(body),
        "params": len(req.params),
        "headers": len(req.headers),
    }), mimetype="application/json")
