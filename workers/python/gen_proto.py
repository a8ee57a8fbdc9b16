#!/usr/bin/python3
"""Generate faast_worker/worker_pb2.py from protos/worker.proto with Debian's protoc.

The generated module is not committed; the worker and the tests call ensure() so a
fresh clone works. Generation goes through a temporary directory and an atomic rename,
because several workers may start at once and must never import a half-written file.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
PROTO_DIR = REPO / "protos"
PROTO = PROTO_DIR / "worker.proto"
OUT_DIR = HERE / "faast_worker"
TARGET = OUT_DIR / "worker_pb2.py"
PROTOC = os.environ.get("FAAST_PROTOC", "/usr/bin/protoc")


def is_stale(target: Path = TARGET) -> bool:
    """True when the generated module is missing or older than the proto."""
    try:
        return target.stat().st_mtime < PROTO.stat().st_mtime
    except FileNotFoundError:
        return True


def generate(out_dir: Path = OUT_DIR) -> Path:
    """Run protoc into a temp dir beside out_dir, then rename into place."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out_dir, prefix=".gen-") as tmp:
        cmd = [PROTOC, "-I", str(PROTO_DIR), f"--python_out={tmp}", str(PROTO)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"protoc failed ({' '.join(cmd)}): {proc.stderr.strip()}")
        target = out_dir / "worker_pb2.py"
        os.replace(Path(tmp) / "worker_pb2.py", target)
    return target


def ensure() -> Path:
    """Generate worker_pb2.py if needed and return the directory holding it.

    Falls back to a private temp dir when the source tree is read-only.
    """
    if not is_stale():
        return OUT_DIR
    try:
        generate(OUT_DIR)
        return OUT_DIR
    except PermissionError:
        fallback = Path(tempfile.gettempdir()) / f"faast-python-proto-{os.getuid()}"
        if is_stale(fallback / "worker_pb2.py"):
            generate(fallback)
        return fallback


if __name__ == "__main__":
    path = generate() if "--force" in sys.argv[1:] else ensure()
    print(path)
