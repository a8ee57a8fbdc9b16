"""A JupyterLess session's state: what a notebook's namespace becomes between two cells (two invocations).

Split as Faa$T's JupyterLess splits it (§3.4): the *small* state (every variable, the cells' definitions, the working
directory's files, the execution count) is one pickle, `sessions/S/state.pkl`; every *large* object (a numpy array, a
pandas DataFrame or Series of at least LARGE_MIN bytes, wherever it sits in the namespace: a variable, an element of a
list, a value of a dict) is a blob of its own, `sessions/S/large/NAME`, referred to from the small pickle by name
(pickle's persistent ids), so the cache's size-aware eviction keeps the small state and lets large objects go first.

A large object is written only when it changed: saving serializes it (pickle protocol 5, its buffers out of band, so
no copy is made to compare) and compares the bytes with the blob it was loaded from, still mapped from the cache. A
changed or new one gets one of the fresh names the kernel sent for this cell; the blob of the version before stays in
storage (the committed small state no longer names it) until the session is reset and storage is cleaned.

Loaded large objects are copies (their buffers are writable bytearrays): a cell may change a DataFrame in place, and
the cache's memory is read-only and valid only during the invocation. The copy costs about one memcpy of the object
(~0.1 s for 350 MB here), the price of the notebook semantics people expect.
"""
from __future__ import annotations

import ast
import io
import os
import pickle
import re
import struct
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

LARGE_MIN = 1 << 20
"""Objects of at least this many bytes (numpy, pandas) are large: a blob each."""

FILES_LIMIT = 64 << 20
"""The working directory kept in the state: at most this many bytes of files in all."""

FORMAT = 1
_MAGIC = b"JLO1"


def large_size(obj: Any) -> int:
    """The bytes of a numpy array or pandas DataFrame/Series (0 for anything else)."""
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray) and obj.dtype != object:
        return int(obj.nbytes)
    pd = sys.modules.get("pandas")
    if pd is not None:
        if isinstance(obj, pd.DataFrame):
            if any(dtype == object for dtype in obj.dtypes):
                return 0  # Python objects: pickled in the small state
            return int(obj.memory_usage(index=True, deep=False).sum())
        if isinstance(obj, pd.Series) and obj.dtype != object:
            return int(obj.memory_usage(index=True, deep=False))
    return 0


def dump_large(obj: Any) -> List[Any]:
    """A large object as its blob's parts (a header, the pickle, then each out-of-band buffer, not copied)."""
    buffers: List[pickle.PickleBuffer] = []
    main = pickle.dumps(obj, protocol=5, buffer_callback=buffers.append)
    raws = [b.raw() for b in buffers]
    header = _MAGIC + struct.pack("<IQ", len(raws), len(main)) + b"".join(struct.pack("<Q", r.nbytes) for r in raws)
    return [header, main, *raws]


def parts_equal(parts: List[Any], blob: memoryview) -> bool:
    """Whether a blob holds exactly these parts (memcmp speed: no part is copied)."""
    if sum(memoryview(p).nbytes for p in parts) != blob.nbytes:
        return False
    at = 0
    for part in parts:
        view = memoryview(part).cast("B")
        if blob[at:at + view.nbytes] != view:
            return False
        at += view.nbytes
    return True


def join(parts: List[Any]) -> bytes:
    return b"".join(parts)


def load_large(blob: memoryview) -> Any:
    """The object a large blob holds; its buffers are writable copies (see the module's docstring)."""
    blob = blob.cast("B")
    if blob[:4] != _MAGIC:
        raise ValueError("not a JupyterLess large object (bad magic)")
    count, main_length = struct.unpack_from("<IQ", blob, 4)
    lengths = struct.unpack_from("<" + "Q" * count, blob, 16)
    at = 16 + 8 * count
    main = blob[at:at + main_length]
    at += main_length
    buffers = []
    for length in lengths:
        buffers.append(bytearray(blob[at:at + length]))
        at += length
    return pickle.loads(main, buffers=buffers)


@dataclass
class Definition:
    """A function or class a cell defined (its source is executed again when the state is loaded)."""
    name: str
    source: str


