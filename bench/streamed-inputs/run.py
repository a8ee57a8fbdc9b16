#!/usr/bin/env python3
"""Streamed large inputs (cache.streamThreshold), streamed vs whole, side by side in one run.

A Python function reads a blob input that misses the cache through func.InputStream in 1 MiB
read1() chunks and reports when its first 64 KiB arrived and when it had the last byte. The
same blobs are read by a host with the default streamThreshold (8 MiB: streamed) and by one
with streamThreshold 0 (read whole before the invocation is sent), each started fresh so every
read is a miss. Storage: the Azurite `./faast start` runs for the app (loopback, on disk).

    bench/streamed-inputs/run.py [--sizes 64,256] [--reps 3] [--port 7391]

Prints a table of medians: time to the function's first byte and to its last byte, measured
from the client sending the request (one clock: client, host and worker share the machine).
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

REPO = pathlib.Path(__file__).resolve().parents[2]
FAAST = str(REPO / "faast")

FUNCTION = '''
import json, time
import azure.functions as func

def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    first = inblob.read(65536)
    t_first = time.time()
    n = len(first)
    while True:
        chunk = inblob.read1(1 << 20)
        if not chunk:
            break
        n += len(chunk)
    return func.HttpResponse(json.dumps({"first": t_first, "end": time.time(), "bytes": n}))
'''

FUNCTION_JSON = {"bindings": [
    {"type": "httpTrigger", "direction": "in", "name": "req", "methods": ["get"], "route": "read/{name}"},
    {"type": "blob", "direction": "in", "name": "inblob", "path": "data/{name}"},
    {"type": "http", "direction": "out", "name": "$return"}]}


def make_app(root: pathlib.Path) -> None:
    (root / "Read").mkdir(parents=True)
    (root / "Read" / "__init__.py").write_text(FUNCTION)
    (root / "Read" / "function.json").write_text(json.dumps(FUNCTION_JSON))
    (root / "host.json").write_text(json.dumps({"version": "2.0", "functionTimeout": "00:05:00",
                                                "extensions": {"http": {"routePrefix": "api"}}}))
    (root / "local.settings.json").write_text(json.dumps({"IsEncrypted": False, "Values": {
        "FUNCTIONS_WORKER_RUNTIME": "python", "AzureWebJobsStorage": "UseDevelopmentStorage=true"}}))


def start(app: pathlib.Path, port: int, stream_threshold: str) -> subprocess.Popen:
    (app / "faast.json").write_text(json.dumps({"cache": {"cacheCapacity": "1GiB", "streamThreshold": stream_threshold}}))
    log = open(app / f"host-{stream_threshold}.log", "w")
    host = subprocess.Popen([FAAST, "start", str(app), "--port", str(port), "--no-peers"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 180
    while True:
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{port}/admin/host/ping", timeout=2).read()
            return host
        except Exception:
            if host.poll() is not None or time.monotonic() > deadline:
                log.close()
                raise SystemExit(f"the host did not start:\n{(app / f'host-{stream_threshold}.log').read_text()[-3000:]}")
            time.sleep(0.5)


def stop(host: subprocess.Popen) -> None:
    host.terminate()
    try:
        host.wait(60)
    except subprocess.TimeoutExpired:
        host.kill()
        host.wait()


def read(port: int, name: str) -> tuple[float, float]:
    t0 = time.time()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/read/{name}", timeout=300).read()
    r = json.loads(body)
    return (r["first"] - t0) * 1000, (r["end"] - t0) * 1000


def write_results(args: argparse.Namespace, metrics: dict, results: dict) -> None:
    """bench/results/streamed-inputs.json: the medians, every miss, and the machine (the runs are on a shared one)."""
    doc = {
        "scenario": "streamed-inputs",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"uname": " ".join(os.uname()), "cpus": os.cpu_count(),
                    "loadavg_at_end": pathlib.Path("/proc/loadavg").read_text().strip()},
        "config": {"sizes_mib": args.sizes, "reps": args.reps, "storage": "Azurite on loopback, as ./faast start runs it",
                   "streamed": "cache.streamThreshold 8MiB", "whole": "cache.streamThreshold 0",
                   "clock": "from the client sending the request to the function's first 64 KiB / last byte"},
        "metrics": metrics,
        "misses_ms": {f"{mode}_{size}mib": [[round(a, 1), round(b, 1)] for a, b in rows]
                      for (mode, size), rows in results.items()},
    }
    out = REPO / "bench" / "results" / "streamed-inputs.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256", help="blob sizes in MiB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port", type=int, default=7391)
    args = ap.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    # The directory's name is the app's: a name ./faast start accepts (mkdtemp's may hold '_').
    work = pathlib.Path(tempfile.mkdtemp(prefix="faast-streamed-bench-"))
    app = work / "streamed-bench"
    try:
        make_app(app)
        results: dict[tuple[str, int], list[tuple[float, float]]] = {}
        for mode, threshold in (("streamed", "8MiB"), ("whole", "0")):
            host = start(app, args.port, threshold)
            try:
                if mode == "streamed":
                    (app / "warm").write_bytes(b"w" * 1024)
                    subprocess.run([FAAST, "blob", "put", str(app), "data/warm", str(app / "warm")], check=True,
                                   stdout=subprocess.DEVNULL)
                read(args.port, "warm")  # the worker is up and the function loaded before anything is timed
                for size in sizes:
                    for rep in range(args.reps):
                        name = f"b{size}-{rep}"
                        if mode == "streamed":  # uploaded once, straight to storage
                            payload = app / "payload"
                            with open(payload, "wb") as f:
                                f.write(os.urandom(size << 20))
                            subprocess.run([FAAST, "blob", "put", str(app), f"data/{name}", str(payload)], check=True,
                                           stdout=subprocess.DEVNULL)
                            payload.unlink()
                        results.setdefault((mode, size), []).append(read(args.port, name))
            finally:
                stop(host)
        print(f"{'size':>8} {'mode':>9} {'first byte ms':>14} {'last byte ms':>13}   (medians of {args.reps} misses)")
        metrics: dict[str, float] = {}
        for size in sizes:
            for mode in ("streamed", "whole"):
                rows = results[(mode, size)]
                first, last = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
                metrics[f"{mode}_{size}mib_first_byte_ms"] = round(first, 1)
                metrics[f"{mode}_{size}mib_last_byte_ms"] = round(last, 1)
                print(f"{size:>5}MiB {mode:>9} {first:>14.1f} {last:>13.1f}")
        write_results(args, metrics, results)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
