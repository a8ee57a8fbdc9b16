"""Reset (POST api/reset, body {"session": S}): writes an empty state for the session, only if state.pkl
still has the version this invocation read ("ifMatch"), so a kernel restart clears the session. The large
blobs the old state named stay in storage (garbage: apps/jupyterless/README.md)."""
import json

import azure.functions as func

from jupyterless import cell, state as st


def main(req: func.HttpRequest, state: func.InputStream, stateOut: func.Out[bytes]) -> func.HttpResponse:
    try:
        body = req.get_json()
    except ValueError:
        body = None
    session = body.get("session") if isinstance(body, dict) else None
    if not isinstance(session, str) or not cell.SESSION_RE.match(session):
        return func.HttpResponse(json.dumps({"error": "bad request", "message":
                                             "session must be 32 lower-case hex characters"}),
                                 status_code=400, mimetype="application/json")
    stateOut.set(st.dump_state(st.empty_state()))
    return func.HttpResponse(json.dumps({"status": "ok", "session": session}), mimetype="application/json")