@dataclass
class State:
    count: int = 0
    variables: Dict[str, bytes] = field(default_factory=dict)  # name -> pickle (persistent ids for large objects)
    definitions: List[Definition] = field(default_factory=list)
    files: Dict[str, bytes] = field(default_factory=dict)  # relative path -> content
    large: Dict[str, int] = field(default_factory=dict)  # blob name -> size (the manifest)
    # variable -> the large blobs its pickle refers to; None for a state saved before this was recorded (then every
    # variable is taken to need every large blob)
    uses: Optional[Dict[str, List[str]]] = None


def decode_state(data: Optional[bytes]) -> State:
    if not data:
        return State()
    raw = pickle.loads(data)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"the session's state.pkl is not JupyterLess state format {FORMAT}")
    return State(count=raw["count"], variables=raw["variables"],
                 definitions=[Definition(n, s) for n, s in raw["definitions"]],
                 files=raw["files"], large=raw["large"], uses=raw.get("uses"))


def encode_state(state: State) -> bytes:
    return pickle.dumps({
        "format": FORMAT, "count": state.count, "variables": state.variables,
        "definitions": [(d.name, d.source) for d in state.definitions],
        "files": state.files, "large": state.large, "uses": state.uses,
    }, protocol=5)


def same_contents(a: State, b: State) -> bool:
    """Whether two states hold the same session (everything but the execution count). Variables compare as their
    pickles: an unchanged object pickles to the same bytes in one process; where it does not (a set of strings in
    another worker process, whose hash seed differs), the state is merely written again."""
    return a.variables == b.variables and a.definitions == b.definitions and a.files == b.files and a.large == b.large


# ---------------------------------------------------------------- which large objects a cell needs

WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
"""A cell's names, as the kernel, the executor and the bench's client all find them: every identifier-like word of
its text (strings and comments included: a superset of the names it uses, so never too few)."""

DYNAMIC = frozenset({
    "globals", "locals", "vars", "dir", "eval", "exec", "compile", "__import__", "__dict__", "__main__",
    "__builtins__", "sys", "get_ipython", "inspect", "gc", "pickle", "who", "whos",
})
"""Words through which a cell can reach variables without naming them (the namespace as a dict, code built at run
time, the garbage collector's referrers): a cell that has one binds every large object."""


def needs(state: State) -> Dict[str, List[str]]:
    """Each name a cell may use -> the large blobs that must be bound for it: a variable, its blobs and those of every
    variable sharing one with it (bound together, an object two variables hold stays one object: a change in place
    through one is seen through the other); a definition (function, class), the needs of the names in its source,
    transitively (a function reads its globals when called). A definition with a DYNAMIC word needs everything."""
    if state.uses is None:
        every = sorted(state.large)
        names = list(state.variables) + [d.name for d in state.definitions if not d.name.startswith("import@")]
        return {name: every for name in names} if every else {}
    # Variables sharing a blob form one group (union-find over blob names).
    parent: Dict[str, str] = {}

    def find(x: str) -> str:
        while parent.setdefault(x, x) != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for blobs in state.uses.values():
        for blob in blobs[1:]:
            parent[find(blob)] = find(blobs[0])
    groups: Dict[str, List[str]] = {}
    for blob in {b for blobs in state.uses.values() for b in blobs}:
        groups.setdefault(find(blob), []).append(blob)
    result: Dict[str, set] = {var: set(groups[find(blobs[0])]) for var, blobs in state.uses.items() if blobs}
    words = {d.name: set(WORD.findall(d.source)) for d in state.definitions if not d.name.startswith("import@")}
    for name in words:
        seen, todo, blobs = {name}, [name], set()
        while todo:
            current = todo.pop()
            if words[current] & DYNAMIC:
                blobs = set(state.large)
                break
            for word in words[current]:
                blobs |= result.get(word, set()) if word not in words else set()
                if word in words and word not in seen:
                    seen.add(word)
                    todo.append(word)
        if blobs:
            result[name] = result.get(name, set()) | blobs
    return {name: sorted(blobs) for name, blobs in result.items()}


def required(code: str, state: State, needed: Optional[Dict[str, List[str]]] = None) -> List[str]:
    """The large blobs a cell must have bound: every one if it has a DYNAMIC word, else those its names need."""
    words = set(WORD.findall(code))
    if words & DYNAMIC or state.uses is None:
        return sorted(state.large)
    needed = needs(state) if needed is None else needed
    return sorted({blob for word in words for blob in needed.get(word, ())})


