"""Runs one JupyterLess cell: parse the request, load the state, run the code as IPython would (last
expression's value, display data, %time/%%time), capture stdout/stderr, and make the new state.

`execute(body, state_blob, inputs)` is pure apart from the process-wide things a cell needs (the working
directory, sys.stdout/stderr, matplotlib's pyplot): one cell runs at a time per worker process (a lock;
local.settings.json sets PYTHON_THREADPOOL_THREAD_COUNT=1), so the swaps are safe and print() from threads
the cell starts is captured too.
"""
from __future__ import annotations

import ast
import base64
import builtins
import io
import linecache
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import traceback
from typing import Any, Dict, List, Optional, Tuple

from . import state as st

os.environ.setdefault("MPLBACKEND", "Agg")
if not os.environ.get("MPLCONFIGDIR"):
    os.environ["MPLCONFIGDIR"] = os.path.join(tempfile.gettempdir(), f"jupyterless-mpl-{os.getuid()}")

SESSION_RE = re.compile(r"^[0-9a-f]{32}\Z")
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}\Z")
SLOTS = st.MAX_LARGE
_LOCK = threading.Lock()


class BadRequest(Exception):
    """The request is not a JupyterLess request (400)."""


class StdinNotImplementedError(RuntimeError):
    pass


def _no_input(*_args: Any, **_kwargs: Any) -> str:
    raise StdinNotImplementedError("stdin is not available in JupyterLess: input() cannot be answered")


class _NoStdin(io.TextIOBase):
    def read(self, *_a: Any) -> str:  # type: ignore[override]
        _no_input()
        return ""

    def readline(self, *_a: Any) -> str:  # type: ignore[override]
        _no_input()
        return ""

    def readable(self) -> bool:
        return True


class _Capture(io.TextIOBase):
    def __init__(self) -> None:
        self._parts: List[str] = []
        self._lock = threading.Lock()

    def write(self, s: str) -> int:  # type: ignore[override]
        if not isinstance(s, str):
            raise TypeError(f"write() argument must be str, not {type(s).__name__}")
        with self._lock:
            self._parts.append(s)
        return len(s)

    def writable(self) -> bool:
        return True

    def getvalue(self) -> str:
        with self._lock:
            return "".join(self._parts)


# ---- display data -------------------------------------------------------------------------------------

class _Cell:
    """What the running cell has produced: displays (in order)."""

    def __init__(self) -> None:
        self.displays: List[Dict[str, Any]] = []


_current: Optional[_Cell] = None
_formatter = None


def _figure_png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def mime_bundle(obj: Any) -> Dict[str, Any]:
    """The Jupyter mime bundle of an object: text/plain always; text/html for _repr_html_ (pandas);
    image/png for a matplotlib figure and for _repr_png_; what IPython's formatter adds."""
    global _formatter
    data: Dict[str, Any] = {}
    if type(obj).__module__.startswith("matplotlib") and hasattr(obj, "savefig"):
        data["image/png"] = _figure_png(obj)
    try:
        if _formatter is None:
            from IPython.core.formatters import DisplayFormatter
            _formatter = DisplayFormatter()
        fmt, _md = _formatter.format(obj)
        for mime, value in fmt.items():
            if isinstance(value, bytes):
                value = base64.b64encode(value).decode("ascii")
            data.setdefault(mime, value)
    except Exception:  # noqa: BLE001 - IPython missing or a broken _repr_: the basics below
        pass
    if "text/html" not in data and hasattr(obj, "_repr_html_") and not isinstance(obj, type):
        try:
            html = obj._repr_html_()
            if html is not None:
                data["text/html"] = html
        except Exception:  # noqa: BLE001
            pass
    if "text/plain" not in data:
        data["text/plain"] = repr(obj)
    return data


def display(*objs: Any, **_kwargs: Any) -> None:
    """IPython.display.display inside a cell: each object becomes a display of the reply."""
    raw = _kwargs.get("raw", False)
    for obj in objs:
        data = obj if raw and isinstance(obj, dict) else mime_bundle(obj)
        if _current is not None:
            _current.displays.append({"data": data, "metadata": {}})
        else:
            print(data.get("text/plain", repr(obj)))


def _flush_figures() -> None:
    """%matplotlib inline: every open figure becomes an image/png display and is closed."""
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is None or _current is None:
        return
    for num in plt.get_fignums():
        fig = plt.figure(num)
        try:
            _current.displays.append({"data": {"image/png": _figure_png(fig),
                                               "text/plain": repr(fig)}, "metadata": {}})
        finally:
            plt.close(fig)


def _show(*_args: Any, **_kwargs: Any) -> None:
    _flush_figures()


