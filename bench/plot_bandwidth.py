"""Draws bench/results/bandwidth.png from bandwidth.json: Faa$T Fig. 12 as measured here.

Fig. 12's layout: one panel per object size, download time against the number of instances (1, 2, 4),
one line for running instances and one for cold ones (the extra instances started for the read; with 1
instance there is nothing to start, so both lines begin at the 1-instance time). Each panel also names
the N the instances' own T_DR rule picks for that size (n_chosen). Usage: plot_bandwidth.py RESULTS.json OUT.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend is chosen first)


def label(size):
    return size.upper().replace("KB", " KB").replace("MB", " MB")


def main(source, target):
    with open(source, encoding="utf-8") as f:
        doc = json.load(f)
    metrics, config = doc["metrics"], doc["config"]
    sizes = config["sizes"]
    fig, axes = plt.subplots(1, len(sizes), figsize=(3.2 * len(sizes), 3.6))
    if len(sizes) == 1:
        axes = [axes]
    for ax, size in zip(axes, sizes):
        one = metrics.get(f"{size}_1inst_running_s")
        for mode, style in (("running", "o-"), ("cold", "s--")):
            xs, ys = [], []
            for k in (1, 2, 4):
                value = one if k == 1 else metrics.get(f"{size}_{k}inst_{mode}_s")
                if value is not None:
                    xs.append(k)
                    ys.append(value)
            if len(xs) > 1:
                ax.plot(xs, ys, style, label=mode)
        ax.set_xticks([1, 2, 4])
        ax.set_xlabel("instances")
        ax.set_ylim(bottom=0)
        n = metrics.get(f"n_chosen_{size}")
        ax.set_title(label(size) + (f"  (T_DR picks N={int(n)})" if n is not None else ""), fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("download time (s)")
    axes[0].legend(fontsize=8)
    if config.get("network_shaped"):
        where = f"shaped: {config.get('storage_mb_per_s')} MB/s to storage, {config.get('peer_mb_per_s')} MB/s between instances"
    else:
        where = "unshaped loopback"
    fig.suptitle(f"Bandwidth scaling (Faa$T Fig. 12), {where}{' --quick' if doc.get('quick') else ''}", fontsize=10)
    fig.tight_layout()
    fig.savefig(target, dpi=120)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: plot_bandwidth.py RESULTS.json OUT.png")
    main(sys.argv[1], sys.argv[2])
