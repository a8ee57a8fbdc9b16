"""Runs one notebook cell as one invocation: load the session's state from the blobs the invocation's input bindings
bound, run the code as Jupyter's IPython kernel would (the last expression's value, display data, streams, %time),
and hand back the new state for the output bindings. apps/jupyterless/README.md has the request and reply.

One cell at a time per worker process (PYTHON_THREADPOOL_THREAD_COUNT=1 in local.settings.json): stdout, the working
directory and sys.modules["__main__"] are the process's, as they are a Jupyter kernel's.
"""
from __future__ import annotations

import ast
import base64
import builtins
import contextlib
import io
import os
import re
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

import jupyterless_state as st

SLOTS = 32
SESSION = re.compile(r"[0-9a-f]{32}")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class BadRequest(Exception):
    pass


def check_request(body: Any) -> Dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the request body must be a JSON object")
    session = body.get("session")
    if not isinstance(session, str) or not SESSION.fullmatch(session):
        raise BadRequest("\"session\" must be 32 lower-case hex characters (the kernel makes it with secrets.token_hex(16))")
    for i in range(SLOTS):
        for kind in ("in", "out"):
            key = f"{kind}{i}"
            value = body.get(key, None)
            if value is not None and (not isinstance(value, str) or not NAME.fullmatch(value)):
                raise BadRequest(f"\"{key}\" must be null or a blob name of letters, digits, '.', '_' and '-'")
    if "code" in body and not isinstance(body["code"], str):
        raise BadRequest("\"code\" must be a string")
    return body


# ---------------------------------------------------------------- magics


class MagicError(Exception):
    pass


def _timed(source: str, what: str) -> str:
    """Code that runs `source` and prints its times as IPython's %time does."""
    return (
        "import time as __jl_time\n"
        "__jl_cpu, __jl_wall = __jl_time.process_time(), __jl_time.perf_counter()\n"
        "try:\n"
        + "".join("    " + line + "\n" for line in (source.splitlines() or ["pass"]))
        + "finally:\n"
        "    __jl_cpu, __jl_wall = __jl_time.process_time() - __jl_cpu, __jl_time.perf_counter() - __jl_wall\n"
        "    print(f\"CPU times: total: {__jl_cpu * 1000:.3g} ms\\nWall time: {__jl_wall * 1000:.3g} ms\")\n"
    )


def transform(code: str) -> Tuple[str, Optional[str]]:
    """The cell's code with the magics that make sense remotely applied: (code, a %%time cell's body or None).
    %%time times the whole cell; %time STATEMENT times one line; %matplotlib inline is what the executor always
    does. Any other magic or shell escape raises MagicError naming it."""
    lines = code.splitlines()
    first = next((i for i, l in enumerate(lines) if l.strip()), None)
    if first is not None and lines[first].strip().startswith("%%"):
        magic = lines[first].strip().split()[0]
        if magic != "%%time":
            raise MagicError(f"cell magic {magic} is not available in JupyterLess (only %%time is)")
        return "\n".join(lines[first + 1:]), "time"
    out = []
    for line in lines:
        stripped = line.lstrip()
        indent = line[:len(line) - len(stripped)]
        if stripped.startswith("!"):
            raise MagicError(f"shell command {stripped.split()[0]} is not available in JupyterLess (cells run as functions)")
        if stripped.startswith("%"):
            parts = stripped.split(None, 1)
            magic = parts[0]
            if magic == "%matplotlib":
                out.append(indent + "pass")
                continue
            if magic == "%time" and len(parts) == 2:
                if indent:
                    raise MagicError("%time inside a block is not available in JupyterLess (use it on a top-level line, or %%time)")
                out.append(_timed(parts[1], "%time").rstrip("\n"))
                continue
            raise MagicError(f"line magic {magic} is not available in JupyterLess (%time, %%time and %matplotlib inline are)")
        out.append(line)
    return "\n".join(out), None


# ---------------------------------------------------------------- display


def bundle(value: Any) -> Dict[str, str]:
    """A value as Jupyter's display protocol sends it: text/plain always, text/html and image/png when it has them."""
    data = {"text/plain": repr(value)}
    for method, mime in (("_repr_html_", "text/html"), ("_repr_png_", "image/png"), ("_repr_markdown_", "text/markdown")):
        render = getattr(value, method, None)
        if callable(render):
            try:
                rendered = render()
            except Exception:  # noqa: BLE001 - a broken repr leaves text/plain
                rendered = None
            if rendered:
                data[mime] = base64.b64encode(rendered).decode("ascii") if isinstance(rendered, bytes) else str(rendered)
    return data


