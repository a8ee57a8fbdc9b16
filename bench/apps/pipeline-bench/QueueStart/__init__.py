# Stage 1 of the queue pipeline: the message carries the time it was handed to the host.
import json
import time

import azure.functions as func


def main(req: func.HttpRequest, msg: func.Out[str]) -> str:
    msg.set(json.dumps({"run": req.params["id"], "t": time.time()}))
    return "ok"
