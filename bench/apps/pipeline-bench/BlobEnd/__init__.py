# Stage 2 of the blob pipeline: the first thing it does is read the clock.
import time

import azure.functions as func


def main(blob: func.InputStream, out: func.Out[str]) -> None:
    now = time.time()
    out.set(repr((now - float(blob.read())) * 1000.0))
