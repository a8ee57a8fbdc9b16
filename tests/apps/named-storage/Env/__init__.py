import json
import os

import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    return func.HttpResponse(json.dumps(dict(os.environ)), mimetype="application/json")