def new_module() -> types.ModuleType:
    """The session's namespace as a module named __main__ (a notebook's __name__): while a cell runs, and while the
    state is pickled and loaded, it stands in sys.modules["__main__"], so a cell-defined class or function pickles
    by reference and is found again."""
    return types.ModuleType("__main__")


def definitions_of(code: str) -> List[Definition]:
    """The top-level functions and classes a cell defines, with their source (decorators included)."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    found = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            start = min([node.lineno] + [d.lineno for d in node.decorator_list])
            lines = code.splitlines()[start - 1:node.end_lineno]
            found.append(Definition(node.name, "\n".join(lines)))
    return found


class _StatePickler(pickle.Pickler):
    def __init__(self, file: io.BytesIO, large: Callable[[Any], Optional[str]]) -> None:
        super().__init__(file, protocol=5)
        self._large = large

    def persistent_id(self, obj: Any) -> Optional[str]:
        if large_size(obj) >= LARGE_MIN:
            return self._large(obj)
        return None


class _StateUnpickler(pickle.Unpickler):
    def __init__(self, file: io.BytesIO, large: Callable[[str], Any]) -> None:
        super().__init__(file)
        self._large = large

    def persistent_load(self, pid: Any) -> Any:
        return self._large(pid)

    def find_class(self, module: str, name: str) -> Any:
        if module == "__main__" and "__main__" in sys.modules:
            return getattr(sys.modules["__main__"], name)
        return super().find_class(module, name)


@dataclass
class Loaded:
    """A state loaded into a namespace, and what saving it needs to know."""
    namespace: Dict[str, Any]
    blobs: Dict[int, Tuple[str, memoryview]]  # id(object) -> (blob name, the blob it came from)
    objects: List[Any]  # keeps the loaded large objects alive (their ids stay theirs)
    warnings: List[str]
    # variables not loaded because the cell did not bind their large objects: kept as they were (pickle, blobs)
    carried: Dict[str, Tuple[bytes, List[str]]] = field(default_factory=dict)


def load(state: State, large_blobs: Dict[str, memoryview], namespace: Dict[str, Any],
         bound: Optional[set] = None) -> Loaded:
    """Fills `namespace` from the state: definitions first (executed again), then the variables. A variable that
    cannot be loaded is left out with a warning naming it. With `bound` (the large blobs the request bound, whether
    storage had them or not), a variable refers to a blob outside it is not loaded but carried over unchanged: the
    cell does not name it (see required()), so it cannot change it."""
    warnings: List[str] = []
    for definition in state.definitions:
        try:
            exec(compile(definition.source, f"<definition of {definition.name}>", "exec"), namespace)
        except Exception as e:  # noqa: BLE001 - the rest of the state still loads
            warnings.append(f"{definition.name}: its definition could not be run again ({type(e).__name__}: {e})")
    loaded: Dict[str, Any] = {}
    blobs: Dict[int, Tuple[str, memoryview]] = {}
    objects: List[Any] = []

    def large(name: str) -> Any:
        if name not in loaded:
            view = large_blobs.get(name)
            if view is None:
                raise KeyError(f"large object {name} was not bound")
            obj = load_large(view)
            loaded[name] = obj
            blobs[id(obj)] = (name, view)
            objects.append(obj)
        return loaded[name]

    carried: Dict[str, Tuple[bytes, List[str]]] = {}
    for variable, data in state.variables.items():
        uses = (state.uses or {}).get(variable) if state.uses is not None else sorted(state.large)
        if bound is not None and uses and not set(uses) <= bound:
            carried[variable] = (data, list(uses))
            continue
        try:
            namespace[variable] = _StateUnpickler(io.BytesIO(data), large).load()
        except Exception as e:  # noqa: BLE001
            warnings.append(f"{variable}: could not be loaded ({type(e).__name__}: {e}); it is gone")
    return Loaded(namespace, blobs, objects, warnings, carried)


_SKIPPED_TYPES = (types.ModuleType,)


def save(namespace: Dict[str, Any], previous: Loaded, fresh_names: List[str], definitions: List[Definition],
         count: int, files: Dict[str, bytes], previous_sizes: Optional[Dict[str, int]] = None
         ) -> Tuple[State, Dict[str, bytes], List[str]]:
    """The namespace as a state: (the small state, the large blobs to write by name, warnings). Modules are
    imported again by the cells that imported them (they are kept as definitions of their import); functions and
    classes the cells defined come back from their source; a variable that cannot be pickled is left out with a
    warning naming it."""
    warnings: List[str] = []
    writes: Dict[str, bytes] = {}
    manifest: Dict[str, int] = {}
    previous_sizes = previous_sizes or {}
    by_id: Dict[int, str] = {}
    free = list(fresh_names)

    def large(obj: Any) -> Optional[str]:
        key = id(obj)
        if key in by_id:
            return by_id[key]
        parts = dump_large(obj)
        size = sum(memoryview(p).nbytes for p in parts)
        old = previous.blobs.get(key)
        if old is not None and parts_equal(parts, old[1]):
            name = old[0]  # unchanged: the blob the state names already
        else:
            if not free:
                return None  # out of fresh names this cell: kept in the small state instead
            name = free.pop(0)
            writes[name] = join(parts)
        by_id[key] = name
        manifest[name] = size
        return name

    defined = {d.name for d in definitions}
    variables: Dict[str, bytes] = {}
    uses: Dict[str, List[str]] = {}
    used: List[str] = []  # the large blobs the variable being pickled refers to

    def large_of_variable(obj: Any) -> Optional[str]:
        name = large(obj)
        if name is not None and name not in used:
            used.append(name)
        return name

    for variable, value in namespace.items():
        if len(variable) > 4 and variable.startswith("__") and variable.endswith("__") or variable in ("In", "Out", "exit", "quit", "get_ipython", "input"):
            continue
        if isinstance(value, _SKIPPED_TYPES):
            continue  # an import: the cell's import statement is kept as a definition
        if variable in defined and getattr(value, "__module__", None) == "__main__":
            continue  # comes back from its source
        buffer = io.BytesIO()
        used.clear()
        try:
            _StatePickler(buffer, large_of_variable).dump(value)
        except Exception as e:  # noqa: BLE001 - the rest of the state is kept
            warnings.append(f"{variable}: cannot be saved between cells ({type(e).__name__}: {e}); it is not kept")
            continue
        variables[variable] = buffer.getvalue()
        uses[variable] = list(used)
    for variable, (data, blobs) in previous.carried.items():
        if variable not in variables:  # not loaded, so not named by the cell: as it was
            variables[variable] = data
            uses[variable] = blobs
            for blob in blobs:
                manifest[blob] = previous_sizes.get(blob, 0)
    if len(writes) == len(fresh_names) and fresh_names:
        warnings.append(f"more than {len(fresh_names)} large objects changed in one cell: the rest are kept in the small state")
    state = State(count=count, variables=variables, definitions=definitions, files=files, large=manifest, uses=uses)
    return state, writes, warnings


def imports_of(code: str) -> List[Definition]:
    """A cell's top-level import statements, kept like definitions so that modules come back in the next cell."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return []
    lines = code.splitlines()
    return [Definition(f"import@{node.lineno}", "\n".join(lines[node.lineno - 1:node.end_lineno]))
            for node in tree.body if isinstance(node, (ast.Import, ast.ImportFrom))]


