"""Graph build time against n, log-log, every method (like the paper's Fig. 9).

Reads the committed benchmark results — ``results/paper-tables.json`` (Syn1M, Syn5M),
``results/paper-tables-mnist.json`` (MNIST60K/120K/240K shapes) and ``results/fast.json``
(grid, gemm) — and the paper's RTX 3090 figures (Table 5), and draws one panel per data
family into ``docs/scaling.png``. Needs matplotlib (``pip install matplotlib``).

Usage::

    python benchmarks/scaling_plot.py
"""

from __future__ import annotations

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _common import device_name  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OUT = HERE.parent / "docs" / "scaling.png"

#: The paper's Table 5 (RTX 3090, seconds): CSR-1, best CSR-2, CSR-3.
PAPER = {
    "Syn1M": (1_000_000, 14.01, 5.66, 17.62),
    "Syn5M": (5_000_000, 363.69, 145.89, 435.76),
    "MNIST60K": (60_000, 5.53, 3.91, 3.04),
    "MNIST120K": (120_000, 22.27, 17.12, 11.09),
    "MNIST240K": (240_000, 91.47, 77.78, 43.84),
}
FAMILIES = {"Syn (d = 4, gaussian)": ("Syn1M", "Syn5M"),
            "MNIST shapes (d = 784, cosine)": ("MNIST60K", "MNIST120K", "MNIST240K")}


def ours(shapes: dict) -> dict:
    """method -> {shape: seconds}: CSR-1, the best CSR-2, CSR-3."""
    out: dict = {}
    for name, shape in shapes.items():
        builds = shape.get("builds", {})
        for key, entry in builds.items():
            if "median_s" not in entry:
                continue
            method = "csr2 (best)" if key.startswith("csr2") else key
            best = out.setdefault(method, {}).get(name)
            if best is None or entry["median_s"] < best:
                out[method][name] = entry["median_s"]
    return out


def main() -> int:
    shapes = json.loads((RESULTS / "paper-tables.json").read_text())["shapes"]
    mnist = json.loads((RESULTS / "paper-tables-mnist.json").read_text())["shapes"]
    shapes = {k: v for k, v in shapes.items() if not k.startswith("MNIST")} | mnist
    fast = json.loads((RESULTS / "fast.json").read_text())
    times = ours(shapes)
    for name, entry in fast["shapes"].items():
        times.setdefault(entry["method"], {})[name] = entry["build_s"]
    device = device_name(fast["environment"])

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    styles = {"csr1": "o-", "csr2 (best)": "s-", "csr3": "^-", "grid": "D-", "gemm": "D-"}
    for ax, (title, members) in zip(axes, FAMILIES.items(), strict=True):
        for method, per_shape in sorted(times.items()):
            pts = sorted((PAPER[s][0], per_shape[s]) for s in members if s in per_shape)
            if pts:
                ax.plot(*zip(*pts, strict=True), styles.get(method, "o-"),
                        label=f"{method} ({device})")
        for col, label in ((1, "CSR-1"), (2, "CSR-2 best"), (3, "CSR-3")):
            pts = sorted((PAPER[s][0], PAPER[s][col]) for s in members)
            ax.plot(*zip(*pts, strict=True), "--", alpha=0.5, label=f"{label} (paper, RTX 3090)")
        ax.set(xscale="log", yscale="log", xlabel="n (points)", ylabel="graph build (s)",
               title=title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle("Similarity graph construction in CSR: time against n")
    fig.tight_layout()
    OUT.parent.mkdir(exist_ok=True)
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
