"""Execute (POST api/execute): runs one cell of a JupyterLess session (apps/jupyterless/README.md).

The bindings (function.json) read the session's small state and the large objects the request names,
and write the new state (only if state.pkl still has the version read: "ifMatch") and the changed large
objects under the fresh names the request gives. The work is in the app's `jupyterless` package.
"""
import json

import azure.functions as func

from jupyterless import cell

SLOTS = 32


def main(req: func.HttpRequest, state: func.InputStream, stateOut: func.Out[bytes],
         in0: func.InputStream, in1: func.InputStream, in2: func.InputStream, in3: func.InputStream,
         in4: func.InputStream, in5: func.InputStream, in6: func.InputStream, in7: func.InputStream,
         in8: func.InputStream, in9: func.InputStream, in10: func.InputStream, in11: func.InputStream,
         in12: func.InputStream, in13: func.InputStream, in14: func.InputStream, in15: func.InputStream,
         in16: func.InputStream, in17: func.InputStream, in18: func.InputStream, in19: func.InputStream,
         in20: func.InputStream, in21: func.InputStream, in22: func.InputStream, in23: func.InputStream,
         in24: func.InputStream, in25: func.InputStream, in26: func.InputStream, in27: func.InputStream,
         in28: func.InputStream, in29: func.InputStream, in30: func.InputStream, in31: func.InputStream,
         out0: func.Out[bytes], out1: func.Out[bytes], out2: func.Out[bytes], out3: func.Out[bytes],
         out4: func.Out[bytes], out5: func.Out[bytes], out6: func.Out[bytes], out7: func.Out[bytes],
         out8: func.Out[bytes], out9: func.Out[bytes], out10: func.Out[bytes], out11: func.Out[bytes],
         out12: func.Out[bytes], out13: func.Out[bytes], out14: func.Out[bytes], out15: func.Out[bytes],
         out16: func.Out[bytes], out17: func.Out[bytes], out18: func.Out[bytes], out19: func.Out[bytes],
         out20: func.Out[bytes], out21: func.Out[bytes], out22: func.Out[bytes], out23: func.Out[bytes],
         out24: func.Out[bytes], out25: func.Out[bytes], out26: func.Out[bytes], out27: func.Out[bytes],
         out28: func.Out[bytes], out29: func.Out[bytes], out30: func.Out[bytes], out31: func.Out[bytes]) -> func.HttpResponse:
    try:
        body = cell.parse_request(req.get_json())
    except cell.BadRequest as exc:
        return _bad(str(exc))
    except ValueError:  # not JSON
        return _bad("the body must be a JSON object")
    args = locals()
    inputs = {f"in{i}": args[f"in{i}"] for i in range(SLOTS)}
    reply, new_state, outputs = cell.execute(body, state, inputs)
    for slot, data in outputs.items():
        args[slot].set(data)
    if new_state is not None:
        stateOut.set(new_state)
    return func.HttpResponse(json.dumps(reply), mimetype="application/json")


def _bad(message: str) -> func.HttpResponse:
    return func.HttpResponse(json.dumps({"error": "bad request", "message": message}), status_code=400,
                             mimetype="application/json")
