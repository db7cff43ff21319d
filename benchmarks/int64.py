"""The GPU pipeline once on a graph past 2**31 nonzeros: sizes, seconds and memory per stage.

The graph: two groups of ``--m`` points (default 33 300) far apart on a line, each a
complete graph under a uniform threshold (squared distances within a group <= 1 < 4,
across >= 81), so n = 2m, nnz = 2m(m - 1) = 2.22·10⁹ at the default, int64 indices,
and the answer is known (2 components, eigenvalue 0 twice, ARI 1 against the groups).

Stages, as :class:`explorer.SpectralClustering` runs them, timed with the device
synchronised (wall clock; every library call here ends in a host read or a sync):

=========== ===================================================================
build       the CSR-1 builder alone (``explorer.graph.gpu.build_gpu``)
statistics  ``explorer.graph.csr_stats`` of its CSR (degrees, components, counts)
embedding   ``isolated_vertices`` + ``spectral_embedding`` (solver "auto": Chebyshev)
kmeans      :class:`explorer.KMeans` on the unit rows
export      ``save_graph_npz(compressed=False)`` into ``--scratch`` (not ``--out``:
            the file is 26.6 GB); then, timed apart, mapped back (``map_graph_npz``)
            and compared with the device's arrays piece by piece; the file is deleted
=========== ===================================================================

Memory per stage: the peak of the bytes in use in CuPy's pool (a tracking allocator sees
every allocation, cuSPARSE's buffers included), the bytes the pool holds after it, the
driver's free bytes (``cudaMemGetInfo``) before and after; the host's resident set after
the stage and its peak during it (``VmHWM``, reset per stage through
``/proc/self/clear_refs`` where the kernel allows); overall, the largest of these and the
device memory used at the most (total minus the least free after a stage: the pool keeps
what it took). One run, no repeats: the device time is scarce, and every stage is one
large operation. The JSON is rewritten after each stage, so a run cut short keeps what
it measured. About 1.5 minutes, 55 GB of GPU memory, 30 GB of host memory and 27 GB of
free disk in ``--scratch``.

Usage::

    python benchmarks/int64.py [--out DIR] [--m 33300] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import RESULTS, environment_info, plain  # noqa: E402

#: The edge rule: every pair within a group (squared distance <= 1), none across (>= 81).
RULE = {"metric": "uniform", "threshold_sqdist": 4.0}


class PoolTracker:
    """Peak bytes in use in CuPy's default pool, through an allocator that sees every
    allocation (the peak of live bytes is reached right after one)."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.pool = cupy.get_default_memory_pool()
        self.peak = self.pool.used_bytes()
        cupy.cuda.set_allocator(self.malloc)

    def malloc(self, size):
        mem = self.pool.malloc(size)
        self.peak = max(self.peak, self.pool.used_bytes())
        return mem

    def take(self) -> int:
        """The peak since the last call; the count restarts from what is in use now."""
        peak, self.peak = self.peak, self.pool.used_bytes()
        return peak

    def close(self):
        self.cupy.cuda.set_allocator(self.pool.malloc)


def host_memory() -> dict:
    """Resident set now and its peak (``VmRSS``, ``VmHWM`` of /proc/self/status), bytes."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) * 1024
    return {"host_rss_bytes": out.get("VmRSS"), "host_peak_rss_bytes": out.get("VmHWM")}


def reset_host_peak() -> bool:
    """Restart the kernel's peak-RSS count (``echo 5 > /proc/self/clear_refs``)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Stages:
    """Seconds and memory of each stage, written to the JSON as they come."""

    def __init__(self, cupy, tracker, report, path):
        self.cupy, self.tracker, self.report, self.path = cupy, tracker, report, path
        self.report["stages"] = {}
        self.free = None

    def start(self):
        self.cupy.cuda.Device().synchronize()
        self.tracker.take()
        self.report["host_peak_reset_per_stage"] = reset_host_peak()
        self.free = int(self.cupy.cuda.runtime.memGetInfo()[0])

    def end(self, name, seconds, **extra):
        self.cupy.cuda.Device().synchronize()
        free = int(self.cupy.cuda.runtime.memGetInfo()[0])
        entry = {
            "seconds": float(seconds),
            "gpu_peak_used_bytes": self.tracker.take(),
            "gpu_pool_held_bytes": int(self.tracker.pool.total_bytes()),
            "gpu_free_before_bytes": self.free,
            "gpu_free_after_bytes": free,
            **host_memory(),
            **extra,
        }
        self.report["stages"][name] = entry
        self.write()
        print(f"{name:<11} {seconds:8.2f} s   GPU peak in use "
              f"{entry['gpu_peak_used_bytes'] / 2**30:6.1f} GiB   host RSS "
              f"{(entry['host_rss_bytes'] or 0) / 2**30:6.1f} GiB", flush=True)
        self.free = free

    def write(self):
        self.path.write_text(json.dumps(plain(self.report), indent=1, allow_nan=False) + "\n")


