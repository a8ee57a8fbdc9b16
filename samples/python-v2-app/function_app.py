"""The Python v2 programming model's version of samples/python-app, unchanged from what `func init --python -m V2`
would start from: the functions are declared with decorators, there is no function.json. The same four functions (an
HTTP greeting, a blob-triggered two-stage pipeline, a word count reading and writing blobs through the cache) plus a
queue: Enqueue puts a message, Tally (queue-triggered) writes it to a blob."""
import json
import logging
from collections import Counter

import azure.functions as func

app = func.FunctionApp(http_auth_level=func.AuthLevel.ANONYMOUS)


@app.route(route="Hello", methods=["GET", "POST"])
def Hello(req: func.HttpRequest) -> func.HttpResponse:
    name = req.params.get("name")
    if not name:
        try:
            name = (req.get_json() or {}).get("name")
        except ValueError:
            name = None
    if not name:
        return func.HttpResponse("Pass a name in the query string or in a JSON body.", status_code=400)
    logging.info("Saying hello to %s", name)
    return func.HttpResponse(f"Hello, {name}!")


@app.route(route="ingest/{name}", methods=["POST"])
@app.blob_output(arg_name="raw", path="pipeline-raw/{name}", connection="AzureWebJobsStorage")
def Ingest(req: func.HttpRequest, raw: func.Out[bytes]) -> func.HttpResponse:
    """Stage 1 of the pipeline: stores the posted text as pipeline-raw/{name}, which triggers Normalize."""
    body = req.get_body()
    raw.set(body)
    return func.HttpResponse(f"stored {len(body)} bytes as pipeline-raw/{req.route_params['name']}", status_code=202)


@app.blob_trigger(arg_name="raw", path="pipeline-raw/{name}", connection="AzureWebJobsStorage")
@app.blob_output(arg_name="clean", path="pipeline-clean/{name}", connection="AzureWebJobsStorage")
def Normalize(raw: func.InputStream, clean: func.Out[str]) -> None:
    """Stage 2 of the pipeline: lower-cases the text and folds its white space."""
    text = raw.read().decode("utf-8")
    logging.info("Normalizing %s (%d bytes)", raw.name, raw.length)
    clean.set(" ".join(text.lower().split()))


@app.route(route="wordcount/{name}", methods=["GET"])
@app.blob_input(arg_name="document", path="documents/{name}", connection="AzureWebJobsStorage")
@app.blob_output(arg_name="counts", path="wordcounts/{name}.json", connection="AzureWebJobsStorage")
def WordCount(req: func.HttpRequest, document: func.InputStream, counts: func.Out[str]) -> func.HttpResponse:
    """Counts the words of documents/{name}, stores the counts in wordcounts/{name}.json and returns them."""
    if document is None:
        return func.HttpResponse(f"documents/{req.route_params['name']} does not exist", status_code=404)
    words = Counter(document.read().decode("utf-8").lower().split())
    body = json.dumps({"blob": document.name, "words": sum(words.values()), "top": words.most_common(5)})
    counts.set(body)
    return func.HttpResponse(body, mimetype="application/json")


@app.route(route="enqueue/{item}", methods=["POST"])
@app.queue_output(arg_name="msg", queue_name="tally-items", connection="AzureWebJobsStorage")
def Enqueue(req: func.HttpRequest, msg: func.Out[str]) -> func.HttpResponse:
    """Puts a message on the tally-items queue; Tally takes it from there."""
    msg.set(json.dumps({"item": req.route_params["item"], "note": req.get_body().decode("utf-8")}))
    return func.HttpResponse("queued", status_code=202)


@app.queue_trigger(arg_name="msg", queue_name="tally-items", connection="AzureWebJobsStorage")
@app.blob_output(arg_name="out", path="tallies/{item}.json", connection="AzureWebJobsStorage")
def Tally(msg: func.QueueMessage, out: func.Out[str]) -> None:
    """Writes each queued item to tallies/{item}.json (the message's JSON property names the blob)."""
    body = msg.get_json()
    logging.info("Tallying %s (dequeued %d time(s))", body["item"], msg.dequeue_count)
    out.set(json.dumps({"item": body["item"], "note": body["note"], "message": msg.id}))


@app.schedule(schedule="%HEARTBEAT_SCHEDULE%", arg_name="timer", use_monitor=True)
@app.blob_output(arg_name="beat", path="heartbeats/latest.json", connection="AzureWebJobsStorage")
def Heartbeat(timer: func.TimerRequest, beat: func.Out[str]) -> None:
    """A timer (the schedule is the app setting HEARTBEAT_SCHEDULE, NCRONTAB with seconds): records each run, once
    per occurrence however many instances run."""
    if timer.past_due:
        logging.warning("Heartbeat is past due")
    beat.set(json.dumps({"past_due": timer.past_due, "status": timer.schedule_status}))