def merge_definitions(old: List[Definition], new: List[Definition]) -> List[Definition]:
    """Definitions in the order they were made; a later definition of a name replaces the earlier one; imports are
    kept once each."""
    merged: Dict[str, Definition] = {}
    for d in old + new:
        key = d.source if d.name.startswith("import@") else d.name
        merged.pop(key, None)
        merged[key] = d
    return list(merged.values())


def read_files(directory: str, limit: int = FILES_LIMIT) -> Tuple[Dict[str, bytes], List[str]]:
    """The working directory's files (relative path -> bytes), at most `limit` bytes in all; the warnings name what
    was too large to keep."""
    files: Dict[str, bytes] = {}
    warnings: List[str] = []
    total = 0
    for root, _, names in os.walk(directory):
        for name in sorted(names):
            path = os.path.join(root, name)
            relative = os.path.relpath(path, directory)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            size = os.path.getsize(path)
            if total + size > limit:
                warnings.append(f"file {relative} ({size} bytes) is not kept: the working directory keeps at most "
                                f"{limit >> 20} MiB of files between cells")
                continue
            with open(path, "rb") as f:
                files[relative] = f.read()
            total += size
    return files, warnings


def write_files(directory: str, files: Dict[str, bytes]) -> None:
    for relative, content in files.items():
        path = os.path.join(directory, relative)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(content)
