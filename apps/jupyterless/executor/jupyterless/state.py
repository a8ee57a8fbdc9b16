"""A JupyterLess session's state: what is pickled, what goes to a blob of its own, and back.

Blobs of a session S (container ``jupyterless``):

* ``sessions/S/state.pkl``: the *small state*, one pickle of ``{"format", "execution_count", "manifest",
  "files", "defs", "vars"}``. ``vars`` is itself a pickle (bytes) of the namespace's small variables in which
  every large object is a *persistent id* (its key); ``manifest`` maps each key to ``{"blob", "size", "type"}``.
* ``sessions/S/large/<name>``: one blob per large object (``dump_large``), written only when its bytes
  changed; ``<name>`` is a fresh name the kernel chose, so a losing writer never overwrites a blob the
  committed manifest names.

Large objects: numpy arrays, pandas DataFrames and Series of at least ``LARGE_THRESHOLD`` bytes, as
top-level variables or as elements of a top-level list, tuple or dict (key ``name``, ``name[0]``,
``name['k']``). At most ``MAX_LARGE`` (the function's 32 input/output slots); more stay in the small pickle
with a warning.

Loading a large object: the input arrives as ``bytes`` or as a read-only ``memoryview`` of the runtime's
shared memory, valid only during the invocation. Each out-of-band buffer (the array's data) is copied
once into a ``bytearray`` and the object is built over it: it owns writable memory, so a cell may modify
an array or DataFrame in place, and it outlives the invocation. (Building over the input directly would
give read-only arrays, and over shared memory a dangling one.) The input itself is kept only until the
state is saved, to tell whether the object changed: the new serialization is compared with it piecewise,
and an equal object is not written again.

Functions and classes defined in cells (``__module__ == "__main__"``) cannot be pickled by reference:
their source (the top-level ``def``/``class`` statement, decorators included) is kept in ``defs`` and
re-executed before the variables are unpickled; the variables refer to them by name. Modules are pickled
as their import name. Anything else that cannot be pickled is left out, each variable named in a warning.
"""
from __future__ import annotations

import ast
import importlib
import io
import linecache
import pickle
import struct
import threading
import types
from typing import Any, Dict, Iterable, List, Optional, Tuple

FORMAT = 1
LARGE_THRESHOLD = 1 << 20  # 1 MiB
MAX_LARGE = 32
FILES_LIMIT = 64 << 20  # the working directory's files, in all
LARGE_MAGIC = b"JLL1"
STATE_MAGIC = b"JLS1"
CELL_MODULE = "__main__"


class StateError(Exception):
    """The state cannot be loaded or saved; the message says what and why."""


def empty_state() -> Dict[str, Any]:
    return {"format": FORMAT, "execution_count": 0, "manifest": {}, "files": {}, "defs": {},
            "vars": b""}


# ---- large objects ----------------------------------------------------------------------------------

def large_size(obj: Any) -> Optional[int]:
    """The size in bytes of a numpy array / pandas DataFrame or Series, else None."""
    mod = type(obj).__module__ or ""
    try:
        if mod.startswith("numpy") and type(obj).__name__ == "ndarray":
            if obj.dtype.hasobject:
                return None  # object arrays pickle their elements inline: not a plain buffer
            return int(obj.nbytes)
        if mod.startswith("pandas") and type(obj).__name__ in ("DataFrame", "Series"):
            usage = obj.memory_usage(index=True, deep=False)
            return int(usage.sum()) if hasattr(usage, "sum") else int(usage)
    except Exception:  # a broken object: treat it as small (it may still fail to pickle, named)
        return None
    return None


def is_large(obj: Any) -> bool:
    size = large_size(obj)
    return size is not None and size >= LARGE_THRESHOLD


def find_large(ns: Dict[str, Any]) -> Dict[str, Any]:
    """key -> object for the large objects of a namespace: top-level values and elements of top-level
    lists, tuples and dicts. The same object under two keys is listed once (its first key)."""
    found: Dict[str, Any] = {}
    seen = set()

    def add(key: str, obj: Any) -> None:
        if id(obj) not in seen and is_large(obj):
            seen.add(id(obj))
            found[key] = obj

    for name in sorted(ns):
        value = ns[name]
        if type(value) in (list, tuple):
            for i, item in enumerate(value):
                add(f"{name}[{i}]", item)
        elif type(value) is dict:
            for k, item in list(value.items()):
                add(f"{name}[{k!r}]", item)
        else:
            add(name, value)
    return found


def _type_name(obj: Any) -> str:
    t = type(obj)
    return f"{t.__module__}.{t.__qualname__}"


