import logging

import azure.functions as func


def main(raw: func.InputStream, clean: func.Out[str]) -> None:
    """Stage 2 of the pipeline: lower-cases the text and folds its white space."""
    text = raw.read().decode("utf-8")
    logging.info("Normalizing %s (%d bytes)", raw.name, raw.length)
    clean.set(" ".join(text.lower().split()))
