"""The representatives chain (explorer.representatives, SpectralClustering(mode=...)) on
the CPU: against the exact pipeline on easy data, the mapping of labels back to every
point against a NumPy reference, the auto rule and the errors."""

from __future__ import annotations

import numpy as np
import pytest

from explorer import SpectralClustering
from explorer.metrics import adjusted_rand_score
from explorer.representatives import (
    DEFAULT_REPRESENTATIVES,
    EXACT_MAX_MEAN_DEGREE_GPU,
    EXACT_MAX_N_LOW_D,
    EXACT_MAX_WORK,
    assign_rows,
    check_n_representatives,
    choose_mode,
    extract_representatives,
)


def blobs(rng, n, d, k, spread=0.5):
    # Centres at least 10 spreads apart: "easy data" whatever the seed (two centres drawn
    # close made overlapping blobs, which exact and representatives split differently).
    while True:
        centres = rng.uniform(-10, 10, size=(k, d))
        gaps = np.linalg.norm(centres[:, None] - centres[None], axis=-1)[np.triu_indices(k, 1)]
        if gaps.min() >= 10 * spread:
            break
    y = rng.integers(0, k, size=n)
    return (centres[y] + spread * rng.standard_normal((n, d))).astype(np.float32), y


def test_representatives_agree_with_the_exact_pipeline_on_easy_data(rng):
    X, y = blobs(rng, 3000, 2, 4)
    seed = int(rng.integers(1000))
    exact = SpectralClustering(4, mode="exact", backend="cpu", random_state=seed).fit(X)
    reps = SpectralClustering(4, mode="representatives", n_representatives=300,
                              backend="cpu", random_state=seed).fit(X)
    assert exact.mode_ == "exact" and reps.mode_ == "representatives"
    assert exact.representatives_ is None and reps.representatives_.shape == (300, 2)
    assert reps.affinity_matrix_.shape == (300, 300)
    assert adjusted_rand_score(exact.labels_, reps.labels_) >= 0.98
    assert abs(adjusted_rand_score(y, exact.labels_) - adjusted_rand_score(y, reps.labels_)) \
        <= 0.02
    assert "representatives" in reps.timings_ and "representatives" not in exact.timings_


