"""Loads a function's script the way Azure Functions does, and inspects its entry
point once so that invocations need no reflection."""
from __future__ import annotations

import importlib.machinery
import importlib.util
import inspect
import keyword
import os
import pkgutil
import re
import sys
import typing
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, FrozenSet, Optional, Tuple

from . import bindings
from .protos import pb

DEFAULT_ENTRY_POINT = "main"
DEFAULT_SCRIPT = "__init__.py"

# Parameter kinds.
IN, OUT, CONTEXT = 0, 1, 2


class FunctionLoadError(Exception):
    """The function cannot be loaded; the message names function, file and cause."""


@dataclass(frozen=True)
class Param:
    name: str
    kind: int
    decode: Optional[bindings.Decoder]
    has_default: bool
    # The decoder also takes the invocation's trigger metadata (func.QueueMessage).
    with_metadata: bool = False


@dataclass(frozen=True)
class FunctionInfo:
    function_id: str
    name: str
    directory: str
    func: Callable[..., Any]
    is_async: bool
    params: Tuple[Param, ...]
    out_names: Tuple[str, ...]
    has_return: bool
    log_category: str
    # Output bindings (and "$return") of type "blob": these may go through shared memory.
    blob_outputs: FrozenSet[str] = frozenset()
    # The output binding ("$return" or a name) of type "http", if any: where a request the
    # function could not parse (a malformed form body) gets its 400.
    http_output: Optional[str] = None


def add_app_paths(app_dir: str) -> None:
    """Make the app's shared modules and vendored packages importable, after the
    worker's own directory (which must win for azure.functions)."""
    candidates = [app_dir, os.path.join(app_dir, ".python_packages", "lib", "site-packages")]
    pos = 1 if sys.path else 0
    for path in candidates:
        if os.path.isdir(path) and path not in sys.path:
            sys.path.insert(pos, path)
            pos += 1
    import azure  # pkgutil-style namespace: pick up azure.* packages the app brings
    azure.__path__ = pkgutil.extend_path(list(azure.__path__), "azure")


def _safe_name(text: str) -> str:
    return re.sub(r"\W", "_", text) or "_"


def _module_in_dir(module: ModuleType, directory: Path) -> bool:
    return any(Path(p) == directory for p in getattr(module, "__path__", ()) or ())


def _package_name(pkg_dir: Path) -> str:
    """The function folder's own name (so `import FuncName` from other code finds the
    same module), unless that would shadow or clash with another module."""
    base = pkg_dir.name
    if base.isidentifier() and not keyword.iskeyword(base):
        existing = sys.modules.get(base)
        if existing is not None:
            if _module_in_dir(existing, pkg_dir):
                return base
        else:
            try:
                spec = importlib.util.find_spec(base)
            except (ImportError, ValueError):
                spec = None
            if spec is None or any(Path(p) == pkg_dir
                                   for p in spec.submodule_search_locations or ()):
                return base
    return f"_faast_fn_{_safe_name(base)}_{abs(hash(str(pkg_dir))):x}"


def _exec_new_module(spec: importlib.machinery.ModuleSpec) -> ModuleType:
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        if spec.loader is not None:
            spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(spec.name, None)
        raise
    return module


def _import_package(name: str, pkg_dir: Path) -> ModuleType:
    existing = sys.modules.get(name)
    if existing is not None and _module_in_dir(existing, pkg_dir):
        return existing
    init = pkg_dir / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(pkg_dir)])
        assert spec is not None
    else:  # folder without __init__.py: an empty package so relative imports work
        spec = importlib.machinery.ModuleSpec(name, None, is_package=True)
        spec.submodule_search_locations = [str(pkg_dir)]
    return _exec_new_module(spec)


def import_script(script: Path) -> ModuleType:
    """Import script as (a module of) its folder's package, so that relative imports
    (`from . import helper`) work as in Azure Functions."""
    pkg_dir = script.parent
    pkg_name = _package_name(pkg_dir)
    package = _import_package(pkg_name, pkg_dir)
    if script.name == "__init__.py":
        return package
    mod_name = f"{pkg_name}.{_safe_name(script.stem)}"
    existing = sys.modules.get(mod_name)
    if existing is not None and getattr(existing, "__file__", None) == str(script):
        return existing
    spec = importlib.util.spec_from_file_location(mod_name, script)
    assert spec is not None
    module = _exec_new_module(spec)
    setattr(package, _safe_name(script.stem), module)
    return module


