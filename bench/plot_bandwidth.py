"""Draws bench/results/bandwidth.png from bandwidth.json: Faa$T Fig. 12 as measured here.

Download time of each object size with 1, 2 and 4 instances, running and cold (bars), so that it can
be set beside the paper's figure. Usage: plot_bandwidth.py RESULTS.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)


def main(source, target):
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
    metrics, config = doc["metrics"], doc["config"]
    sizes = config["sizes"]
    series = [(1, "running"), (2, "running"), (4, "running"), (2, "cold"), (4, "cold")]
    series = [s for s in series if any(f"{size}_{s[0]}inst_{s[1]}_s" in metrics for size in sizes)]
    width = 0.8 / len(series)
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, (k, mode) in enumerate(series):
        xs, ys = [], []
        for j, size in enumerate(sizes):
            key = f"{size}_{k}inst_{mode}_s"
            if key in metrics:
                xs.append(j + (i - (len(series) - 1) / 2) * width)
                ys.append(metrics[key])
        ax.bar(xs, ys, width, label=f"{k} instance{'s' if k > 1 else ''}, {mode}", hatch="//" if mode == "cold" else None)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([s.upper().replace("KB", " KB").replace("MB", " MB") for s in sizes])
    ax.set_yscale("log")
    ax.set_ylabel("download time (s, log scale)")
    shaped = "shaped network" if config.get("network_shaped") else "unshaped loopback"
    ax.set_title(f"Bandwidth scaling (Faa$T Fig. 12), {shaped}{' --quick' if doc.get('quick') else ''}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(target, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_bandwidth.py RESULTS.json OUT.png")
    main(sys.argv[1], sys.argv[2])