def test_every_point_takes_its_representatives_label(rng):
    X, _ = blobs(rng, 2000, 5, 3, spread=1.0)
    sc = SpectralClustering(3, mode="representatives", n_representatives=150, backend="cpu",
                            random_state=int(rng.integers(1000))).fit(X)
    C = sc.representatives_.astype(np.float64)
    # The nearest representative in float64; rows near a tie may go either way.
    D = ((X.astype(np.float64)[:, None, :] - C[None]) ** 2).sum(-1)
    order = np.sort(D, axis=1)
    clear = order[:, 1] - order[:, 0] > 1e-4 * (1 + order[:, 0])
    assert clear.mean() > 0.99
    np.testing.assert_array_equal(sc.representative_of_[clear], D[clear].argmin(1))
    got = D[np.arange(len(X)), sc.representative_of_]
    np.testing.assert_allclose(got, order[:, 0], rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(sc.labels_, sc.representative_labels_[sc.representative_of_])
    np.testing.assert_array_equal(sc.representative_counts_,
                                  np.bincount(sc.representative_of_, minlength=150))
    np.testing.assert_array_equal(sc.isolated_, sc.representative_labels_[
        sc.representative_of_] == -1)
    assert sc.labels_.shape == (2000,) and sc.labels_.dtype == np.int32


def test_extract_representatives_fits_a_sample_and_assigns_every_row(rng):
    X, _ = blobs(rng, 5000, 3, 4)
    reps = extract_representatives(X, 40, random_state=0, sample_per_representative=10)
    assert reps.sample_size == 400
    assert reps.centers.shape == (40, 3) and reps.centers.dtype == np.float32
    assert reps.counts.sum() == 5000 and set(reps.timings) == {"fit", "assign"}
    D = ((X.astype(np.float64)[:, None, :] - reps.centers.astype(np.float64)[None]) ** 2).sum(-1)
    assert reps.mean_sqdist == pytest.approx(D.min(1).mean(), rel=1e-4)
    same = extract_representatives(X, 40, random_state=0, sample_per_representative=10)
    np.testing.assert_array_equal(reps.labels, same.labels)
    # All rows when the sample would not be smaller.
    assert extract_representatives(X[:300], 40, random_state=0).sample_size == 300


def test_assign_rows_in_blocks_far_from_the_origin(rng, monkeypatch):
    import explorer.representatives as module

    monkeypatch.setitem(module.ASSIGN_BLOCK_VALUES, "cpu", 3 * 100)  # blocks of 1024 rows
    C = (rng.standard_normal((7, 3)) * 5 + 1e4).astype(np.float32)
    X = (C[rng.integers(0, 7, size=3000)] + rng.standard_normal((3000, 3))).astype(np.float32)
    labels, total = assign_rows(X, C)
    D = ((X.astype(np.float64)[:, None, :] - C.astype(np.float64)[None]) ** 2).sum(-1)
    order = np.sort(D, axis=1)
    clear = order[:, 1] - order[:, 0] > 1e-2
    np.testing.assert_array_equal(labels[clear], D[clear].argmin(1))
    assert total == pytest.approx(order[:, 0].sum(), rel=1e-3)


def test_auto_mode_rule():
    # Few features with a distance rule: exact up to EXACT_MAX_N_LOW_D points (grid /
    # kd-tree), then representatives: a graph of every point splits clusters there.
    assert choose_mode("auto", EXACT_MAX_N_LOW_D, 4, backend="gpu")[0] == "exact"
    for backend in ("gpu", "cpu"):
        mode, why = choose_mode("auto", EXACT_MAX_N_LOW_D + 1, 2, backend=backend)
        assert mode == "representatives" and "resolution of m points" in why
    assert choose_mode("auto", 10**8, 4, backend="gpu")[0] == "representatives"
    assert choose_mode("exact", 10**8, 4, backend="gpu")[0] == "exact"
    # ... not with the cosine metric.
    mode, why = choose_mode("auto", 10**7, 4, backend="gpu", metric="cosine")
    assert mode == "representatives" and "n²·d" in why
    # Many features: by the pair work, per backend.
    assert choose_mode("auto", 240_000, 784, backend="gpu")[0] == "exact"
    assert choose_mode("auto", 10**6, 784, backend="gpu")[0] == "representatives"
    n_cpu = int((EXACT_MAX_WORK["cpu"] / 64) ** 0.5)
    assert choose_mode("auto", n_cpu, 64, backend="cpu")[0] == "exact"
    assert choose_mode("auto", 2 * n_cpu, 64, backend="cpu")[0] == "representatives"
    # No more points than representatives: exact.
    assert choose_mode("auto", 3000, 784, backend="cpu", n_representatives=3000)[0] == "exact"
    assert choose_mode("representatives", 10, 2, backend="cpu") == (
        "representatives", "mode='representatives' given")


def test_auto_mode_weighs_the_given_rules_exact_graph_on_the_gpu():
    # Past EXACT_MAX_N_LOW_D low-d points with the rule given, the GPU takes the exact
    # graph while its estimated nonzeros fit the budget (Syn1M's rule: 2.3e7 at 10⁶),
    # and says so; over budget, and always on the CPU, the representatives.
    n, budget = 10**6, EXACT_MAX_MEAN_DEGREE_GPU * 10**6
    mode, why = choose_mode("auto", n, 4, backend="gpu", exact_nnz=2.3e7, nnz_budget=budget)
    assert mode == "exact"
    assert "2.3e+07 nonzeros" in why and "within the GPU's budget (6.4e+07)" in why
    mode, why = choose_mode("auto", n, 4, backend="gpu", exact_nnz=9e7, nnz_budget=budget)
    assert mode == "representatives" and "9e+07 nonzeros, exceeds" in why
    mode, why = choose_mode("auto", n, 4, backend="cpu", exact_nnz=2.3e7, nnz_budget=budget)
    assert mode == "representatives" and "resolution of m points" in why
    assert choose_mode("exact", n, 4, backend="gpu", exact_nnz=9e7,
                       nnz_budget=budget)[0] == "exact"


def test_auto_mode_on_the_estimator_says_why(rng, monkeypatch):
    import explorer.representatives as module

    X, _ = blobs(rng, 1200, 12, 3)
    sc = SpectralClustering(3, backend="cpu", random_state=0).fit(X)
    assert sc.mode_ == "exact" and "n=1200 <= 2048 representatives" in sc.mode_why_
    monkeypatch.setitem(module.EXACT_MAX_WORK, "cpu", 1e6)
    sc = SpectralClustering(3, n_representatives=100, backend="cpu", random_state=0).fit(X)
    assert sc.mode_ == "representatives" and "> 1e+06 (cpu)" in sc.mode_why_
    assert sc.representatives_.shape == (100, 12)


def test_n_representatives_auto_and_errors():
    assert check_n_representatives("auto", 10**6, 10) == DEFAULT_REPRESENTATIVES["gpu"]
    assert check_n_representatives("auto", 10**6, 10, "cpu") == DEFAULT_REPRESENTATIVES["cpu"]
    assert check_n_representatives("auto", 500, 10) == 500
    with pytest.raises(ValueError, match=r"n_representatives=5 is out of range; allowed: "
                                         r"max\(2, n_clusters\) = 10"):
        check_n_representatives(5, 1000, 10)
    with pytest.raises(ValueError, match=r"n_representatives=1001 .*n_samples = 1000"):
        check_n_representatives(1001, 1000, 3)
    with pytest.raises(ValueError, match=r"n_representatives=1 is out of range"):
        check_n_representatives(1, 1000, "auto")
    with pytest.raises(ValueError, match="n_representatives"):
        check_n_representatives("many", 1000, 3)
    with pytest.raises(TypeError, match="n_representatives must be an integer"):
        check_n_representatives(2.5, 1000, 3)


@pytest.mark.parametrize(("kwargs", "error", "match"), [
    ({"mode": "fast"}, ValueError, "mode"),
    ({"n_representatives": 1}, ValueError, r"n_representatives=1 is out of range"),
    ({"n_representatives": "lots"}, TypeError, "n_representatives"),
    ({"mode": "representatives", "n_representatives": 5000}, ValueError,
     r"n_representatives=5000 .*n_samples = 300"),
    ({"mode": "representatives", "n_representatives": 3}, ValueError,
     r"max\(2, n_clusters\) = 4"),
])
def test_estimator_errors_name_the_argument(kwargs, error, match, rng):
    X, _ = blobs(rng, 300, 3, 4)
    with pytest.raises(error, match=match):
        SpectralClustering(4, backend="cpu", **kwargs).fit(X)


def test_n_representatives_is_checked_only_where_representatives_run(rng):
    X, _ = blobs(rng, 300, 3, 4)
    # More representatives than points: exact in auto mode (n <= m), unused in exact.
    for mode in ("auto", "exact"):
        sc = SpectralClustering(4, mode=mode, n_representatives=5000, backend="cpu",
                                random_state=0).fit(X)
        assert sc.mode_ == "exact" and sc.representatives_ is None


def test_memory_is_estimated_before_the_extraction(rng, monkeypatch):
    import explorer.memory as memory
    from explorer.representatives import estimate_bytes

    X, _ = blobs(rng, 2000, 3, 4)
    need = estimate_bytes(2000, 3, 100, gpu=False)
    # The labels of every row and the larger of the fit's and the assignment's blocks.
    assert 2000 * 4 < need < 2000 * 3 * 4 * 2 + 2000 * 16 + (1 << 22) * 4 + 10**5
    assert estimate_bytes(2000, 3, 100, gpu=True, move=True) >= 2000 * 3 * 4 + need
    monkeypatch.setattr(memory, "available_host_bytes", lambda: int(need))  # 80 % of it
    with pytest.raises(memory.MemoryEstimateError, match=r"representatives' extraction "
                       r"\(n=2000, d=3, m=100\) needs about .*lower n_representatives"):
        SpectralClustering(4, mode="representatives", n_representatives=100,
                           backend="cpu").fit(X)


def test_cli_runs_the_representatives_mode(tmp_path):
    import json

    from explorer.cli import main

    out = tmp_path / "run.json"
    assert main(["run", "blobs", "--n-samples", "2000", "--backend", "cpu", "--mode",
                 "representatives", "--n-representatives", "150", "--json", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["mode"]["name"] == "representatives"
    assert result["parameters"]["n_representatives"] == 150
    assert result["scores"]["ari"] > 0.9
    assert result["stats"]["n"] == 150
    with pytest.raises(SystemExit) as exc:
        main(["run", "blobs", "--n-samples", "500", "--backend", "cpu",
              "--n-representatives", "lots"])
    assert exc.value.code == 2


def test_weight_by_counts_scales_each_entry_by_both_counts(rng):
    import scipy.sparse as sp

    from explorer.representatives import weight_by_counts

    m = 40
    S = sp.random(m, m, density=0.2, random_state=1, dtype=np.float32)
    S = ((S + S.T) / 2).tocsr()
    S.sort_indices()
    counts = rng.integers(1, 500, size=m)
    W = weight_by_counts(S, counts)
    c = counts / counts.mean()
    expected = (S.toarray().astype(np.float64) * np.outer(c, c))
    np.testing.assert_array_equal(W.indptr, S.indptr)
    np.testing.assert_array_equal(W.indices, S.indices)
    np.testing.assert_allclose(W.toarray(), expected, rtol=1e-6)
    assert W.dtype == S.dtype


def test_representatives_mode_clusters_the_count_weighted_graph():
    from explorer import datasets
    from explorer.representatives import weight_by_counts

    ds = datasets.load("blobs", n_samples=6000, random_state=0)
    sc = SpectralClustering(ds.n_classes, mode="representatives", n_representatives=300,
                            backend="cpu", random_state=0).fit(ds.X)
    expected = weight_by_counts(sc.graph_.csr, sc.representative_counts_)
    np.testing.assert_array_equal(sc.affinity_matrix_.data, expected.data)
    assert adjusted_rand_score(ds.y, sc.labels_) > 0.99


def test_distinct_representatives_map_every_row_to_its_copy(rng):
    from explorer.representatives import distinct_representatives

    rows = rng.integers(1, 6, size=(40, 3)).astype(np.float32)
    X = rows[rng.integers(40, size=5000)]  # > DUPLICATE_SAMPLE: the sample decides first
    reps = distinct_representatives(X)
    assert reps.kind == "distinct" and reps.centers.shape == (np.unique(X, axis=0).shape[0], 3)
    assert np.array_equal(reps.centers[reps.labels], X) and reps.counts.sum() == len(X)
    signed = np.array([[0.0, 1.0], [-0.0, 1.0], [2.0, 3.0], [2.0, 3.0]], np.float32)
    assert distinct_representatives(signed).centers.shape == (2, 2)  # -0.0 is 0.0
    assert distinct_representatives(rng.normal(size=(300, 2)).astype(np.float32)) is None


def test_row_hashes_are_equal_exactly_for_equal_rows(rng):
    from explorer.representatives import _row_hashes

    levels = rng.integers(0, 3, size=(6000, 5)).astype(np.float32) - 1.0  # many copies
    levels[rng.random(levels.shape) < 0.1] *= -0.0  # signed zeros among them
    levels[::7] += rng.normal(size=(len(levels[::7]), 5)).astype(np.float32)
    _, row_id = np.unique(levels + np.float32(0.0), axis=0, return_inverse=True)
    _, hash_id = np.unique(_row_hashes(levels, np), return_inverse=True)
    # The same partition of the rows: equal rows hash alike, distinct rows apart.
    pairs = np.unique(np.c_[row_id.ravel(), hash_id.ravel()], axis=0)
    assert len(pairs) == row_id.max() + 1 == hash_id.max() + 1


@pytest.mark.parametrize("questions, levels", [(2, 4), (2, 5), (3, 5)])
def test_distinct_rows_cluster_as_the_graph_of_every_row(rng, questions, levels):
    """Survey-like answers (most rows copies): the distinct rows' graph weighted by
    their copies, the copies' own edges on its diagonal, and k-means over every copy
    give the clusters of the graph of every row under the same rule."""
    from explorer import SpectralClustering

    centres = rng.uniform(1, levels, size=(2, questions))
    y = rng.integers(2, size=600)
    X = np.clip(np.rint(centres[y] + rng.normal(0, 0.6, size=(600, questions))), 1,
                levels).astype(np.float32)
    # An ε rule (a kNN graph of every row is what the collapse exists to avoid: its
    # neighbours are copies), chosen from the data on the distinct rows.
    collapsed = SpectralClustering(2, affinity="epsilon", random_state=0).fit(X)
    assert collapsed.plan_.mode == "representatives"
    rule = collapsed.edge_rule_
    every = SpectralClustering(2, affinity="epsilon", metric=rule.metric, sigma=rule.sigma,
                               threshold_sqdist=rule.threshold_sqdist, mode="exact",
                               random_state=0).fit(X)
    assert every.edge_rule_.describe() == rule.describe()
    np.testing.assert_array_equal(collapsed.labels_ < 0, every.labels_ < 0)
    joined = collapsed.labels_ >= 0
    assert adjusted_rand_score(every.labels_[joined], collapsed.labels_[joined]) == 1.0


@pytest.mark.gpu
def test_gpu_distinct_rows_cluster_as_the_cpu(rng):
    """The collapse of copies on the GPU (the diagonal through cupyx, k-means over
    every copy's row) gives the CPU's clusters."""
    import cupy

    centres = rng.uniform(1, 5, size=(2, 2))
    y = rng.integers(2, size=3000)
    X = np.clip(np.rint(centres[y] + rng.normal(0, 0.6, size=(3000, 2))), 1,
                5).astype(np.float32)
    cpu = SpectralClustering(2, affinity="epsilon", random_state=0, backend="cpu").fit(X)
    gpu = SpectralClustering(2, affinity="epsilon", random_state=0, backend="gpu").fit(
        cupy.asarray(X))
    assert gpu.plan_.mode == cpu.plan_.mode == "representatives"
    labels = cupy.asnumpy(gpu.labels_)
    np.testing.assert_array_equal(labels < 0, cpu.labels_ < 0)
    assert adjusted_rand_score(cpu.labels_[labels >= 0], labels[labels >= 0]) == 1.0
