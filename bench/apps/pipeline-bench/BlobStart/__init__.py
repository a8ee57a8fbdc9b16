# Stage 1 of the blob pipeline: the blob holds the time it was handed to the host.
import time

import azure.functions as func


def main(req: func.HttpRequest, out: func.Out[str]) -> str:
    out.set(repr(time.time()))
    return "ok"
