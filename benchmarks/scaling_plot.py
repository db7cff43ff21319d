"""Time against n, log-log: graph builds per method (like the paper's Fig. 9), and the
clustering modes past the n² wall (issue 17).

``scaling``: reads the committed benchmark results — ``results/paper/paper-tables.json``
(Syn1M, Syn5M), ``results/paper/paper-tables-mnist.json`` (MNIST60K/120K/240K shapes) and
``results/gpu/fast.json`` (grid, gemm) — and the paper's RTX 3090 figures (Table 5), and
draws one panel per data family into ``docs/scaling.png``.

``large``: reads ``results/large/large.json`` (``benchmarks/large.py large`` and ``large.py
landmarks``) and draws the end-to-end fit time against n of the exact pipeline,
representatives and landmarks on infinite digits into ``docs/large-scaling.png``; a mode
without points in the file is named in the legend as missing. Needs matplotlib
(``pip install matplotlib``).

Usage::

    python benchmarks/scaling_plot.py            # docs/scaling.png
    python benchmarks/scaling_plot.py large      # docs/large-scaling.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from _common import device_name  # noqa: E402

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
OUT = HERE.parent / "docs" / "scaling.png"
LARGE_OUT = HERE.parent / "docs" / "large-scaling.png"

#: Issue 17's target: infinite digits 10⁷ × 784 end to end within 30 s, either mode.
LARGE_TARGET = (10**7, 30.0)

#: The modes of the large plot, with their markers.
LARGE_MODES = (("exact", "o"), ("representatives", "s"), ("landmarks", "^"))

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


def large_scaling(source: Path = RESULTS / "large" / "large.json", out: Path = LARGE_OUT) -> Path:
    """docs/large-scaling.png: fit seconds against n per mode, log-log, from large.json's
    ``scaling`` points; returns the path written."""
    result = json.loads(Path(source).read_text())
    devices = {device_name(result["environment"])}
    if "landmarks_run" in result:
        devices.add(device_name(result["landmarks_run"]["environment"]))
    fig, ax = plt.subplots(figsize=(6.6, 4.6))
    for mode, marker in LARGE_MODES:
        pts = sorted((r["n"], r["seconds"]) for r in result.get("scaling", [])
                     if r["mode"] == mode)
        if not pts:
            ax.plot([], [], marker=marker, linestyle="none",
                    label=f"{mode}: no points in {Path(source).name} yet")
            continue
        (line,) = ax.plot(*zip(*pts, strict=True), marker=marker, label=mode)
        n_last, s_last = pts[-1]
        ax.annotate(f"{s_last:.3g} s", (n_last, s_last), textcoords="offset points",
                    xytext=(6, -4), fontsize=8, color=line.get_color())
    n_target, s_target = LARGE_TARGET
    ax.axhline(s_target, color="grey", linestyle=":", linewidth=1)
    ax.annotate(f"target at n = 10⁷: {s_target:g} s", (n_target, s_target),
                textcoords="offset points", xytext=(-150, 4), fontsize=8, color="grey")
    ax.set(xscale="log", yscale="log", xlabel="n (infinite-digits, 784 features)",
           ylabel="fit, seconds (end to end, data on the GPU)",
           title=f"SpectralClustering(10, mode=...) on {', '.join(sorted(devices))}")
    ax.margins(x=0.12)  # room for the last points' labels
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    Path(out).parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"wrote {out}")
    return Path(out)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plot", nargs="?", choices=("scaling", "large"), default="scaling")
    parser.add_argument("--source", type=Path, default=RESULTS / "large" / "large.json",
                        help="large: the JSON to read (default results/large/large.json)")
    parser.add_argument("--out", type=Path, help="the PNG to write (default under docs/)")
    args = parser.parse_args(argv)
    if args.plot == "large":
        large_scaling(args.source, args.out or LARGE_OUT)
        return 0
    return scaling(args.out or OUT)


def scaling(out: Path = OUT) -> int:
    """docs/scaling.png: graph build time against n per method, ours and the paper's."""
    shapes = json.loads((RESULTS / "paper" / "paper-tables.json").read_text())["shapes"]
    mnist = json.loads((RESULTS / "paper" / "paper-tables-mnist.json").read_text())["shapes"]
    shapes = {k: v for k, v in shapes.items() if not k.startswith("MNIST")} | mnist
    fast = json.loads((RESULTS / "gpu" / "fast.json").read_text())
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
    out.parent.mkdir(exist_ok=True)
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