def _patch_display() -> None:
    try:
        import IPython.display as ipd
        import IPython.core.display_functions as idf
        ipd.display = display  # type: ignore[assignment]
        idf.display = display  # type: ignore[assignment]
    except Exception:  # noqa: BLE001
        pass
    plt = sys.modules.get("matplotlib.pyplot")
    if plt is not None and plt.show is not _show:
        plt.show = _show


# ---- magics -------------------------------------------------------------------------------------------

_MAGIC_LINE = re.compile(r"^(\s*)([%!])(.*)$")


class MagicError(Exception):
    pass


def _times(fn: Any) -> Tuple[Any, str]:
    t0, c0 = time.perf_counter(), os.times()
    try:
        value = fn()
    finally:
        wall, c1 = time.perf_counter() - t0, os.times()
        user, sys_ = c1.user - c0.user, c1.system - c0.system
        print(f"CPU times: user {_fmt(user)}, sys: {_fmt(sys_)}, total: {_fmt(user + sys_)}\n"
              f"Wall time: {_fmt(wall)}")
    return value


def _fmt(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.0f} ms"
    return f"{seconds * 1e6:.0f} µs"


def transform_magics(source: str) -> Tuple[str, bool]:
    """(the cell as Python, whether the whole cell is %%time). %time STMT becomes a timed call;
    %matplotlib inline is accepted (it is how JupyterLess always draws); any other %/%%/! line is an
    error naming it."""
    lines = source.splitlines()
    cell_time = False
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and lines[0].strip().startswith("%%"):
        magic = lines[0].strip()[2:].split()
        name = magic[0] if magic else ""
        if name != "time":
            raise MagicError(f"the cell magic %%{name} is not available in JupyterLess "
                             f"(available: %%time, %time, %matplotlib inline)")
        cell_time = True
        lines = lines[1:]
    out = []
    for line in lines:
        m = _MAGIC_LINE.match(line)
        if not m:
            out.append(line)
            continue
        indent, sigil, rest = m.groups()
        if sigil == "!":
            raise MagicError(f"shell commands (!{rest.split()[0] if rest.split() else ''}) are not "
                             f"available in JupyterLess")
        words = rest.split(None, 1)
        name = words[0] if words else ""
        arg = words[1] if len(words) > 1 else ""
        if name == "time":
            out.append(f"{indent}__jupyterless_time__({arg!r})")
        elif name == "matplotlib" and arg.strip() in ("", "inline"):
            out.append(f"{indent}pass")
        else:
            raise MagicError(f"the magic %{name} is not available in JupyterLess "
                             f"(available: %time, %%time, %matplotlib inline)")
    return "\n".join(out) + "\n", cell_time


# ---- running a cell -----------------------------------------------------------------------------------

def _error_reply(reply: Dict[str, Any], ename: str, evalue: str, tb: List[str]) -> None:
    reply.update(status="error", ename=ename, evalue=evalue, traceback=tb)


def _format_tb(exc: BaseException, cell_file: str) -> List[str]:
    te = traceback.TracebackException.from_exception(exc)
    stack = list(te.stack)
    for i, frame in enumerate(stack):
        if frame.filename.startswith("<cell"):
            stack = stack[i:]
            break
    te.stack = traceback.StackSummary.from_list(stack)
    return [line.rstrip("\n") for line in te.format()]


def _read_dir(root: str) -> Dict[str, bytes]:
    files: Dict[str, bytes] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not os.path.islink(os.path.join(dirpath, d))]
        for f in filenames:
            path = os.path.join(dirpath, f)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            rel = os.path.relpath(path, root)
            with open(path, "rb") as fh:
                files[rel] = fh.read()
    return files


def _write_dir(root: str, files: Dict[str, bytes]) -> None:
    for rel, data in files.items():
        path = os.path.normpath(os.path.join(root, rel))
        if not path.startswith(root + os.sep):
            continue
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as fh:
            fh.write(data)


def _view(blob: Any) -> Any:
    """bytes, memoryview, or an InputStream (its buffer, no copy)."""
    if blob is None:
        return None
    if hasattr(blob, "getbuffer"):
        return blob.getbuffer()
    return blob


def parse_request(body: Any) -> Dict[str, Any]:
    if not isinstance(body, dict):
        raise BadRequest("the body must be a JSON object")
    session = body.get("session")
    if not isinstance(session, str) or not SESSION_RE.match(session):
        raise BadRequest("session must be 32 lower-case hex characters (secrets.token_hex(16))")
    code = body.get("code", "")
    if not isinstance(code, str):
        raise BadRequest("code must be a string")
    for kind in ("in", "out"):
        for i in range(SLOTS):
            v = body.get(f"{kind}{i}")
            if v is not None and (not isinstance(v, str) or not NAME_RE.match(v)):
                raise BadRequest(f"{kind}{i} must be null or a blob name of letters, digits, '.', '_', '-'")
    for flag in ("silent", "store_history"):
        if flag in body and not isinstance(body[flag], bool):
            raise BadRequest(f"{flag} must be true or false")
    return body


