import json
import os

import azure.functions as func


def main(req: func.HttpRequest) -> func.HttpResponse:
    # What the attack run checks: whether the app's workers run as root once a function names a file outside the app.
    return func.HttpResponse(json.dumps({"uid": os.getuid(), "gid": os.getgid(), "euid": os.geteuid()}), mimetype="application/json")