def _describe_import_error(name: str, script: Path, exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" if exc.lineno else "unknown line"
        file = exc.filename or str(script)
        return (f"function '{name}': syntax error in '{file}' at {where}: "
                f"{exc.msg}")
    return (f"function '{name}': importing '{script}' failed: "
            f"{type(exc).__name__}: {exc}")


def resolve_script(metadata: "pb.FunctionMetadata") -> Path:
    script = metadata.script_file or DEFAULT_SCRIPT
    path = Path(script)
    if not path.is_absolute():
        path = Path(metadata.directory or os.getcwd()) / path
    return path


def load_entry_point(metadata: "pb.FunctionMetadata") -> Callable[..., Any]:
    name = metadata.name
    script = resolve_script(metadata)
    from . import indexer
    if indexer.indexed_script() == script or (
            script.name == indexer.script_path(str(script.parent)).name
            and not (script.parent / "function.json").is_file()  # not a v1 function's folder
            and _index_for_load(script)):
        # A function the app registered with decorators (Python v2): from the registry of the
        # one import of the app's script, by the host's name for it.
        fn = indexer.lookup(name) or indexer.lookup(metadata.entry_point or "")
        if fn is None:
            raise FunctionLoadError(
                f"function '{name}': '{script}' registers no function of this name")
        return fn.get_user_function()
    if not script.is_file():
        raise FunctionLoadError(f"function '{name}': script file '{script}' not found")
    if script.suffix != ".py":
        raise FunctionLoadError(f"function '{name}': script file '{script}' is not a .py file")
    try:
        module = import_script(script)
    except Exception as exc:
        raise FunctionLoadError(_describe_import_error(name, script, exc)) from exc

    entry = metadata.entry_point or DEFAULT_ENTRY_POINT
    target: Any = module
    for part in entry.split("."):
        target = getattr(target, part, _MISSING)
        if target is _MISSING:
            raise FunctionLoadError(
                f"function '{name}': entry point '{entry}' not found in '{script}'")
    if not callable(target):
        raise FunctionLoadError(
            f"function '{name}': entry point '{entry}' in '{script}' is not callable "
            f"(it is a {type(target).__name__})")
    return target


_MISSING = object()


def _index_for_load(script: Path) -> bool:
    """A load for the app's v2 script that came without a metadata request first: index now
    (raises FunctionLoadError with the indexing error). True when the script is the app's."""
    from . import indexer
    try:
        return indexer.index(str(script.parent)) is not None
    except indexer.AppIndexError as exc:
        raise FunctionLoadError(str(exc)) from exc


def _is_async(fn: Callable[..., Any]) -> bool:
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # callable objects with `async def __call__`
    return call is not None and inspect.iscoroutinefunction(call)


def build_params(fn: Callable[..., Any], metadata: "pb.FunctionMetadata") -> Tuple[Param, ...]:
    name = metadata.name
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise FunctionLoadError(f"function '{name}': cannot inspect entry point: {exc}") from exc
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable string annotations: fall back to the raw ones
        hints = {}
    out_bindings = {
        b for b, info in metadata.bindings.items()
        if info.direction == pb.BindingInfo.OUT and b != "$return"}
    params = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        if p.kind is p.POSITIONAL_ONLY:
            raise FunctionLoadError(
                f"function '{name}': parameter '{p.name}' is positional-only; "
                f"bindings are passed by name")
        ann = hints.get(p.name, p.annotation)
        has_default = p.default is not p.empty
        if bindings.is_context_annotation(ann) or (
                p.name == "context" and p.name not in metadata.bindings):
            params.append(Param(p.name, CONTEXT, None, has_default))
        elif bindings.is_out_annotation(ann) or (
                p.name in out_bindings and ann is p.empty):
            params.append(Param(p.name, OUT, None, has_default))
        else:
            decode_ann = None if ann is p.empty else ann
            decoder = bindings.decoder_for(decode_ann)
            params.append(Param(p.name, IN, decoder, has_default,
                                getattr(decoder, "with_metadata", False)))
    return tuple(params)


def load_function(function_id: str, metadata: "pb.FunctionMetadata") -> FunctionInfo:
    fn = load_entry_point(metadata)
    params = build_params(fn, metadata)
    return FunctionInfo(
        function_id=function_id,
        name=metadata.name,
        directory=metadata.directory,
        func=fn,
        is_async=_is_async(fn),
        params=params,
        out_names=tuple(p.name for p in params if p.kind == OUT),
        has_return="$return" in metadata.bindings,
        log_category=f"Function.{metadata.name}.User",
        blob_outputs=frozenset(
            b for b, info in metadata.bindings.items()
            if info.direction in (pb.BindingInfo.OUT, pb.BindingInfo.INOUT)
            and info.type.lower() == "blob"),
        http_output=next(
            (b for b, info in metadata.bindings.items()
             if info.direction in (pb.BindingInfo.OUT, pb.BindingInfo.INOUT)
             and info.type.lower() == "http"), None),
    )
