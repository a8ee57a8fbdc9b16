"""Native IM for ./faast bench jupyterless: a notebook's cells in one local Python process, as Jupyter's own
kernel runs them (one namespace, the last expression's value rendered, matplotlib figures rendered to PNG and
closed at the end of each cell, as %matplotlib inline does), timed per cell. The baseline beside which the
executor's latency is reported (Faa$T Table 4 and Fig. 10, "Native IM").

stdin: {"cells": ["code", ...], "runs": [[cell index, times], ...]} ("runs" optional: every cell once, in order).
stdout: {"seconds": [[cell index, seconds], ...]} (one entry per run of a cell).
Native RS (Fig. 10) is a cell that reads the chunks from storage itself (the bench passes their URLs).
"""
import ast
import contextlib
import io
import json
import sys
import time


def _render(value):
    # What Jupyter's display protocol sends for the value: HTML when the object has it (pandas), else repr.
    if value is None:
        return None
    html = getattr(value, "_repr_html_", None)
    return {"text/plain": repr(value), **({"text/html": html()} if callable(html) else {})}


def _figures():
    # %matplotlib inline: every figure open at the end of the cell becomes a PNG and is closed.
    if "matplotlib.pyplot" not in sys.modules:
        return 0
    plt = sys.modules["matplotlib.pyplot"]
    shown = 0
    for number in plt.get_fignums():
        buffer = io.BytesIO()
        plt.figure(number).savefig(buffer, format="png", bbox_inches="tight")
        shown += 1
    plt.close("all")
    return shown


def run_cell(code, namespace):
    tree = ast.parse(code)
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        exec(compile(tree, "<cell>", "exec"), namespace)
        value = eval(compile(last, "<cell>", "eval"), namespace) if last is not None else None
        _render(value)
        _figures()
    return out.getvalue()


def main():
    import matplotlib
    matplotlib.use("Agg")
    request = json.load(sys.stdin)
    cells = request["cells"]
    runs = request.get("runs") or [[i, 1] for i in range(len(cells))]
    namespace = {"__name__": "__main__"}
    seconds = []
    for index, times in runs:
        for _ in range(times):
            started = time.perf_counter()
            run_cell(cells[index], namespace)
            seconds.append([index, time.perf_counter() - started])
    json.dump({"seconds": seconds}, sys.stdout)


if __name__ == "__main__":
    main()
