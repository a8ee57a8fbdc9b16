"""Command line: worker.py --host H --port P --worker-id ID [--max-message-length N]."""
from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from typing import List, Optional

DEFAULT_MAX_MESSAGE_LENGTH = 256 * 1024 * 1024


def parse_args(argv: Optional[List[str]]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="worker.py", description="FaaST Python language worker")
    p.add_argument("--host", required=True, help="host's gRPC address, e.g. 127.0.0.1")
    p.add_argument("--port", required=True, type=int)
    p.add_argument("--worker-id", required=True)
    p.add_argument("--max-message-length", type=int, default=DEFAULT_MAX_MESSAGE_LENGTH,
                   help="max gRPC message size in bytes (default 256 MiB)")
    # Azure-Functions-style hosts may pass extra arguments; ignore them.
    args, _unknown = p.parse_known_args(argv)
    return args


def thread_count() -> int:
    default = min(32, (os.cpu_count() or 1) + 4)
    raw = os.environ.get("PYTHON_THREADPOOL_THREAD_COUNT", "")
    try:
        value = int(raw) if raw else default
    except ValueError:
        value = 0
    if value < 1:
        print(f"faast-python-worker: ignoring PYTHON_THREADPOOL_THREAD_COUNT={raw!r}",
              file=sys.stderr)
        return default
    return value


def _exit(code: int) -> None:
    # os._exit: never wait for functions still running on pool threads or for gRPC
    # teardown; the host decides when the worker is done.
    try:
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)


def main(argv: Optional[List[str]] = None) -> None:
    parent_pid = os.getppid()  # as early as possible, to notice the host dying
    args = parse_args(argv)
    from .heap import fix_mmap_threshold, start_trimming

    # Before the functions allocate anything: a large buffer they free is unmapped, not kept in the heap, and what
    # an invocation leaves free in the heap is trimmed after it (heap.py has the measurements).
    fix_mmap_threshold()
    start_trimming()
    from .channel import Options, Worker  # imports grpc and the generated protos

    options = Options(
        host=args.host, port=args.port, worker_id=args.worker_id,
        max_message_length=args.max_message_length, threads=thread_count(),
        debug_logging=os.environ.get("PYTHON_ENABLE_DEBUG_LOGGING", "").lower() in ("1", "true"),
        parent_pid=parent_pid)
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    try:
        code = loop.run_until_complete(Worker(options).run())
    except KeyboardInterrupt:
        code = 130
    except BaseException as exc:  # a worker bug: say so and exit non-zero
        print(f"faast-python-worker: fatal: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 1
    _exit(code)
