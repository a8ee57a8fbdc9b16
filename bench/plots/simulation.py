#!/usr/bin/python3
"""Draws Fig. 8 of Faa$T (SoCC'21) from bench/results/simulation.json: per consistency preset, the CDF of the apps'
improvement over storage at the largest cache (left) and the mean improvement as the cache size varies (right), one line
per load model (never unloaded, fixed unload periods without prewarm, the hybrid histogram's timing alone, and with
prewarm)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"never": ("tab:gray", ":"), "unload-1m": ("tab:blue", "-."), "unload-10m": ("tab:green", "-."),
         "unload-1h": ("tab:purple", "-."), "histogram": ("tab:orange", "--"), "prewarm": ("tab:red", "-")}


def style(model: str):
    return STYLE.get(model, (None, "-."))


def main(source: str, target: str) -> None:
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
    figure = doc["figure8"]
    sizes = doc["config"]["cache_sizes"]
    largest = sizes[-1]
    presets = list(figure)
    fig, axes = plt.subplots(len(presets), 2, figsize=(11, 4.2 * len(presets)), squeeze=False)
    for row, preset in enumerate(presets):
        cdf_ax, avg_ax = axes[row]
        for model, points in figure[preset]["cdf"][largest].items():
            color, line = style(model)
            fractions = [q / (len(points) - 1) for q in range(len(points))]
            cdf_ax.plot(points, fractions, label=model, color=color, linestyle=line)
        cdf_ax.axvline(50, color="black", linewidth=0.5)
        cdf_ax.set_xlabel(f"improvement over storage, % (cache {largest})")
        cdf_ax.set_ylabel("CDF of apps")
        cdf_ax.set_title(f"{preset}: CDF at {largest}")
        cdf_ax.set_xlim(-20, 100)
        cdf_ax.legend(fontsize=8, loc="upper left")
        for model, by_size in figure[preset]["average"].items():
            color, line = style(model)
            avg_ax.plot(range(len(sizes)), [by_size[s] for s in sizes], marker="o", label=model, color=color, linestyle=line)
        avg_ax.set_xticks(range(len(sizes)))
        avg_ax.set_xticklabels(sizes, fontsize=8)
        avg_ax.set_xlabel("cache size")
        avg_ax.set_ylabel("mean improvement over storage, %")
        avg_ax.set_title(f"{preset}: mean by cache size")
        avg_ax.legend(fontsize=8, loc="upper left")
    m = doc["metrics"]
    fig.suptitle(f"Fig. 8 reproduced: {m['accesses']:,} accesses of {m['apps']:,} apps ({doc['config']['trace_kind']}), "
                 f"{m['accesses_per_s']:,.0f} accesses/s", fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