def export(csr, npz: Path, nnz: int, stages: Stages) -> None:
    """Write the graph uncompressed, map it back, compare it piece by piece, delete it."""
    import cupy

    from explorer.ui._export import map_graph_npz, save_graph_npz

    stages.start()
    try:
        t0 = time.perf_counter()
        save_graph_npz(csr, npz, compressed=False)
        written = time.perf_counter() - t0
        size = npz.stat().st_size
        back = map_graph_npz(npz)
        equal = bool(back.nnz == nnz and np.array_equal(back.indptr, cupy.asnumpy(csr.indptr)))
        step = 1 << 28  # pieces: no host copy of the whole matrix
        for start in range(0, nnz, step):
            stop = min(start + step, nnz)
            equal = equal and np.array_equal(back.indices[start:stop],
                                             cupy.asnumpy(csr.indices[start:stop]))
            equal = equal and np.array_equal(back.data[start:stop],
                                             cupy.asnumpy(csr.data[start:stop]))
        verified = time.perf_counter() - t0 - written
        dtype = str(back.indices.dtype)
        del back
    finally:
        npz.unlink(missing_ok=True)
    stages.end("export", written, compressed=False, file_bytes=size,
               write_bytes_per_s=size / written, verify_s=verified,
               read_back_index_dtype=dtype, read_back_equal=equal)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=RESULTS / "gpu", help="folder of int64-gpu.json")
    ap.add_argument("--m", type=int, default=33_300, help="points per group")
    ap.add_argument("--scratch", type=Path, default=None,
                    help="folder for the exported NPZ (default: a new temporary folder)")
    args = ap.parse_args(argv)

    import cupy

    from explorer import KMeans, metrics
    from explorer.embedding import isolated_vertices, spectral_embedding
    from explorer.graph import EdgeRule, csr_stats, gpu

    m = args.m
    n, nnz = 2 * m, 2 * m * (m - 1)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "int64-gpu.json"
    report = {
        "benchmark": "the GPU pipeline on a graph past 2**31 nonzeros (benchmarks/int64.py)",
        "graph": {"data": f"two groups of {m} points on a line, 10 apart", "m": m, "n": n,
                  "nnz": nnz, "nnz_over_2_31": nnz / 2**31, "rule": RULE, "method": "csr1"},
        "environment": environment_info("gpu"),
    }
    device = report["environment"]["gpu"]
    print(f"{device['name']}: n = {n:,}, nnz = {nnz:,} ({nnz / 2**31:.3f} × 2**31)", flush=True)

    cupy.get_default_memory_pool().free_all_blocks()
    tracker = PoolTracker(cupy)
    stages = Stages(cupy, tracker, report, path)
    groups = np.repeat([0, 1], m)
    X = np.linspace(0.0, 1.0, m, dtype=np.float32)[None, :] + 10.0 * np.arange(2)[:, None]
    X = cupy.asarray(X.reshape(n, 1).astype(np.float32))
    try:
        # The two halves of build_graph, timed apart: the GPU builder, then the
        # statistics of the CSR it returns.
        rule = EdgeRule.from_args(**RULE)
        stages.start()
        t0 = time.perf_counter()
        csr, build_stages, _ = gpu.build_gpu(X, rule, "csr1")
        cupy.cuda.Device().synchronize()
        timings = {"build": time.perf_counter() - t0,
                   **{f"build.{k}": float(v) for k, v in build_stages.items()}}
        build_mark = {
            "peak": tracker.take(), "held": int(tracker.pool.total_bytes()),
            "free": int(cupy.cuda.runtime.memGetInfo()[0]), "host": host_memory(),
        }
        reset_host_peak()
        t0 = time.perf_counter()
        stats = csr_stats(csr)
        cupy.cuda.Device().synchronize()
        timings["stats"] = time.perf_counter() - t0
        report["graph"].update({
            "index_dtype": str(csr.indices.dtype), "indptr_dtype": str(csr.indptr.dtype),
            "nnz_built": int(csr.nnz), "csr_bytes": int(stats.bytes_csr),
            "build_timings_s": dict(timings),
        })
        report["stages"]["build"] = {
            "seconds": timings["build"], "gpu_peak_used_bytes": build_mark["peak"],
            "gpu_pool_held_bytes": build_mark["held"], "gpu_free_before_bytes": stages.free,
            "gpu_free_after_bytes": build_mark["free"],
            **build_mark["host"],
        }
        stages.free = build_mark["free"]
        print(f"{'build':<11} {timings['build']:8.2f} s   GPU peak in use "
              f"{build_mark['peak'] / 2**30:6.1f} GiB   {csr.indices.dtype} indices", flush=True)
        st = stats
        stages.end("statistics", timings["stats"], n_components=st.n_components,
                   nnz_row_min=st.nnz_row_min, nnz_row_max=st.nnz_row_max,
                   degree_min=st.degree_min, degree_max=st.degree_max)

        stages.start()
        t0 = time.perf_counter()
        isolated = isolated_vertices(csr)
        emb = spectral_embedding(csr, 2, random_state=0)
        cupy.cuda.Device().synchronize()
        stages.end("embedding", time.perf_counter() - t0, solver=emb.solver,
                   iterations=emb.iterations, eigenvalues=emb.eigenvalues,
                   residual_norms=emb.residual_norms, embedding_timings_s=emb.timings,
                   n_isolated=int(cupy.count_nonzero(isolated)))

        stages.start()
        t0 = time.perf_counter()
        keep = cupy.flatnonzero(~isolated)
        km = KMeans(2, random_state=0).fit(emb.embedding[keep])
        labels = np.full(n, -1)
        labels[cupy.asnumpy(keep)] = cupy.asnumpy(km.labels_)
        stages.end("kmeans", time.perf_counter() - t0,
                   ari=metrics.adjusted_rand_score(groups, labels))
        del emb, km

        made = args.scratch is None
        scratch = Path(tempfile.mkdtemp(prefix="int64-export-")) if made else args.scratch
        scratch.mkdir(parents=True, exist_ok=True)
        need = 12 * nnz + 8 * (n + 1) + 2**30
        free_disk = shutil.disk_usage(scratch).free
        if free_disk < need:
            report["export_skipped"] = (f"{free_disk / 2**30:.1f} GiB free in {scratch}, "
                                        f"{need / 2**30:.1f} GiB needed")
            print(f"export skipped: {report['export_skipped']}", flush=True)
        else:
            export(csr, scratch / "int64-graph.npz", nnz, stages)
        if made:
            scratch.rmdir()
    finally:
        tracker.close()

    report["peak"] = {
        "gpu_used_bytes": max(s["gpu_peak_used_bytes"] for s in report["stages"].values()),
        "gpu_device_used_bytes": device["memory_total_bytes"]
        - min(s["gpu_free_after_bytes"] for s in report["stages"].values()),
        "host_rss_bytes": max(s["host_peak_rss_bytes"] or 0 for s in report["stages"].values()),
    }
    stages.write()
    print(f"peak: GPU {report['peak']['gpu_used_bytes'] / 2**30:.1f} GiB in use "
          f"({report['peak']['gpu_device_used_bytes'] / 2**30:.1f} GiB of the device), host "
          f"{report['peak']['host_rss_bytes'] / 2**30:.1f} GiB; wrote {path}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
