"""A fixed thread pool for sync functions, tuned for many tiny invocations.

Jobs go in through one SimpleQueue; results come back to the event loop in batches:
a completing thread wakes the loop only when no wake-up is already pending, so under
load one loop wake-up delivers many results (each wake-up costs a pipe write and GIL
hand-offs, which dominate the cost of a no-op function).
"""
from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextvars
import logging
import queue
import threading
from typing import Any, Callable, Deque, List

log = logging.getLogger("faast_worker.pool")


class Job:
    __slots__ = ("fn", "args", "started", "cancelled")

    def __init__(self, fn: Callable[..., Any], args: tuple) -> None:
        self.fn = fn
        self.args = args
        self.started = False
        self.cancelled = False


class SyncPool:
    def __init__(self, size: int, loop: asyncio.AbstractEventLoop,
                 deliver: Callable[[Any], None], name: str = "faast-fn",
                 after_job: Callable[[], None] = lambda: None) -> None:
        """deliver(result) is called on the loop thread for every finished job; after_job() on
        the job's thread once its result is on the way to the loop (work that must not delay it)."""
        self._jobs: "queue.SimpleQueue[Job]" = queue.SimpleQueue()
        self._loop = loop
        self._deliver = deliver
        self._results: Deque[Any] = collections.deque()
        self._wakeup_pending = False
        self._claim = threading.Lock()  # start vs. cancel of one job
        self._threads: List[threading.Thread] = []
        self._size = size
        self._name = name
        self._outstanding = 0
        self._count_lock = threading.Lock()
        self._after_job = after_job

    def submit(self, fn: Callable[..., Any], *args: Any) -> Job:
        job = Job(fn, args)
        # `outstanding` counts jobs from submission to completion, so a new thread
        # starts exactly when every existing one has (or is about to get) a job.
        with self._count_lock:
            outstanding = self._outstanding
            self._outstanding = outstanding + 1
        if outstanding >= len(self._threads) and len(self._threads) < self._size:
            self._start_thread()
        self._jobs.put(job)
        return job

    def resize(self, size: int) -> None:
        """Set the most threads the pool may start (threads start on demand, and none
        has before the first job, so a standby worker takes its app's setting here)."""
        with self._count_lock:
            self._size = max(size, len(self._threads), 1)

    def cancel(self, job: Job) -> bool:
        """Cancel a job that has not started; False if it is already running."""
        with self._claim:
            if job.started:
                return False
            job.cancelled = True
            return True

    def _start_thread(self) -> None:
        t = threading.Thread(target=self._work, name=f"{self._name}-{len(self._threads)}",
                             daemon=True)
        self._threads.append(t)
        t.start()

    def _work(self) -> None:
        jobs, claim, count_lock = self._jobs, self._claim, self._count_lock
        results, after_job = self._results, self._after_job
        while True:
            job = jobs.get()
            with claim:
                run = not job.cancelled
                job.started = True
            if run:
                try:
                    results.append(job.fn(*job.args))
                except BaseException:  # job functions report their own errors
                    log.exception("sync job failed")
            with count_lock:
                self._outstanding -= 1
            if run and not self._wakeup_pending:
                self._wakeup_pending = True
                try:
                    self._loop.call_soon_threadsafe(self._drain)
                except RuntimeError:  # loop closed: the worker is exiting
                    return
            if run:
                try:
                    after_job()
                except Exception:  # noqa: BLE001 - housekeeping must not stop the thread
                    log.exception("after-job work failed")

    def _drain(self) -> None:
        # Reset the flag before draining: a result appended after this point
        # either is drained below or schedules a new wake-up.
        self._wakeup_pending = False
        results, deliver = self._results, self._deliver
        while results:
            deliver(results.popleft())


class ContextCopyingExecutor(concurrent.futures.ThreadPoolExecutor):
    """The loop's default executor: runs each call in a copy of the caller's context,
    so `loop.run_in_executor(None, ...)` inside an async function keeps the
    invocation's logging attribution (as asyncio.to_thread does)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> concurrent.futures.Future:
        return super().submit(contextvars.copy_context().run, fn, *args, **kwargs)
