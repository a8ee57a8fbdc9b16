import azure.functions as func


def main(msg: func.QueueMessage, out: func.Out[str]) -> None:
    out.set(msg.get_json()["text"].upper())
