# A temporary stand-in for Part B's executor (kernel tests before apps/jupyterless/executor exists).
import json

import azure.functions as func

from Execute import SESSIONS


def main(req: func.HttpRequest) -> func.HttpResponse:
    SESSIONS.pop(req.get_json()["session"], None)
    return func.HttpResponse(json.dumps({"status": "ok"}), mimetype="application/json")
