"""The generated protobuf module, (re)generated on import when missing or stale."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

_WORKER_DIR = Path(__file__).resolve().parent.parent


def _load() -> ModuleType:
    if str(_WORKER_DIR) not in sys.path:
        sys.path.insert(0, str(_WORKER_DIR))
    import gen_proto  # lives beside worker.py

    out_dir = gen_proto.ensure()
    if out_dir == Path(__file__).resolve().parent:
        from . import worker_pb2
        return worker_pb2
    # Read-only source tree: the module was generated into a private directory.
    spec = importlib.util.spec_from_file_location(
        "faast_worker.worker_pb2", out_dir / "worker_pb2.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pb = _load()

METHOD = "/faast.worker.v1.WorkerChannel/EventStream"

StreamingMessage = pb.StreamingMessage
TypedData = pb.TypedData
StatusResult = pb.StatusResult
RpcLog = pb.RpcLog
BindingInfo = pb.BindingInfo

SUCCESS = pb.StatusResult.SUCCESS
FAILURE = pb.StatusResult.FAILURE
CANCELLED = pb.StatusResult.CANCELLED