def _large_parts(obj: Any) -> Tuple[bytes, List[memoryview]]:
    buffers: List[pickle.PickleBuffer] = []
    header = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    views = []
    for b in buffers:
        v = b.raw()  # contiguous bytes of the buffer, no copy
        views.append(v)
    return header, views


def _layout(header: bytes, views: List[memoryview]) -> List[Any]:
    parts: List[Any] = [LARGE_MAGIC, struct.pack("<QI", len(header), len(views)), header]
    for v in views:
        parts.append(struct.pack("<Q", v.nbytes))
        parts.append(v)
    return parts


def dump_large(obj: Any) -> bytearray:
    """One large object as a blob: magic, header length, buffer count, the pickle (protocol 5) with its
    buffers out of band, then each buffer (length, bytes)."""
    header, views = _large_parts(obj)
    parts = _layout(header, views)
    out = bytearray(sum(len(p) if isinstance(p, bytes) else p.nbytes for p in parts))
    pos = 0
    for p in parts:
        n = len(p) if isinstance(p, bytes) else p.nbytes
        out[pos:pos + n] = p
        pos += n
    return out


def same_large(obj: Any, blob: Any) -> bool:
    """Whether dump_large(obj) would equal `blob` (bytes or memoryview), compared piece by piece
    without building the new blob."""
    if blob is None:
        return False
    try:
        header, views = _large_parts(obj)
    except Exception:
        return False
    view = memoryview(blob).cast("B") if not isinstance(blob, memoryview) or blob.format != "B" else blob
    pos = 0
    total = view.nbytes
    for p in _layout(header, views):
        if isinstance(p, bytes):
            n = len(p)
            if pos + n > total or view[pos:pos + n] != p:
                return False
        else:
            n = p.nbytes
            if pos + n > total:
                return False
            src = p.cast("B") if p.format != "B" else p
            if view[pos:pos + n] != src:  # compares in place, no copy
                return False
        pos += n
    return pos == total


def load_large(blob: Any) -> Any:
    """The object of a dump_large blob. `blob` may be bytes or a (read-only, short-lived) memoryview:
    each buffer is copied once into a bytearray, so the object is writable and independent of it."""
    view = memoryview(blob)
    if view.format != "B" or view.ndim != 1:
        view = view.cast("B")
    if view.nbytes < 16 or view[:4].tobytes() != LARGE_MAGIC:
        raise StateError("not a JupyterLess large-object blob (bad magic)")
    header_len, count = struct.unpack("<QI", view[4:16].tobytes())
    pos = 16
    header = view[pos:pos + header_len].tobytes()
    pos += header_len
    buffers = []
    for _ in range(count):
        (n,) = struct.unpack("<Q", view[pos:pos + 8].tobytes())
        pos += 8
        if pos + n > view.nbytes:
            raise StateError("truncated large-object blob")
        buf = bytearray(n)
        buf[:] = view[pos:pos + n]
        buffers.append(buf)
        pos += n
    return pickle.loads(header, buffers=buffers)


# ---- the small state --------------------------------------------------------------------------------

_local = threading.local()


def _cell_global(name: str) -> Any:
    """Unpickling: a function or class defined in a cell, by name in the namespace being loaded."""
    ns = getattr(_local, "ns", None)
    if ns is None or name not in ns:
        raise StateError(f"the definition of {name!r} is missing from the state")
    return ns[name]


class _Pickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, ns: Dict[str, Any], large_ids: Dict[int, str]) -> None:
        super().__init__(file, protocol=5)
        self._ns = ns
        self._large_ids = large_ids

    def persistent_id(self, obj: Any) -> Optional[str]:
        return self._large_ids.get(id(obj))

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, types.ModuleType):
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == CELL_MODULE:
            name = getattr(obj, "__qualname__", getattr(obj, "__name__", ""))
            if self._ns.get(name) is obj:
                return _cell_global, (name,)
            raise pickle.PicklingError(f"{name!r} is defined in a cell but not a top-level name")
        return NotImplemented


class _Unpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, large: Dict[str, Any]) -> None:
        super().__init__(file)
        self._large = large

    def persistent_load(self, pid: Any) -> Any:
        try:
            return self._large[pid]
        except KeyError:
            raise StateError(f"large object {pid!r} was not loaded") from None

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == "_cell_global":
            return _cell_global
        return super().find_class(module, name)


def _pickle_vars(values: Dict[str, Any], ns: Dict[str, Any], large_ids: Dict[int, str]) -> bytes:
    buf = io.BytesIO()
    _Pickler(buf, ns, large_ids).dump(values)
    return buf.getvalue()


def _unpicklable_reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0][:300]