def execute(body: Dict[str, Any], state_blob: Any, inputs: Dict[str, Any]
            ) -> Tuple[Dict[str, Any], Optional[bytes], Dict[str, bytearray]]:
    """(reply, the new state.pkl or None (write nothing), out slot -> bytes). `inputs`: in slot ->
    bytes / memoryview / InputStream / None."""
    with _LOCK:
        return _execute(body, state_blob, inputs)


def _new_reply() -> Dict[str, Any]:
    return {"status": "ok", "execution_count": 0, "stdout": "", "stderr": "", "result": None,
            "displays": [], "ename": "", "evalue": "", "traceback": [], "large": {}, "warnings": []}


def _execute(body: Dict[str, Any], state_blob: Any, inputs: Dict[str, Any]
             ) -> Tuple[Dict[str, Any], Optional[bytes], Dict[str, bytearray]]:
    global _current
    reply = _new_reply()
    try:
        state = st.load_state(_view(state_blob))
    except Exception as exc:  # noqa: BLE001
        _error_reply(reply, "StateError", str(exc), [f"StateError: {exc}"])
        return reply, None, {}
    manifest: Dict[str, Dict[str, Any]] = state["manifest"]
    reply["execution_count"] = state["execution_count"]
    current_large = {f"in{i}": entry["blob"] for i, (_k, entry) in enumerate(sorted(manifest.items()))}

    # Stale: every large blob the committed manifest names must be bound by this request.
    by_name: Dict[str, Any] = {}
    for i in range(SLOTS):
        name = body.get(f"in{i}")
        view = _view(inputs.get(f"in{i}"))
        if name is not None and view is not None:
            by_name[name] = view
    missing = [k for k, e in manifest.items() if e["blob"] not in by_name]
    if missing:
        reply.update(status="stale", large=current_large,
                     warnings=[f"the request did not bind the large object(s) {', '.join(sorted(missing))}: "
                               f"resend with 'large'; nothing ran"])
        return reply, None, {}

    ns: Dict[str, Any] = {"__name__": st.CELL_MODULE}
    loaded: Dict[int, Tuple[str, Any]] = {}  # id(obj) -> (blob name, the input it came from)
    large_objs: Dict[str, Any] = {}
    try:
        for key, entry in manifest.items():
            obj = st.load_large(by_name[entry["blob"]])
            large_objs[key] = obj
            loaded[id(obj)] = (entry["blob"], by_name[entry["blob"]])
        st.restore_namespace(state, large_objs, ns)
    except Exception as exc:  # noqa: BLE001
        _error_reply(reply, "StateError", f"the session's state cannot be loaded: {exc}",
                     [f"StateError: {exc}"])
        return reply, None, {}

    silent = bool(body.get("silent", False))
    store = bool(body.get("store_history", True)) and not silent
    count = state["execution_count"] + (1 if store else 0)
    reply["execution_count"] = count
    defs = dict(state.get("defs", {}))
    code = body.get("code", "")

    cwd = os.getcwd()
    workdir = tempfile.mkdtemp(prefix="jupyterless-")
    out, err = _Capture(), _Capture()
    saved_io = sys.stdout, sys.stderr, sys.stdin
    cell = _Cell()
    _current = cell
    result_value: Any = None
    has_result = False
    try:
        _write_dir(workdir, state.get("files", {}))
        os.chdir(workdir)
        sys.stdout, sys.stderr, sys.stdin = out, err, _NoStdin()
        _patch_display()
        ns["__builtins__"] = dict(builtins.__dict__, input=_no_input, display=display)
        cell_file = f"<cell-{count}>"
        try:
            source, cell_time = transform_magics(code)
            tree = ast.parse(source, filename=cell_file)
            linecache.cache[cell_file] = (len(source), None, source.splitlines(True), cell_file)
            defs.update(st.top_level_defs(tree, source))
            last_expr = None
            if tree.body and isinstance(tree.body[-1], ast.Expr) and not code.rstrip().endswith(";"):
                last_expr = ast.Expression(tree.body.pop().value)

            def timed(stmt: str) -> Any:
                t = ast.parse(stmt, filename=cell_file)
                if len(t.body) == 1 and isinstance(t.body[0], ast.Expr):
                    return _times(lambda: eval(compile(ast.Expression(t.body[0].value), cell_file, "eval"), ns))
                _times(lambda: exec(compile(t, cell_file, "exec"), ns))
                return None

            ns["__jupyterless_time__"] = timed

            def run() -> Any:
                exec(compile(tree, cell_file, "exec"), ns)
                if last_expr is not None:
                    return True, eval(compile(last_expr, cell_file, "eval"), ns)
                return False, None

            has_result, result_value = _times(run) if cell_time else run()
            if _is_none_result(result_value):
                has_result = False
        except MagicError as exc:
            _error_reply(reply, "UsageError", str(exc), [f"UsageError: {exc}"])
        except BaseException as exc:  # noqa: BLE001 - the cell's error, as IPython shows it
            if isinstance(exc, SystemExit):
                pass
            _error_reply(reply, type(exc).__name__, str(exc), _format_tb(exc, cell_file))
        finally:
            ns.pop("__jupyterless_time__", None)
            try:
                _flush_figures()
            except Exception as exc:  # noqa: BLE001
                err.write(f"JupyterLess: a figure could not be drawn: {exc}\n")
        if has_result and not silent:
            try:
                reply["result"] = mime_bundle(result_value)
            except Exception as exc:  # noqa: BLE001
                err.write(f"JupyterLess: the result could not be displayed: {exc}\n")
        if has_result and store:
            ns["__"] = ns.get("_")
            ns["_"] = result_value
            outs = ns.get("Out")
            if not isinstance(outs, dict):
                outs = {}
            outs[count] = result_value
            ns["Out"] = outs
        files = _read_dir(workdir)
    finally:
        sys.stdout, sys.stderr, sys.stdin = saved_io
        _current = None
        os.chdir(cwd)
        shutil.rmtree(workdir, ignore_errors=True)
        linecache.cache.pop(f"<cell-{count}>", None)
    reply["stdout"] = out.getvalue()
    reply["stderr"] = err.getvalue()
    if not silent:
        reply["displays"] = cell.displays

    # The new state.
    ns.pop("__builtins__", None)
    warnings: List[str] = []
    files, dropped = st.check_files(files)
    if dropped:
        msg = (f"the working directory's files exceed JupyterLess's limit of {st.FILES_LIMIT >> 20} MiB "
               f"in all; not saved: {', '.join(dropped)}")
        if reply["status"] == "ok":
            _error_reply(reply, "JupyterLessLimitError", msg, [f"JupyterLessLimitError: {msg}"])
        else:
            warnings.append(msg)
    found = st.find_large(ns)
    keys = sorted(found)
    if len(keys) > st.MAX_LARGE:
        warnings.append(f"more than {st.MAX_LARGE} large objects: {', '.join(keys[st.MAX_LARGE:])} are kept "
                        f"in the small state")
        keys = keys[:st.MAX_LARGE]
    outputs: Dict[str, bytearray] = {}
    new_manifest: Dict[str, Dict[str, Any]] = {}
    large_ids: Dict[int, str] = {}
    free_outs = [f"out{i}" for i in range(SLOTS) if body.get(f"out{i}") is not None]
    for key in keys:
        obj = found[key]
        size = st.large_size(obj) or 0
        blob_name = None
        prior = loaded.get(id(obj))
        if prior is not None and st.same_large(obj, prior[1]):
            blob_name = prior[0]
        else:
            if not free_outs:
                warnings.append(f"no fresh output name left for the large object {key}: it is kept in the "
                                f"small state")
                continue
            try:
                data = st.dump_large(obj)
            except Exception as exc:  # noqa: BLE001
                warnings.append(f"variable {key!r} ({st._type_name(obj)}) cannot be saved in the session's "
                                f"state and is lost after this cell: {exc}")
                ns_key = key.split("[", 1)[0]
                ns.pop(ns_key, None)
                continue
            slot = free_outs.pop(0)
            outputs[slot] = data
            blob_name = body[slot]
        new_manifest[key] = {"blob": blob_name, "size": size, "type": st._type_name(obj)}
        large_ids[id(obj)] = key
    vars_blob, var_warnings = st.pickle_namespace(ns, large_ids)
    warnings.extend(var_warnings)
    new_state = {"format": st.FORMAT, "execution_count": count, "manifest": new_manifest,
                 "files": files, "defs": st.prune_defs(defs, ns), "vars": vars_blob}
    reply["large"] = {f"in{i}": new_manifest[k]["blob"] for i, k in enumerate(sorted(new_manifest))}
    reply["warnings"] = warnings
    return reply, st.dump_state(new_state), outputs


def _is_none_result(value: Any) -> bool:
    return value is None
