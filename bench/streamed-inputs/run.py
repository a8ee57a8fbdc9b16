#!/usr/bin/env python3
"""Streamed large inputs (cache.streamThreshold), streamed vs whole, side by side in one run.

A Python function reads a blob input that misses the cache through func.InputStream in 1 MiB
read1() chunks and reports when its first 64 KiB arrived and when it had the last byte. The
same blobs are read by a platform whose app has the default streamThreshold (8 MiB: streamed) and
by one whose app has streamThreshold 0 (read whole before the invocation is sent); both run at
once and the misses alternate between them (every blob is read once: each read is a miss).
Storage: the Azurite each `./faast start` runs for its app (loopback), with --azurite-in-memory
unless --azurite-disk.

    ./faast bench streamed-inputs [--quick]
    bench/streamed-inputs/run.py [--quick] [--sizes 64,256] [--reps 3] [--port 7391]

Prints a table of medians: time to the function's first byte and to its last byte, measured
from the client sending the request (one clock: client, host and worker share the machine),
and the CPU the platform's processes (host, worker, Azurite) spent on the read.
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
# Each platform's Azurite keeps its blobs in memory: with its data on disk, the two platforms' Azurites spent 1.2 and
# 4.4 ms of CPU per MiB served in one run (2026-11-29 07:20), which swamped what this compares (--azurite-disk).
AZURITE = ["--azurite-in-memory"]

FUNCTION = '''
import json, time
import azure.functions as func

def main(req: func.HttpRequest, inblob: func.InputStream) -> func.HttpResponse:
    streamed = getattr(inblob, "_fill", None) is not None  # FaaST's InputStream: still downloading at the start
    first = inblob.read(65536)
    t_first = time.time()
    n = len(first)
    while True:
        chunk = inblob.read1(1 << 20)
        if not chunk:
            break
        n += len(chunk)
    return func.HttpResponse(json.dumps({"first": t_first, "end": time.time(), "bytes": n, "streamed": streamed}))
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


def start(app: pathlib.Path, port: int, stream_threshold: str, capacity_mib: int) -> subprocess.Popen:
    # One instance: a second one the scale controller starts under the load of these misses would serve some of them
    # with a cold worker.
    (app / "faast.json").write_text(json.dumps({
        "cache": {"cacheCapacity": f"{capacity_mib}MiB", "memoryLimit": f"{capacity_mib + 512}MiB", "streamThreshold": stream_threshold},
        "scale": {"minInstances": 1, "maxInstances": 1}}))
    log = open(app / f"host-{stream_threshold}.log", "w")
    host = subprocess.Popen([FAAST, "start", str(app), "--port", str(port), "--no-peers"] + AZURITE, stdout=log, stderr=subprocess.STDOUT)
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


def read(port: int, name: str) -> tuple[float, float, bool]:
    """(first byte ms, last byte ms, whether the function got the blob while it was still downloading)."""
    t0 = time.time()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/api/read/{name}", timeout=300).read()
    r = json.loads(body)
    return (r["first"] - t0) * 1000, (r["end"] - t0) * 1000, r["streamed"]


def tree_cpu_ms(root: int) -> float:
    """CPU (user + system) used so far by the processes under `root`: the platform, its host, the host's worker and
    Azurite. Unlike the times above it hardly moves with other load on the machine."""
    children: dict[int, list[tuple[int, int]]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        children.setdefault(int(fields[1]), []).append((int(entry), int(fields[11]) + int(fields[12])))
    ticks, stack = 0, [root]
    while stack:
        for pid, used in children.get(stack.pop(), []):
            ticks += used
            stack.append(pid)
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


def measured_read(host: subprocess.Popen, port: int, name: str) -> tuple[float, float, float, bool]:
    """(first byte ms, last byte ms, CPU ms of the platform's processes for the read, streamed or not)."""
    before = tree_cpu_ms(host.pid)
    first, last, streamed = read(port, name)
    time.sleep(0.2)  # the host finishes caching the object after the response
    return first, last, tree_cpu_ms(host.pid) - before, streamed


def write_results(args: argparse.Namespace, metrics: dict, results: dict) -> None:
    """bench/results/streamed-inputs.json: the medians, every miss, and the machine (the runs are on a shared one)."""
    doc = {
        "scenario": "streamed-inputs",
        "date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "machine": {"uname": " ".join(os.uname()), "cpus": os.cpu_count(), "loadavg_at_start": args.loadavg_at_start,
                    "loadavg_at_end": pathlib.Path("/proc/loadavg").read_text().strip()},
        "config": {"sizes_mib": args.sizes, "reps": args.reps, "storage": "Azurite on loopback, as ./faast start runs it" + (" (data on disk)" if args.azurite_disk else " with --azurite-in-memory"),
                   "streamed": "cache.streamThreshold 8MiB", "whole": "cache.streamThreshold 0",
                   "clock": "from the client sending the request to the function's first 64 KiB / last byte",
                   "cpu": "user + system CPU of the platform's processes (host, worker, Azurite) over the read",
                   "order": "both platforms run at once; the misses alternate between them"},
        "metrics": metrics,
        "misses_ms": {f"{mode}_{size}mib": [[round(a, 1), round(b, 1), round(c), d] for a, b, c, d in rows]
                      for (mode, size), rows in results.items()},
        "misses_columns": ["first byte ms", "last byte ms", "CPU ms", "streamed"],
    }
    out = REPO / "bench" / "results" / "streamed-inputs.json"
    out.write_text(json.dumps(doc, indent=2) + "\n")
    print(f"wrote {out.relative_to(REPO)}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="64,256", help="blob sizes in MiB")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--port", type=int, default=7391)
    ap.add_argument("--quick", action="store_true", help="16 and 64 MiB, 2 misses each (under a minute)")
    ap.add_argument("--azurite-disk", action="store_true", help="Azurite keeps its blobs on disk (as ./faast start does)")
    args = ap.parse_args()
    args.loadavg_at_start = pathlib.Path("/proc/loadavg").read_text().strip()
    if args.azurite_disk:
        AZURITE.clear()
    if args.quick:
        args.sizes, args.reps = "16,64", 2
    sizes = [int(s) for s in args.sizes.split(",")]
    # The directories' names are the apps': names ./faast start accepts (mkdtemp's may hold '_').
    work = pathlib.Path(tempfile.mkdtemp(prefix="faast-streamed-bench-"))
    modes = (("streamed", "8MiB", args.port), ("whole", "0", args.port + 1))
    hosts: list[subprocess.Popen] = []
    try:
        # Both platforms run side by side and the misses alternate between them, so a load that comes and goes on
        # this shared machine falls on both alike; every blob is uploaded (and flushed to disk) before any is read.
        apps = {}
        platforms = {}
        for mode, threshold, port in modes:
            app = work / f"{mode}-bench"
            make_app(app)
            # Room for every blob: a miss the cache cannot allocate an extent for is served from a temporary file,
            # which never streams, and would be counted as a streamed miss.
            hosts.append(start(app, port, threshold, sum(sizes) * args.reps + 256))
            apps[mode] = (app, port)
            platforms[mode] = hosts[-1]
        payload = work / "payload"
        payload.write_bytes(b"w" * 1024)
        for mode, (app, port) in apps.items():
            subprocess.run([FAAST, "blob", "put", str(app), "data/warm", str(payload)], check=True, stdout=subprocess.DEVNULL)
            for size in sizes:
                for rep in range(args.reps):
                    with open(payload, "wb") as f:
                        f.write(os.urandom(size << 20))
                    subprocess.run([FAAST, "blob", "put", str(app), f"data/b{size}-{rep}", str(payload)], check=True,
                                   stdout=subprocess.DEVNULL)
        payload.unlink()
        os.sync()
        for mode, (app, port) in apps.items():
            read(port, "warm")  # the worker is up and the function loaded before anything is timed
        results: dict[tuple[str, int], list[tuple[float, float, float, bool]]] = {}
        for size in sizes:
            for rep in range(args.reps):
                order = list(apps.items()) if rep % 2 == 0 else list(reversed(apps.items()))
                for mode, (app, port) in order:
                    results.setdefault((mode, size), []).append(measured_read(platforms[mode], port, f"b{size}-{rep}"))
        print(f"{'size':>8} {'mode':>9} {'first byte ms':>14} {'last byte ms':>13} {'CPU ms':>8}   (medians of {args.reps} misses)")
        metrics: dict[str, float] = {}
        for size in sizes:
            for mode in ("streamed", "whole"):
                # A miss is counted in its mode only if it was delivered so: a reader that joins a fetch already
                # under way (single flight, e.g. the prewarm's) waits for the whole object even where streaming is on.
                rows = [r for r in results[(mode, size)] if r[3] == (mode == "streamed")]
                metrics[f"{mode}_{size}mib_misses_counted"] = len(rows)
                if not rows:
                    print(f"{size:>5}MiB {mode:>9}   no miss was delivered {mode}")
                    continue
                first, last = statistics.median(r[0] for r in rows), statistics.median(r[1] for r in rows)
                cpu = statistics.median(r[2] for r in rows)
                metrics[f"{mode}_{size}mib_first_byte_ms"] = round(first, 1)
                metrics[f"{mode}_{size}mib_last_byte_ms"] = round(last, 1)
                metrics[f"{mode}_{size}mib_cpu_ms"] = round(cpu, 1)
                print(f"{size:>5}MiB {mode:>9} {first:>14.1f} {last:>13.1f} {cpu:>8.0f}")
        write_results(args, metrics, results)
    finally:
        for host in hosts:
            stop(host)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