def pickle_namespace(ns: Dict[str, Any], large_ids: Dict[int, str]) -> Tuple[bytes, List[str]]:
    """The namespace's variables as one pickle (large objects as persistent ids) and a warning for each
    variable that could not be pickled (left out; the rest is kept)."""
    values = {k: v for k, v in ns.items() if not (k.startswith("__") and k.endswith("__"))}
    try:
        return _pickle_vars(values, ns, large_ids), []
    except Exception:
        pass
    warnings = []
    keep = {}
    for name in sorted(values):
        try:
            _pickle_vars({name: values[name]}, ns, large_ids)
            keep[name] = values[name]
        except Exception as exc:  # noqa: BLE001 - any failure: leave the variable out, named
            warnings.append(f"variable {name!r} ({_type_name(values[name])}) cannot be saved in the "
                            f"session's state and is lost after this cell: {_unpicklable_reason(exc)}")
    try:
        return _pickle_vars(keep, ns, large_ids), warnings
    except Exception as exc:  # noqa: BLE001 - together they still fail (rare): keep nothing, say so
        warnings.append(f"the variables could not be saved together ({_unpicklable_reason(exc)}); "
                        f"the session's variables are lost after this cell")
        return _pickle_vars({}, ns, large_ids), warnings


def dump_state(state: Dict[str, Any]) -> bytes:
    return STATE_MAGIC + pickle.dumps(state, protocol=5)


def load_state(blob: Any) -> Dict[str, Any]:
    """The small state of a state.pkl blob (bytes/memoryview), or an empty state for None or b''."""
    if blob is None:
        return empty_state()
    view = memoryview(blob)
    if view.nbytes == 0:
        return empty_state()
    data = view.tobytes()
    if not data.startswith(STATE_MAGIC):
        raise StateError("the session's state.pkl is not a JupyterLess state (bad magic)")
    state = pickle.loads(data[len(STATE_MAGIC):])
    if not isinstance(state, dict) or state.get("format") != FORMAT:
        raise StateError(f"the session's state has an unknown format {state.get('format')!r}")
    return state


def restore_namespace(state: Dict[str, Any], large: Dict[str, Any], ns: Dict[str, Any]) -> None:
    """Re-run the cells' definitions into ns, then unpickle the variables into it (large objects from
    `large`, key -> loaded object)."""
    for name, source in state.get("defs", {}).items():
        filename = f"<cell-definition-{name}>"
        linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)  # tracebacks
        try:
            exec(compile(source, filename, "exec"), ns)
        except Exception as exc:  # noqa: BLE001
            raise StateError(f"re-running the definition of {name!r} failed: {exc!r}") from None
    data = state.get("vars") or b""
    if not data:
        return
    _local.ns = ns
    try:
        values = _Unpickler(io.BytesIO(data), large).load()
    except StateError:
        raise
    except Exception as exc:  # noqa: BLE001
        raise StateError(f"the session's variables cannot be loaded: {exc!r}") from None
    finally:
        _local.ns = None
    ns.update(values)


def top_level_defs(tree: ast.Module, source: str) -> Dict[str, str]:
    """name -> source (decorators included) of the top-level def/class statements of a cell."""
    lines = source.splitlines(keepends=True)
    defs = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            defs[node.name] = "".join(lines[start - 1:node.end_lineno])
    return defs


def prune_defs(defs: Dict[str, str], ns: Dict[str, Any]) -> Dict[str, str]:
    """Only the definitions whose name still holds a function or class defined in a cell."""
    keep = {}
    for name, src in defs.items():
        obj = ns.get(name)
        if isinstance(obj, (types.FunctionType, type)) and getattr(obj, "__module__", None) == CELL_MODULE:
            keep[name] = src
    return keep


def files_total(files: Dict[str, bytes]) -> int:
    return sum(len(v) for v in files.values())


def check_files(files: Dict[str, bytes], limit: Optional[int] = None) -> Tuple[Dict[str, bytes], List[str]]:
    """Keep files (smallest first) up to `limit` (FILES_LIMIT) bytes in all; the rest are named in the errors."""
    limit = FILES_LIMIT if limit is None else limit
    keep: Dict[str, bytes] = {}
    dropped = []
    total = 0
    for name in sorted(files, key=lambda n: (len(files[n]), n)):
        size = len(files[name])
        if total + size > limit:
            dropped.append(f"{name} ({size} bytes)")
            continue
        keep[name] = files[name]
        total += size
    return keep, dropped


def slot_names(names: Iterable[str]) -> Dict[str, str]:
    return {f"in{i}": n for i, n in enumerate(names)}
