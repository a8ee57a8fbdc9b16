# A temporary stand-in for Part B's executor (kernel tests before apps/jupyterless/executor exists): the contract's
# request/reply JSON, the state kept in this worker's memory (one worker), no blobs.
import ast
import base64
import builtins
import contextlib
import io
import json
import os
import re
import tempfile
import traceback

import azure.functions as func

SESSIONS = {}


def _refuse_input(*args, **kwargs):
    raise RuntimeError("stdin is not available in JupyterLess")


def _bundle(value):
    data = {"text/plain": repr(value)}
    if hasattr(value, "_repr_html_"):
        html = value._repr_html_()
        if html:
            data["text/html"] = html
    return data


def main(req: func.HttpRequest) -> func.HttpResponse:
    body = req.get_json()
    session = body.get("session", "")
    if not re.fullmatch(r"[0-9a-f]{32}", session):
        return func.HttpResponse("bad session", status_code=400)
    state = SESSIONS.setdefault(session, {"ns": {"__name__": "__main__"}, "count": 0, "dir": tempfile.mkdtemp()})
    ns = state["ns"]
    displays = []

    def display(*objs, **kwargs):
        for o in objs:
            displays.append({"data": _bundle(o), "metadata": {}})

    import IPython.display
    IPython.display.display = display
    ns["input"] = _refuse_input
    state["count"] += 1
    out, err = io.StringIO(), io.StringIO()
    reply = {"status": "ok", "execution_count": state["count"], "result": None, "displays": displays,
             "large": {f"in{i}": None for i in range(32)}, "warnings": []}
    cwd = os.getcwd()
    try:
        os.chdir(state["dir"])  # the working directory across cells (one worker: no other cell runs meanwhile)
        import matplotlib
        matplotlib.use("Agg")
        tree = ast.parse(body["code"])
        last = None
        if tree.body and isinstance(tree.body[-1], ast.Expr):
            last = ast.Expression(tree.body.pop().value)
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            exec(compile(tree, "<cell>", "exec"), ns)
            value = eval(compile(last, "<cell>", "eval"), ns) if last else None
        import matplotlib.pyplot as plt
        for num in plt.get_fignums():
            buf = io.BytesIO()
            plt.figure(num).savefig(buf, format="png")
            displays.append({"data": {"image/png": base64.b64encode(buf.getvalue()).decode(), "text/plain": "<Figure>"},
                             "metadata": {}})
        plt.close("all")
        if value is not None:
            reply["result"] = _bundle(value)
    except Exception as e:  # noqa: BLE001
        reply.update(status="error", ename=type(e).__name__, evalue=str(e),
                     traceback=traceback.format_exception(type(e), e, e.__traceback__))
    finally:
        os.chdir(cwd)
    reply["stdout"], reply["stderr"] = out.getvalue(), err.getvalue()
    return func.HttpResponse(json.dumps(reply), mimetype="application/json")
