"""Worker indexing for the Python v2 programming model: the app's functions are registered
with decorators in function_app.py (or the file the app setting PYTHON_SCRIPT_FILE_NAME
names), so the host asks the worker for them (FunctionsMetadataRequest) instead of scanning
function.json folders. The script is imported once per worker process; its FunctionApp
objects are asked for their functions, and a later FunctionLoadRequest for one of them is
answered from this registry (never by importing the script again, which would register
every function a second time)."""
from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from types import ModuleType
from typing import Any, Dict, List, Optional, Tuple

from .protos import FAILURE, SUCCESS, pb

DEFAULT_SCRIPT = "function_app.py"

_lock = threading.Lock()
# (script path, module, {function name (lower case): azure.functions.Function})
_indexed: Optional[Tuple[Path, ModuleType, Dict[str, Any]]] = None


class AppIndexError(Exception):
    """The app cannot be indexed; the message names the file (and line) and the cause."""


def script_path(app_dir: str) -> Path:
    name = os.environ.get("PYTHON_SCRIPT_FILE_NAME") or DEFAULT_SCRIPT
    return Path(app_dir) / name


def _describe(script: Path, exc: BaseException) -> str:
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" if exc.lineno else "unknown line"
        return f"{exc.filename or script}: syntax error at {where}: {exc.msg}"
    tb = exc.__traceback__
    line = None
    while tb is not None:  # the deepest frame in the app's script: where it threw
        if tb.tb_frame.f_code.co_filename == str(script):
            line = tb.tb_lineno
        tb = tb.tb_next
    at = f" (line {line})" if line else ""
    return f"{script}{at}: importing the app failed: {type(exc).__name__}: {exc}"


def _import(script: Path) -> ModuleType:
    import importlib.util
    name = "function_app" if script.stem == "function_app" else f"_faast_app_{script.stem}"
    spec = importlib.util.spec_from_file_location(name, script)
    if spec is None or spec.loader is None:
        raise AppIndexError(f"{script}: cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def index(app_dir: str) -> Optional[List[Any]]:
    """The app's functions (azure.functions.Function objects), importing the script on the
    first call; None when the app has no such script (function.json indexing applies).
    Raises AppIndexError naming the file for an import or registration failure."""
    global _indexed
    with _lock:
        script = script_path(app_dir)
        if _indexed is not None and _indexed[0] == script:
            return list(_indexed[2].values())
        if not script.is_file():
            return None
        from azure.functions import FunctionApp, FunctionRegistrationError
        try:
            module = _import(script)
        except Exception as exc:
            raise AppIndexError(_describe(script, exc)) from exc
        apps = [v for v in vars(module).values() if isinstance(v, FunctionApp)]
        if not apps:
            raise AppIndexError(f"{script}: defines no azure.functions.FunctionApp "
                              f"(app = func.FunctionApp() at module level)")
        functions: Dict[str, Any] = {}
        for app in apps:
            try:
                found = app.get_functions()
            except FunctionRegistrationError as exc:
                raise AppIndexError(f"{script}: {exc}") from exc
            for fn in found:
                key = fn.get_function_name().lower()
                if key in functions:
                    raise AppIndexError(f"{script}: function '{fn.get_function_name()}': two "
                                      f"FunctionApp objects register a function of this name")
                functions[key] = fn
        _indexed = (script, module, functions)
        return list(functions.values())


def lookup(name: str) -> Optional[Any]:
    """The indexed function of this name (case-insensitive), if the app was indexed."""
    with _lock:
        return None if _indexed is None else _indexed[2].get(name.lower())


def indexed_script() -> Optional[Path]:
    with _lock:
        return None if _indexed is None else _indexed[0]


def _retry(fn: Any, meta: "pb.RpcFunctionMetadata") -> None:
    retry = fn.get_retry()
    if not retry:
        return
    from azure.functions._function_app import parse_timespan
    opts = meta.retry_options
    opts.max_retry_count = int(retry["maxRetryCount"])
    if retry["strategy"] == "fixedDelay":
        opts.retry_strategy = pb.RpcRetryOptions.fixed_delay
        opts.delay_interval.FromTimedelta(parse_timespan(retry["delayInterval"], "delay_interval"))
    else:
        opts.retry_strategy = pb.RpcRetryOptions.exponential_backoff
        opts.minimum_interval.FromTimedelta(parse_timespan(retry["minimumInterval"], "minimum_interval"))
        opts.maximum_interval.FromTimedelta(parse_timespan(retry["maximumInterval"], "maximum_interval"))


def metadata_response(app_dir: str, out: "pb.FunctionMetadataResponse") -> None:
    """Fills the answer to FunctionsMetadataRequest (see the module's docstring)."""
    try:
        functions = index(app_dir)
    except AppIndexError as exc:
        out.result.status = FAILURE
        out.result.result = str(exc)
        out.result.exception.message = str(exc)
        out.result.exception.source = "faast-python-worker"
        return
    if functions is None:
        out.use_default_metadata_indexing = True
        out.result.status = SUCCESS
        return
    script = script_path(app_dir)
    for fn in functions:
        meta = out.function_metadata_results.add()
        meta.name = fn.get_function_name()
        meta.function_id = fn.get_function_name()
        meta.directory = str(Path(app_dir))
        meta.script_file = str(script)
        meta.entry_point = fn.get_function_name()
        meta.language = "python"
        meta.raw_bindings.extend(json.dumps(b) for b in fn.get_bindings_dict()["bindings"])
        _retry(fn, meta)
    out.result.status = SUCCESS
