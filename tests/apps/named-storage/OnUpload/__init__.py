import azure.functions as func


def main(blob: func.InputStream, out: func.Out[str]) -> None:
    out.set(blob.read().decode().upper())
