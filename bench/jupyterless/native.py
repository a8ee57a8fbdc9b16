"""Native IM for ./faast bench jupyterless: a notebook's cells in one local IPython shell (IPython's
InteractiveShell, what Jupyter's own kernel runs cells with, without the kernel's messaging), timed per cell: the
baseline beside which the executor's latency is reported (Faa$T Table 4 and Fig. 10, "Native IM"). Magics are
IPython's own; %matplotlib inline renders each cell's figures to PNG as it does in a notebook; output is captured.

stdin: {"cells": ["code", ...], "runs": [[cell index, times], ...]} ("runs" optional: every cell once, in order).
stdout: {"seconds": [[cell index, seconds], ...]} (one entry per run of a cell). A cell that fails fails the run.
"""
import io
import json
import os
import sys
import time
from contextlib import redirect_stdout


def main():
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    request = json.load(sys.stdin)
    cells = request["cells"]
    runs = request.get("runs") or [[i, 1] for i in range(len(cells))]
    class Shell(InteractiveShell):
        def enable_gui(self, gui=None):
            pass  # inline figures: no GUI event loop, as in ipykernel

    shell = Shell.instance()
    with redirect_stdout(io.StringIO()):
        shell.run_line_magic("matplotlib", "inline")
    seconds = []
    for index, times in runs:
        for _ in range(times):
            started = time.perf_counter()
            with capture_output():
                result = shell.run_cell(cells[index], store_history=True)
            elapsed = time.perf_counter() - started
            if not result.success:
                error = result.error_in_exec or result.error_before_exec
                sys.stderr.write(f"cell {index} failed: {type(error).__name__}: {error}\n")
                sys.exit(1)
            seconds.append([index, elapsed])
    json.dump({"seconds": seconds}, sys.stdout)


if __name__ == "__main__":
    main()