def _figures(displays: List[Dict[str, Any]]) -> None:
    """%matplotlib inline: every figure open at the end of the cell becomes a PNG display and is closed."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None:
        return
    for number in plt.get_fignums():
        figure = plt.figure(number)
        buffer = io.BytesIO()
        figure.savefig(buffer, format="png", bbox_inches="tight")
        displays.append({"data": {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                                  "text/plain": repr(figure)}, "metadata": {}})
    plt.close("all")


class _Streams(io.TextIOBase):
    """stdout or stderr of the cell: also what threads the cell started print."""

    def __init__(self) -> None:
        self._buffer = io.StringIO()
        self._lock = threading.Lock()

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        with self._lock:
            return self._buffer.write(text)

    def getvalue(self) -> str:
        with self._lock:
            return self._buffer.getvalue()


class _NoInput(io.TextIOBase):
    def readable(self) -> bool:
        return True

    def read(self, *args: Any) -> str:
        raise RuntimeError("stdin is not available in JupyterLess: a cell runs as a function invocation, which cannot prompt")

    readline = read


def _refuse_input(prompt: str = "") -> str:
    raise RuntimeError("stdin is not available in JupyterLess: input() cannot prompt from a function invocation")


# ---------------------------------------------------------------- one cell


def execute(body: Dict[str, Any], state_blob: Optional[memoryview], large_blobs: Dict[str, memoryview]
            ) -> Tuple[Dict[str, Any], Optional[bytes], Dict[str, bytes]]:
    """Runs the cell: (the reply, the new small state or None to keep it, the large blobs to write by name)."""
    state = st.decode_state(bytes(state_blob) if state_blob is not None else None)
    bound = {name for name in (body.get(f"in{i}") for i in range(SLOTS)) if name}
    needed = st.needs(state)
    missing = [name for name in st.required(body.get("code", ""), state, needed) if name not in bound]
    if missing:
        # The kernel's idea of the large objects is behind (a first cell, another tab, another instance): nothing
        # runs; the reply names what to bind.
        return ({"status": "stale", "execution_count": state.count, "large": large_slots(state),
                 "needs": needed, "dynamic": sorted(st.DYNAMIC),
                 "stdout": "", "stderr": "", "result": None, "displays": [], "warnings": []}, None, {})
    if len(state.large) > SLOTS:
        raise RuntimeError(f"the session has {len(state.large)} large objects; at most {SLOTS} can be bound")

    module = st.new_module()
    namespace = module.__dict__
    saved_main = sys.modules.get("__main__")
    saved_cwd = os.getcwd()
    saved_stdin = sys.stdin
    stdout, stderr = _Streams(), _Streams()
    displays: List[Dict[str, Any]] = []
    reply: Dict[str, Any] = {"status": "ok", "execution_count": state.count + 1, "result": None, "displays": displays,
                             "warnings": []}
    workdir = tempfile.mkdtemp(prefix="jupyterless-")
    try:
        sys.modules["__main__"] = module
        sys.stdin = _NoInput()
        st.write_files(workdir, state.files)
        os.chdir(workdir)
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            # A blob the state names but storage lacks (deleted; its write failed after the state committed) binds
            # nothing: the variables holding it are lost, each named in a warning, and the session goes on.
            # Only the variables whose large objects the cell bound are loaded (a cell that does not name the
            # session's 350 MB DataFrame neither pins it in the cache nor copies it into the worker: Faa$T Table 5's
            # allocating cell); the others are carried over as they are.
            loaded = st.load(state, {n: v for n, v in large_blobs.items() if n in state.large}, namespace,
                             bound & set(state.large))
        reply["warnings"].extend(loaded.warnings)
        namespace["input"] = _refuse_input
        _install_display(displays)
        code = body.get("code", "")
        try:
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                _run(code, namespace, displays, reply)
        except (Exception, SystemExit, KeyboardInterrupt) as e:  # the cell's failure is the notebook's to show
            reply.update(status="error", ename=type(e).__name__, evalue=str(e), traceback=_traceback(e))
        _figures(displays)
        definitions = state.definitions
        if reply["status"] == "ok":
            # From the code as run (magics applied: a cell starting with %matplotlib inline is Python after that).
            source = transform(code)[0]
            definitions = st.merge_definitions(state.definitions, st.imports_of(source) + st.definitions_of(source))
        files, file_warnings = st.read_files(workdir)
        reply["warnings"].extend(file_warnings)
        fresh = [body[f"out{i}"] for i in range(SLOTS) if body.get(f"out{i}")]
        new_state, writes, save_warnings = st.save(namespace, loaded, fresh, definitions, state.count + 1, files,
                                                   state.large)
        reply["warnings"].extend(save_warnings)
        reply["large"] = large_slots(new_state)
        reply["needs"] = st.needs(new_state)
        reply["dynamic"] = sorted(st.DYNAMIC)
        if not writes and st.same_contents(new_state, state):
            # A cell that changed nothing (a print, a plot, a look at a variable) writes nothing: it cannot lose
            # another cell's update, so it needs no conditional write, and under the platform's default preset
            # (storage/sync/storage) the write is a storage round trip of the cell's latency (Table 4's no-op: the
            # read and this write were 9 of its 13.2 ms on the shaped network). Only the execution count would have
            # changed; the kernel keeps its own count monotonic (jupyterless_kernel.py).
            reply["state_written"] = False
            return reply, None, writes
        reply["state_written"] = True
        # A failing cell still moves the counter and keeps what it did before it raised, as IPython's namespace does.
        return reply, st.encode_state(new_state), writes
    finally:
        # The session's objects go now, not at the next cyclic collection: the namespace holds the functions whose
        # globals it is (a cycle), and a 350 MB DataFrame left to the collector is memory the next cell, or the
        # memory daemon's accounting, does not have (Faa$T Table 5's allocation failed with it).
        namespace.clear()
        os.chdir(saved_cwd)
        sys.stdin = saved_stdin
        if saved_main is not None:
            sys.modules["__main__"] = saved_main
        _remove(workdir)
        reply["stdout"], reply["stderr"] = stdout.getvalue(), stderr.getvalue()


def large_slots(state: st.State) -> Dict[str, Optional[str]]:
    names = sorted(state.large)
    return {f"in{i}": (names[i] if i < len(names) else None) for i in range(SLOTS)}


def _run(code: str, namespace: Dict[str, Any], displays: List[Dict[str, Any]], reply: Dict[str, Any]) -> None:
    source, cell_magic = transform(code)
    if cell_magic == "time":
        source = _timed(source, "%%time")
    tree = ast.parse(source, filename="<cell>")
    last: Optional[ast.Expression] = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and cell_magic is None:
        last = ast.Expression(tree.body.pop().value)
    exec(compile(tree, "<cell>", "exec"), namespace)
    if last is not None:
        value = eval(compile(last, "<cell>", "eval"), namespace)
        if value is not None:
            namespace["___"], namespace["__"], namespace["_"] = namespace.get("__"), namespace.get("_"), value
            # A figure as the value (plt.plot's list of lines, a Figure): shown by _figures, as inline does.
            reply["result"] = bundle(value)


def _install_display(displays: List[Dict[str, Any]]) -> None:
    """IPython.display.display (and display() in the namespace) adds display data to the reply."""
    def display(*objects: Any, **kwargs: Any) -> None:
        for obj in objects:
            if type(obj).__name__ == "Figure" and hasattr(obj, "savefig"):
                buffer = io.BytesIO()
                obj.savefig(buffer, format="png", bbox_inches="tight")
                displays.append({"data": {"image/png": base64.b64encode(buffer.getvalue()).decode("ascii"),
                                          "text/plain": repr(obj)}, "metadata": {}})
            else:
                displays.append({"data": bundle(obj), "metadata": {}})

    try:
        import IPython.display as ipd
        ipd.display = display
    except ImportError:
        pass
    builtins.display = display  # type: ignore[attr-defined]


def _traceback(e: BaseException) -> List[str]:
    # The cell's frames and what it called; the executor's own frames say nothing to the notebook's user.
    frames = [f for f in traceback.extract_tb(e.__traceback__) if os.path.basename(f.filename) != "jupyterless_executor.py"]
    lines = (["Traceback (most recent call last):\n"] + traceback.format_list(frames)) if frames else []
    return lines + traceback.format_exception_only(type(e), e)


def _remove(directory: str) -> None:
    for root, dirs, files in os.walk(directory, topdown=False):
        for name in files:
            with contextlib.suppress(OSError):
                os.unlink(os.path.join(root, name))
        for name in dirs:
            with contextlib.suppress(OSError):
                os.rmdir(os.path.join(root, name))
    with contextlib.suppress(OSError):
        os.rmdir(directory)
