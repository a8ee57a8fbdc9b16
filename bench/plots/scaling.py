#!/usr/bin/python3
"""Draws bench/results/scaling.json's timeline: offered and served load, instances, p50/p99 latency."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(source: str, target: str) -> None:
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
    timeline = doc["config"]["timeline"]
    t = [p["t"] for p in timeline]
    fig, (load, lat) = plt.subplots(2, 1, figsize=(9, 6.5), sharex=True)
    load.plot(t, [p["offered"] for p in timeline], label="offered (req/s)", color="tab:gray", linestyle="--")
    load.plot(t, [p["served"] for p in timeline], label="served (req/s)", color="tab:blue")
    load.set_ylabel("requests per second")
    inst = load.twinx()
    inst.step(t, [p["instances"] for p in timeline], where="post", label="ready instances", color="tab:red")
    inst.step(t, [p["desired"] for p in timeline], where="post", label="desired", color="tab:orange", linestyle=":")
    inst.set_ylabel("instances")
    inst.set_ylim(0, max(p["desired"] for p in timeline) + 1)
    lines = load.get_legend_handles_labels()[0] + inst.get_legend_handles_labels()[0]
    labels = load.get_legend_handles_labels()[1] + inst.get_legend_handles_labels()[1]
    load.legend(lines, labels, loc="upper right", fontsize=8)
    metrics = doc["metrics"]
    load.set_title(
        f"FaaST scale controller: a load ramp ({doc['config']['work_ms']} ms per request, 4 threads per instance); "
        f"failed {metrics.get('failed_requests', 0):.0f}",
        fontsize=9,
    )
    lat.plot(t, [p["p50_ms"] for p in timeline], label="p50", color="tab:green")
    lat.plot(t, [p["p99_ms"] for p in timeline], label="p99", color="tab:purple")
    lat.set_ylabel("latency (ms)")
    lat.set_xlabel("seconds")
    lat.set_yscale("log")
    lat.legend(loc="upper right", fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
