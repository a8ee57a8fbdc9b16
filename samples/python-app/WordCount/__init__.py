import json
from collections import Counter

import azure.functions as func


def main(req: func.HttpRequest, document: func.InputStream, counts: func.Out[str]) -> func.HttpResponse:
    """Counts the words of documents/{name}, stores the counts in wordcounts/{name}.json and returns them."""
    if document is None:
        return func.HttpResponse(f"documents/{req.route_params['name']} does not exist", status_code=404)
    words = Counter(document.read().decode("utf-8").lower().split())
    body = json.dumps({"blob": document.name, "words": sum(words.values()), "top": words.most_common(5)})
    counts.set(body)
    return func.HttpResponse(body, mimetype="application/json")
