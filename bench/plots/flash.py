#!/usr/bin/python3
"""Draws the flash tier's figures (issue 22; En4S SoCC'24 §6) from bench/results/flash-series.json: Fig. 8 (LC wait
against FCFS by number of SLOs, per LC ratio and batch size), Fig. 10 (four groups of 1,000 tenants: IOPS and goodput per
scheduler), Fig. 11 (a misbehaving LC tenant over time in 25 ms windows) and Fig. 12 (LC ratio 20-80 %).
Usage: flash.py FLASH_JSON SERIES_JSON PREFIX  ->  PREFIX-fig8.png, -fig10.png, -fig11.png, -fig12.png."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

COLORS = {"en4s": "tab:red", "reflex": "tab:blue", "fcfs": "tab:gray"}


def fig8(series, out):
    points = series["fig8"]
    batches = sorted({p["batch"] for p in points})
    ratios = sorted({p["lc_ratio"] for p in points})
    fig, axes = plt.subplots(1, len(batches), figsize=(4.5 * len(batches), 3.8), squeeze=False)
    for col, b in enumerate(batches):
        ax = axes[0][col]
        for r, style in zip(ratios, ["-", "--", ":"]):
            pts = sorted((p for p in points if p["batch"] == b and p["lc_ratio"] == r), key=lambda p: p["tenants"])
            n = [p["tenants"] for p in pts]
            for name in ("en4s", "reflex"):
                # A wait of 0 cannot go on a log axis: drawn at 1e-4 µs, the axis floor.
                ax.plot(n, [max(p[name + "_wait_us"], 1e-4) for p in pts], style, color=COLORS[name], marker="o",
                        label=f"{name} LC {r:.0%}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"batch {b}")
        ax.set_xlabel("number of SLOs (tenants)")
        ax.set_ylabel("mean extra LC wait vs FCFS (µs)")
        ax.grid(alpha=0.3)
    axes[0][0].legend(fontsize=7)
    fig.suptitle("Fig. 8 on the device model: LC wait vs FCFS, each pass charged its calibrated cost per tenant visit")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def fig10(series, out):
    data = series["fig10"]
    groups = ["LC G0", "LC G1", "BE G0", "BE G1"]
    fig, ax = plt.subplots(figsize=(9, 4))
    width = 0.27
    for i, name in enumerate(("en4s", "reflex", "fcfs")):
        xs = [g + (i - 1) * width for g in range(len(groups))]
        ax.bar(xs, [data[name][g]["iops"] / 1000 for g in groups], width, color=COLORS[name], alpha=0.35)
        ax.bar(xs, [data[name][g]["goodput_iops"] / 1000 for g in groups], width, color=COLORS[name],
               label=f"{name} (light: IOPS, dark: goodput within 2 ms); LC read p95 {data[name]['lc_read_p95_ms']:.2f} ms")
    for g, slo in ((0, 60), (1, 30)):
        ax.hlines(slo, g - 0.45, g + 0.45, colors="k", linestyles="--")
    ax.set_xticks(range(len(groups)), groups)
    ax.set_ylabel("K IOPS")
    ax.set_title("Fig. 10 on the device model: 1,000 tenants, 200K-token device (dashed: LC SLOs)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def fig11(series, out):
    data = series["fig11"]
    window = data["window_ms"]
    variants = [k for k in data if k != "window_ms"]
    fig, axes = plt.subplots(len(variants), 1, figsize=(10, 2.6 * len(variants)), sharex=True, squeeze=False)
    for row, name in enumerate(variants):
        ax = axes[row][0]
        for group, color in (("LC G0", "tab:red"), ("LC G1", "tab:green"), ("BE", "tab:blue")):
            iops = data[name][group]["iops"]
            good = data[name][group]["goodput"]
            t = [i * window / 1000 for i in range(len(iops))]
            ax.plot(t, [v / 1000 for v in iops], color=color, alpha=0.35, linewidth=0.8)
            ax.plot(t, [v / 1000 for v in good], color=color, label=f"{group} goodput (light: IOPS)")
        ax.axhline(40, color="tab:red", linestyle=":", linewidth=0.8)
        ax.axhline(20, color="tab:green", linestyle=":", linewidth=0.8)
        ax.set_title(name, fontsize=9)
        ax.set_ylabel("K IOPS")
    axes[0][0].legend(fontsize=7, loc="upper right")
    axes[-1][0].set_xlabel("virtual time (s)")
    fig.suptitle("Fig. 11 on the device model: malicious LC G0 (40K SLO), benign LC G1 (20K), BE group")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def fig12(series, out):
    points = series["fig12"]
    ratios = [p["lc_ratio"] for p in points]
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8))
    for name in ("en4s", "reflex", "fcfs"):
        axes[0].plot(ratios, [p[name]["total_iops"] / 1000 for p in points], marker="o", color=COLORS[name], label=name)
        axes[1].plot(ratios, [p[name]["lc_goodput_frac"] for p in points], marker="o", color=COLORS[name], label=name)
        axes[2].plot(ratios, [p[name]["lc_read_p95_ms"] for p in points], marker="o", color=COLORS[name], label=name)
    axes[0].set_ylabel("total K IOPS (75 % read)")
    axes[1].set_ylabel("LC goodput / SLO")
    axes[2].set_ylabel("LC read p95 (ms)")
    axes[2].set_yscale("log")
    axes[2].axhline(2, color="k", linestyle="--", linewidth=0.8)
    for ax in axes:
        ax.set_xlabel("LC ratio")
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle("Fig. 12 on the device model: LC 50K + BE 150K IOPS requested, 400 tenants")
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(flash_json: str, series_json: str, prefix: str) -> None:
    with open(flash_json, encoding="utf-8") as f:
        json.load(f)  # the scalars; the figures draw from the series
    with open(series_json, encoding="utf-8") as f:
        series = json.load(f)
    fig8(series, prefix + "-fig8.png")
    fig10(series, prefix + "-fig10.png")
    fig11(series, prefix + "-fig11.png")
    fig12(series, prefix + "-fig12.png")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
