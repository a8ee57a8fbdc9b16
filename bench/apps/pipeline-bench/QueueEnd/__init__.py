# Stage 2 of the queue pipeline: the first thing it does is read the clock.
import time

import azure.functions as func


def main(msg: func.QueueMessage, out: func.Out[str]) -> None:
    now = time.time()
    out.set(repr((now - msg.get_json()["t"]) * 1000.0))
