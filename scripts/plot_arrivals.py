#!/usr/bin/env python3
"""Plots latency against throughput for each batching mode from `seqtrans bench --arrival-rate --json`.

Usage: plot_arrivals.py ARRIVALS.json OUT.png [--title TEXT]

One line per batching mode: at each offered rate, the achieved target tokens/s (x) and the p50 and p99
latency from a line's arrival to its translation (y), the shape of the Orca paper's latency/throughput
figure. Needs matplotlib.
"""
import argparse
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report")
    parser.add_argument("out")
    parser.add_argument("--title", default="")
    args = parser.parse_args()
    with open(args.report) as f:
        arrivals = json.load(f)["arrivals"]
    figure, axis = plt.subplots(figsize=(6.4, 4.2))
    styles = {"iteration": ("tab:blue", "iteration-level batching"), "shrinking": ("tab:orange", "batch by batch (shrinking)"),
              "one-at-a-time": ("tab:green", "one at a time (--synthetic)")}
    for mode, (color, label) in styles.items():
        points = sorted((a for a in arrivals if a["batching"] == mode), key=lambda a: a["rate"])
        if not points:
            continue
        x = [a["target_tokens_per_s"] / 1000 for a in points]
        axis.plot(x, [a["latency_p99_s"] for a in points], "o-", color=color, label=f"{label}, p99")
        axis.plot(x, [a["latency_p50_s"] for a in points], "s--", color=color, alpha=0.6, label=f"{label}, p50")
    axis.axhline(1.0, color="gray", linewidth=0.8, linestyle=":")
    axis.set_xlabel("throughput (thousand target tokens/s)")
    axis.set_ylabel("latency, arrival to translation (s)")
    axis.set_yscale("log")
    axis.grid(True, which="both", alpha=0.3)
    axis.legend(fontsize=8)
    if args.title:
        axis.set_title(args.title, fontsize=9)
    figure.tight_layout()
    figure.savefig(args.out, dpi=110)


if __name__ == "__main__":
    main()
