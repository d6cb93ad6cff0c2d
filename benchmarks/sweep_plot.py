"""Heat-maps of a sweep: braze's speed over Inductor's, one PNG per reduction kind.

Run: ``python -m benchmarks.sweep_plot SWEEP.json DIR`` (matplotlib, from the package index).

Takes: the JSON that ``python -m benchmarks.sweep --json`` writes. Gives: ``DIR/sweep-<kind>.png``:
x the reduced length (log2), y the axes and layout, each point a square coloured by
Inductor's time over braze's (green: braze faster, red: slower; the ratio written on it).
"""
from __future__ import annotations

import json
import math
import os
import sys


def main(argv=None) -> None:
    path, out_dir = (argv or sys.argv[1:])[:2]
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("benchmarks.sweep_plot needs matplotlib: pip install matplotlib")
    with open(path) as f:
        sweep = json.load(f)
    os.makedirs(out_dir, exist_ok=True)
    rows = [r for r in sweep["rows"] if r.get("inductor_us") and r.get("braze_us")]
    for kind in sorted({r["kind"] for r in rows}):
        _plot(plt, [r for r in rows if r["kind"] == kind], kind, sweep["device"], out_dir)


def _plot(plt, rows: list, kind: str, device: str, out_dir: str) -> None:
    labels = sorted({f"{r['axes']} / {r['layout']}" for r in rows})
    fig, ax = plt.subplots(figsize=(8, 1 + 0.45 * len(labels)))
    for r in rows:
        ratio = r["inductor_us"] / r["braze_us"]
        x, y = math.log2(r["reduced"]), labels.index(f"{r['axes']} / {r['layout']}")
        shade = max(-1.0, min(1.0, math.log2(ratio)))  # ±2× saturates
        color = (1.0, 1 - abs(shade), 1 - abs(shade)) if shade < 0 else (1 - shade, 1.0, 1 - shade)
        ax.scatter([x], [y], s=420, c=[color], marker="s", edgecolors="grey")
        ax.annotate(f"{ratio:.2f}", (x, y), ha="center", va="center", fontsize=6)
    ax.set_yticks(range(len(labels)), labels)
    ax.set_xlabel("log2 of the reduced length")
    ax.set_title(f"{kind}: Inductor time / braze time on {device} (> 1: braze faster)")
    ax.set_xlim(-1, 21)
    fig.tight_layout()
    fig.savefig(os.path.join(out_dir, f"sweep-{kind}.png"), dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
