"""Execute: one notebook cell (POST api/execute, a function key). The bindings bring the session's small state and
its large objects (in0..in31, named by the request; null binds nothing) and take the new state back: stateOut is
written only if state.pkl is still the version read ("ifMatch": a conflict answers 409 and nothing is written), the
changed large objects into fresh names (out0..out31) the kernel sent. The parameters are spelled out because the
worker binds them by name; apps/jupyterless/README.md has the request and reply."""
import json
from typing import Optional

import azure.functions as func

import jupyterless_executor as ex

SLOTS = ex.SLOTS


def main(req: func.HttpRequest, state: Optional[func.InputStream], stateOut: func.Out[bytes],
         in0: func.InputStream,
         in1: func.InputStream,
         in2: func.InputStream,
         in3: func.InputStream,
         in4: func.InputStream,
         in5: func.InputStream,
         in6: func.InputStream,
         in7: func.InputStream,
         in8: func.InputStream,
         in9: func.InputStream,
         in10: func.InputStream,
         in11: func.InputStream,
         in12: func.InputStream,
         in13: func.InputStream,
         in14: func.InputStream,
         in15: func.InputStream,
         in16: func.InputStream,
         in17: func.InputStream,
         in18: func.InputStream,
         in19: func.InputStream,
         in20: func.InputStream,
         in21: func.InputStream,
         in22: func.InputStream,
         in23: func.InputStream,
         in24: func.InputStream,
         in25: func.InputStream,
         in26: func.InputStream,
         in27: func.InputStream,
         in28: func.InputStream,
         in29: func.InputStream,
         in30: func.InputStream,
         in31: func.InputStream,
         out0: func.Out[bytes],
         out1: func.Out[bytes],
         out2: func.Out[bytes],
         out3: func.Out[bytes],
         out4: func.Out[bytes],
         out5: func.Out[bytes],
         out6: func.Out[bytes],
         out7: func.Out[bytes],
         out8: func.Out[bytes],
         out9: func.Out[bytes],
         out10: func.Out[bytes],
         out11: func.Out[bytes],
         out12: func.Out[bytes],
         out13: func.Out[bytes],
         out14: func.Out[bytes],
         out15: func.Out[bytes],
         out16: func.Out[bytes],
         out17: func.Out[bytes],
         out18: func.Out[bytes],
         out19: func.Out[bytes],
         out20: func.Out[bytes],
         out21: func.Out[bytes],
         out22: func.Out[bytes],
         out23: func.Out[bytes],
         out24: func.Out[bytes],
         out25: func.Out[bytes],
         out26: func.Out[bytes],
         out27: func.Out[bytes],
         out28: func.Out[bytes],
         out29: func.Out[bytes],
         out30: func.Out[bytes],
         out31: func.Out[bytes]) -> func.HttpResponse:
    inputs = [in0, in1, in2, in3, in4, in5, in6, in7, in8, in9, in10, in11, in12, in13, in14, in15, in16, in17, in18, in19, in20, in21, in22, in23, in24, in25, in26, in27, in28, in29, in30, in31]
    outputs = [out0, out1, out2, out3, out4, out5, out6, out7, out8, out9, out10, out11, out12, out13, out14, out15, out16, out17, out18, out19, out20, out21, out22, out23, out24, out25, out26, out27, out28, out29, out30, out31]
    try:
        body = ex.check_request(req.get_json())
    except (ValueError, ex.BadRequest) as e:
        return func.HttpResponse(json.dumps({"error": "bad request", "message": str(e)}), status_code=400,
                                 mimetype="application/json")
    large = {}
    for i, stream in enumerate(inputs):
        name = body.get(f"in{i}")
        if name and stream is not None:
            large[name] = stream.getbuffer()
    reply, new_state, writes = ex.execute(body, state.getbuffer() if state is not None else None, large)
    if new_state is not None:
        stateOut.set(new_state)
        for i, out in enumerate(outputs):
            name = body.get(f"out{i}")
            if name in writes:
                out.set(writes[name])
    return func.HttpResponse(json.dumps(reply), mimetype="application/json")
