"""Reset: a restarted kernel's session starts empty (POST api/reset {"session": S}, a function key). Writes an empty
state If-Match the version read, so a cell committing at the same moment is not silently overwritten (409)."""
import json
from typing import Optional

import azure.functions as func

import jupyterless_executor as ex
import jupyterless_state as st


def main(req: func.HttpRequest, state: Optional[func.InputStream], stateOut: func.Out[bytes]) -> func.HttpResponse:
    try:
        body = req.get_json()
        if not isinstance(body, dict) or not isinstance(body.get("session"), str) or not ex.SESSION.fullmatch(body["session"]):
            raise ValueError("\"session\" must be 32 lower-case hex characters")
    except ValueError as e:
        return func.HttpResponse(json.dumps({"error": "bad request", "message": str(e)}), status_code=400,
                                 mimetype="application/json")
    stateOut.set(st.encode_state(st.State()))
    return func.HttpResponse(json.dumps({"status": "ok"}), mimetype="application/json")
