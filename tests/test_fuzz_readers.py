"""A bounded-time fuzz test of the file readers (``explorer.data.read``).

Structure-aware: valid CSV, NPY and NPZ files are mutated (bytes flipped, inserted,
deleted, duplicated, the file truncated, line endings changed, the numbers of an NPY
header's shape blown up, members recompressed) and read. Every outcome must be a valid
data set or a ``ValueError``/``TypeError`` naming the file (a
:class:`~explorer.memory.MemoryEstimateError` is one), and the process's peak memory
must not grow by more than :data:`RSS_GROWTH_KIB` however large a file claims to be
(reads run under :func:`explorer.memory.file_limit`).

The test runs batches of hypothesis examples until ``EXPLORER_FUZZ_SECONDS`` (default
20) have passed, so CI spends a bounded time on it; set it higher to fuzz longer
(``EXPLORER_FUZZ_SECONDS=600 pytest tests/test_fuzz_readers.py``).
"""

from __future__ import annotations

import io
import os
import re
import resource
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from explorer import data as datasets
from explorer import memory

BUDGET_SECONDS = float(os.environ.get("EXPLORER_FUZZ_SECONDS", "20"))

#: Largest growth of the peak resident memory allowed over the whole fuzz run.
RSS_GROWTH_KIB = 512 * 1024

#: What a fuzzed file may decompress to.
FUZZ_FILE_LIMIT = 64 * 2**20


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npz(arrays: dict, compressed=True) -> bytes:
    buf = io.BytesIO()
    (np.savez_compressed if compressed else np.savez)(buf, **arrays)
    return buf.getvalue()


_rng = np.random.default_rng(0)
SEEDS = [
    (".csv", b"x,y,label\n0.5,1.5,a\n2,3,b\n# a comment\n4,5e-1,a\n"),
    (".csv", b"1;2;3\r\n4;5;6\r\n7;8;9\r\n"),
    (".tsv", b"a\tb\n1\t2\n3\t4\n"),
    (".txt", b"1 2 # note\n3 4\n5 6\n"),
    (".csv", b"a,b\r1,2\r3,#x\r"),
    (".npy", _npy(_rng.random((5, 3)))),
    (".npy", _npy(np.arange(12, dtype=np.int16).reshape(4, 3))),
    (".npy", _npy(np.zeros(4, dtype=[("xy", "<f8", (2,)), ("c", "<i4")]))),
    (".npz", _npz({"X": _rng.random((6, 2)), "y": np.arange(6) % 2})),
    (".npz", _npz({"data": _rng.random((4, 4)).astype(np.float32)}, compressed=False)),
]

_OPS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(0, 255)),
    st.tuples(st.just("insert"), st.integers(0, 10**6), st.binary(min_size=1, max_size=16)),
    st.tuples(st.just("delete"), st.integers(0, 10**6), st.integers(1, 32)),
    st.tuples(st.just("repeat"), st.integers(0, 10**6), st.integers(1, 64)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6), st.just(0)),
    st.tuples(st.just("newlines"), st.sampled_from([b"\r", b"\r\n", b"\n\n"]), st.just(0)),
    st.tuples(st.just("shape"), st.sampled_from([10**9, 2**40, 0, 1, 2**63 - 1]), st.just(0)),
    st.tuples(st.just("rezip"), st.sampled_from([zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED,
                                                  zipfile.ZIP_BZIP2]), st.just(0)),
)


def _apply(content: bytes, op) -> bytes:
    kind, a, b = op
    n = len(content)
    if kind == "flip" and n:
        i = a % n
        return content[:i] + bytes([content[i] ^ (b or 1)]) + content[i + 1:]
    if kind == "insert":
        i = a % (n + 1)
        return content[:i] + b + content[i:]
    if kind == "delete" and n:
        i = a % n
        return content[:i] + content[i + b:]
    if kind == "repeat" and n:
        i = a % n
        return content[:i] + content[i:i + 8] * b + content[i:]
    if kind == "truncate":
        return content[: a % (n + 1)]
    if kind == "newlines":
        return content.replace(b"\n", a)
    if kind == "shape":  # an NPY header (also inside an NPZ member, stored) claims more
        return re.sub(rb"'shape': \((\d+)", lambda m: b"'shape': (" + str(a).encode(),
                      content, count=1)
    if kind == "rezip" and content[:2] == b"PK":
        try:
            with zipfile.ZipFile(io.BytesIO(content)) as src:
                members = {i.filename: src.read(i) for i in src.infolist()}
        except Exception:  # a broken archive stays as it is
            return content
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", compression=a) as dst:
            for name, data in members.items():
                dst.writestr(name, data)
        return buf.getvalue()
    return content


@st.composite
def fuzzed_files(draw):
    suffix, content = draw(st.sampled_from(SEEDS))
    for op in draw(st.lists(_OPS, max_size=4)):
        content = _apply(content, op)
    if draw(st.integers(0, 9)) == 0:  # now and then a file of another kind's bytes
        suffix = draw(st.sampled_from([".csv", ".npy", ".npz"]))
    label = draw(st.sampled_from([None, None, None, 0, -1, "label", "y"]))
    return suffix, content, label


def _check(suffix: str, content: bytes, label) -> None:
    name = "fuzzed" + suffix
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(content)
        try:
            with memory.file_limit(FUZZ_FILE_LIMIT):
                ds = datasets.read(path, label_column=label)
        except (ValueError, TypeError) as exc:
            text = str(exc)
            assert name in text or "label_column" in text, f"not named: {text!r}"
            return
    assert ds.X.dtype == np.float32 and ds.X.ndim == 2
    assert ds.n >= 2 and ds.d >= 1 and np.isfinite(ds.X).all()
    if ds.y is not None:
        assert ds.y.shape == (ds.n,)


@settings(max_examples=40, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(case=fuzzed_files())
def _fuzz_batch(case):
    _check(*case)


def test_fuzz_the_file_readers_for_a_bounded_time():
    start = time.monotonic()
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    batches = 0
    while batches == 0 or time.monotonic() - start < BUDGET_SECONDS:
        _fuzz_batch()  # a new batch of examples each call (no example database)
        batches += 1
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak
    assert grown < RSS_GROWTH_KIB, f"peak memory grew by {grown / 1024:.0f} MiB"


def test_every_seed_reads():
    """The seeds are valid files: the mutations start from files that work."""
    for suffix, content in SEEDS:
        label = "label" if b"label" in content else None
        _check(suffix, content, label)
