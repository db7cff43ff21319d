"""explorer.data: built-in generators, file readers, suggested parameters."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from scipy.spatial import cKDTree
from sklearn.datasets import load_digits

from explorer import data
from explorer.graph import dataset_params, suggest_params  # noqa: E402

_digits, _syn4d = data._digits, data._syn4d  # the generators' private helpers

SMALL = {name: min(info.default_n, 600) for name, info in data.DATASETS.items()}


# --- the catalogue and load() --------------------------------------------------------


@pytest.mark.parametrize("name", list(data.DATASETS))
def test_every_dataset_has_the_catalogued_shape(name):
    info = data.DATASETS[name]
    ds = data.load(name, n_samples=SMALL[name], random_state=1)
    assert ds.X.shape == (SMALL[name], info.d)
    assert ds.X.dtype == np.float32 and ds.X.flags.c_contiguous
    assert np.isfinite(ds.X).all()
    assert ds.name == name and ds.description == info.description
    assert ds.params["n_samples"] == SMALL[name] and ds.params["random_state"] == 1
    if info.n_classes is None:
        assert ds.y is None and ds.n_classes is None
    else:
        assert ds.y.dtype == np.int64 and ds.y.shape == (SMALL[name],)
        assert set(np.unique(ds.y)) <= set(range(info.n_classes))
        assert ds.n_classes >= min(info.n_classes, 2)


@pytest.mark.parametrize("name", ["moons", "circles", "blobs", "aniso", "varied", "spirals",
                                  "uniform"])
def test_2d_shapes_fill_the_unit_square_keeping_their_aspect(name):
    X = data.load(name, n_samples=500, random_state=3).X
    assert X.min(axis=0) == pytest.approx([0, 0], abs=1e-7)
    extent = X.max(axis=0)
    assert extent.max() == pytest.approx(1.0, abs=1e-6) and extent.min() <= 1.0


@pytest.mark.parametrize("name", list(data.DATASETS))
def test_same_seed_same_data_other_seed_other_data(name):
    a = data.load(name, n_samples=SMALL[name], random_state=5)
    b = data.load(name, n_samples=SMALL[name], random_state=5)
    c = data.load(name, n_samples=SMALL[name], random_state=6)
    np.testing.assert_array_equal(a.X, b.X)
    if name == "digits" and SMALL[name] == 1797:
        return  # the whole set: no randomness
    assert not np.array_equal(a.X, c.X)


def test_default_size_comes_from_the_catalogue():
    assert data.load("moons").n == data.DATASETS["moons"].default_n
    assert data.load("digits").n == 1797


def test_options_change_the_data_and_are_recorded():
    calm = data.load("moons", n_samples=400, noise=0.0)
    noisy = data.load("moons", n_samples=400, noise=0.2)
    assert calm.params["noise"] == 0.0 and noisy.params["noise"] == 0.2
    assert not np.array_equal(calm.X, noisy.X)
    assert data.load("blobs", n_samples=400, centers=5).n_classes == 5


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        (dict(name="nope"), ValueError, ["'nope'", "'moons'", "'syn4d'"]),
        (dict(name=3), ValueError, ["name=3"]),
        (dict(name="moons", n_samples=1), ValueError, ["n_samples=1", "[2"]),
        (dict(name="moons", n_samples=2.5), TypeError, ["n_samples", "2.5"]),
        (dict(name="digits", n_samples=1798), ValueError, ["n_samples=1798", "1797"]),
        (dict(name="moons", random_state=-1), ValueError, ["random_state=-1"]),
        (dict(name="moons", bogus=1), ValueError, ["'bogus'", "noise"]),
        (dict(name="uniform", noise=0.1), ValueError, ["'noise'", "none"]),
        (dict(name="moons", noise=-0.1), ValueError, ["noise=-0.1"]),
        (dict(name="circles", factor=1.0), ValueError, ["factor=1.0"]),
        (dict(name="varied", cluster_std=(0.1, -1)), ValueError, ["cluster_std"]),
        (dict(name="infinite-digits", gamma=0), ValueError, ["gamma=0"]),
        (dict(name="infinite-digits", scale=1.0), ValueError, ["scale=1.0"]),
        (dict(name="infinite-digits", blend=0.6), ValueError, ["blend=0.6"]),
        (dict(name="infinite-digits", originals=0), ValueError, ["originals=0"]),
        (dict(name="infinite-digits", scale=0.8), ValueError, ["scale * spread"]),
    ],
)
def test_load_rejects_bad_arguments_naming_them(kwargs, error, words):
    with pytest.raises(error) as info:
        data.load(**kwargs)
    for word in words:
        assert word in str(info.value)


# --- digits ---------------------------------------------------------------------------


def test_digits_is_scikit_learns_scaled_to_unit_range():
    ds = data.load("digits")
    ref = load_digits()
    np.testing.assert_array_equal(ds.X, (ref.data / 16.0).astype(np.float32))
    np.testing.assert_array_equal(ds.y, ref.target)


def test_digits_subset_rows_are_rows_of_the_full_set():
    full = data.load("digits")
    sub = data.load("digits", n_samples=300, random_state=2)
    rows = {row.tobytes(): label for row, label in zip(full.X, full.y, strict=True)}
    assert all(rows[row.tobytes()] == label for row, label in zip(sub.X, sub.y, strict=True))
    assert len({row.tobytes() for row in sub.X}) >= 295  # no row picked twice (few duplicates)


def test_infinite_digits_without_deformation_are_the_upscaled_templates():
    ds = data.load("infinite-digits", n_samples=300, random_state=4, rotation=0, scale=0,
                   shear=0, translate=0, elastic=0, gamma=1, blend=0)
    frames = _digits._templates()[:, 1:-1, 1:-1].reshape(len(_digits._templates()), -1)
    _, labels = _digits._digits()
    lookup = {}
    for frame, label in zip(frames, labels, strict=True):
        lookup.setdefault(frame.tobytes(), set()).add(int(label))
    for row, label in zip(ds.X, ds.y, strict=True):
        assert int(label) in lookup[row.tobytes()]


def test_infinite_digits_are_deformed_but_keep_their_class():
    ds = data.load("infinite-digits", n_samples=400, random_state=7, gamma=1)
    assert ds.X.min() >= 0.0 and ds.X.max() <= 1.0
    frames = _digits._templates()[:, 1:-1, 1:-1].reshape(len(_digits._templates()), -1)
    _, labels = _digits._digits()
    exact = {f.tobytes() for f in frames}
    assert not any(row.tobytes() in exact for row in ds.X)
    # The class is still readable: the nearest template (cosine) mostly has it.
    unit = frames / np.linalg.norm(frames, axis=1, keepdims=True)
    sims = (ds.X / np.linalg.norm(ds.X, axis=1, keepdims=True)) @ unit.T
    agreement = np.mean(labels[sims.argmax(axis=1)] == ds.y)
    assert agreement > 0.7, agreement


def test_infinite_digits_do_not_depend_on_the_batch_size(monkeypatch):
    a = data.load("infinite-digits", n_samples=250, random_state=9, originals=200)
    monkeypatch.setattr(_digits, "_BATCH", 37)
    b = data.load("infinite-digits", n_samples=250, random_state=9, originals=200)
    np.testing.assert_array_equal(a.X, b.X)
    np.testing.assert_array_equal(a.y, b.y)


def _unit(X):
    return X / np.linalg.norm(X, axis=1, keepdims=True)


def test_infinite_digits_blend_two_digits_of_the_class_so_no_near_copies():
    # With single digits, n samples hold n / 1797 deformed copies of each digit, and
    # the copies of unusual digits end up as components of their own at cosine 0.8
    # (at n = 60 000: 15 of them, and k = 10 clustering found nothing). Blends of two
    # digits make each sample nearly unique: the most similar other sample rarely
    # shares the sample's (first) digit: at n = 4000 about 2 % of the rows (seeds 0-2).
    n, seed = 4000, 0
    X, y = _digits.infinite_digits(n, np.random.default_rng(seed))
    first = _digits._draw(np.random.default_rng(seed), n, 0.5, 10.0, 0.1, 0.2, 2.25,
                          1.0)["first"]
    assert np.array_equal(_digits._digits()[1][first], y)  # the draws the data came from
    S = _unit(X) @ _unit(X).T
    np.fill_diagonal(S, -1.0)
    nearest = S.argmax(axis=1)
    assert np.mean(first[nearest] == first) < 0.04
    assert np.mean(y[nearest] == y) > 0.8  # the class is still what is near
    # The earlier generator (single digits, shifts of ±1 pixel): 8-10 %.
    single, _ = _digits.infinite_digits(n, np.random.default_rng(seed), blend=0, translate=1.0)
    S = _unit(single) @ _unit(single).T
    np.fill_diagonal(S, -1.0)
    assert np.mean(first[S.argmax(axis=1)] == first) > 0.07


def test_infinite_digits_extra_samples_extend_the_originals_and_spread_wider():
    small = data.load("infinite-digits", n_samples=600, random_state=3, originals=600)
    large = data.load("infinite-digits", n_samples=1800, random_state=3, originals=600)
    np.testing.assert_array_equal(large.X[:600], small.X)
    np.testing.assert_array_equal(large.y[:600], small.y)
    # The extra samples are farther from everything: fewer neighbours above 0.8.
    S = _unit(large.X) @ _unit(large.X).T
    np.fill_diagonal(S, 0.0)
    degree = (S > 0.8).sum(axis=1)
    assert degree[600:].mean() < 0.8 * degree[:600].mean()
    alike = data.load("infinite-digits", n_samples=1800, random_state=3, originals=None)
    assert not np.array_equal(alike.X[600:], large.X[600:])
    np.testing.assert_array_equal(
        data.load("infinite-digits", n_samples=1800, random_state=3, originals=600,
                  spread=1.0).X[:600], small.X)


@pytest.mark.slow
def test_infinite_digits_calibration_gives_mnist60ks_mean_degree():
    # Table 3: MNIST60K has 251 nonzeros per row on average at cosine > 0.8; the
    # generator was calibrated to it (the full graph at seed 0: 251.0, max 3578).
    from explorer import graph_stats

    X = data.load("infinite-digits", n_samples=60_000, random_state=0).X
    stats = graph_stats(X, metric="cosine", threshold_sim=0.8, backend="cpu",
                        sample_rows=400)
    assert 200 < stats.nnz_row_mean < 310, stats.nnz_row_mean
    assert stats.n_isolated < 0.01 * len(X)


# --- syn4d ----------------------------------------------------------------------------


def test_syn4d_boxes_fill_unit_range_balanced_and_apart():
    ds = data.load("syn4d", n_samples=40_000, random_state=11)
    np.testing.assert_allclose(ds.X.min(axis=0), 0, atol=1e-7)
    np.testing.assert_allclose(ds.X.max(axis=0), 1, atol=1e-6)
    assert np.bincount(ds.y).tolist() == [10_000] * 4
    for k, corner in enumerate(_syn4d._CORNERS):
        pts = ds.X[ds.y == k]
        lo, hi = corner * (1 - _syn4d.SIDE), corner * (1 - _syn4d.SIDE) + _syn4d.SIDE
        assert np.all(pts >= lo - 1e-3) and np.all(pts <= hi + 1e-3)
    # No pair of points from different clusters within the suggested radius.
    t = dataset_params(ds)["threshold_sqdist"]
    for a in range(4):
        tree = cKDTree(ds.X[ds.y == a])
        for b in range(a + 1, 4):
            dist, _ = tree.query(ds.X[ds.y == b], k=1)
            assert dist.min() ** 2 > 5 * t


@pytest.mark.slow
def test_syn4d_calibration_gives_the_papers_mean_degree():
    # Mean nnz per row scales as n t² in 4-D: at n = 2.5·10⁵ the threshold
    # 0.0008·2 gives the same mean as Syn1M's 0.0008 at 10⁶ (the paper: 23), up to a
    # slightly larger boundary loss.
    ds = data.load("syn4d", n_samples=250_000, random_state=0)
    X = ds.X.astype(np.float64)
    rows = np.random.default_rng(0).choice(len(X), 5000, replace=False)
    counts = cKDTree(X).query_ball_point(X[rows], np.sqrt(0.0016), return_length=True) - 1
    assert 21.0 < counts.mean() < 23.5, counts.mean()


def test_syn4d_suggests_the_papers_parameters_at_one_million():
    assert _syn4d.suggested_threshold(1_000_000) == (0.01, 0.0008)
    sigma, t = _syn4d.suggested_threshold(5_000_000)
    assert t == pytest.approx(0.00036) and sigma == pytest.approx(0.0067)
    smaller = [_syn4d.suggested_threshold(n)[1] for n in (2_000, 20_000, 200_000)]
    assert smaller == sorted(smaller, reverse=True) and smaller[-1] > 0.0008


# --- suggested parameters ----------------------------------------------------------


def test_suggestions_give_clusters_as_components_on_clean_shapes():
    from scipy.sparse.csgraph import connected_components

    for name, k in [("moons", 2), ("circles", 2), ("blobs", 3)]:
        ds = data.load(name, n_samples=1500, random_state=0)
        s = dataset_params(ds)
        assert s["n_clusters"] == k and s["metric"] == "gaussian"
        assert s["sigma"] == pytest.approx(np.sqrt(s["threshold_sqdist"] / 8), rel=0.1)
        tree = cKDTree(ds.X.astype(np.float64))
        graph = tree.sparse_distance_matrix(tree, np.sqrt(s["threshold_sqdist"]))
        _, comp = connected_components(graph, directed=False)
        sizes = np.bincount(comp)
        pieces = sizes[sizes > 1]
        assert len(pieces) <= k and pieces.min() > 20, (name, sorted(sizes)[-6:])


def test_suggest_params_high_d_uses_cosine(rng):
    centers = rng.normal(size=(3, 40))
    X = (centers[rng.integers(0, 3, 600)] + 0.3 * rng.normal(size=(600, 40))).astype(np.float32)
    X[0] = 0.0  # a zero vector has no cosine neighbours and must not break the rule
    s = suggest_params(X)
    assert s["metric"] == "cosine" and s["n_clusters"] == "auto"
    assert 0.0 < s["threshold_sim"] < 1.0
    assert "sigma" not in s and "threshold_sqdist" not in s


def test_suggest_params_survives_duplicates():
    X = np.zeros((50, 2), np.float32)
    X[25:] = 1.0
    s = suggest_params(X)
    assert s["threshold_sqdist"] > 0 and s["sigma"] > 0


def test_suggest_params_validates():
    X = np.zeros((10, 2), np.float32)
    with pytest.raises(ValueError, match="n_neighbors=0"):
        suggest_params(X, n_neighbors=0)


# --- read() ---------------------------------------------------------------------------


def _write(path, text):
    path.write_text(text)
    return path


def test_read_csv_with_header_and_text_labels(tmp_path):
    p = _write(tmp_path / "iris.csv", "a,b,species\n1,2,setosa\n3,4,virginica\n5,6,setosa\n")
    ds = data.read(p, label_column="species")
    np.testing.assert_array_equal(ds.X, [[1, 2], [3, 4], [5, 6]])
    assert ds.X.dtype == np.float32
    assert ds.y.tolist() == [0, 1, 0] and ds.classes == ("setosa", "virginica")
    assert ds.feature_names == ("a", "b") and ds.name == "iris.csv"
    assert ds.params == {"path": str(p), "label_column": "species",
                         "columns": ("a", "b", "species"),
                         "read": {"format": "csv", "encoding": "utf-8", "comment_lines": 0,
                                  "delimiter": ",", "decimal": ".", "thousands": None,
                                  "header": True, "decoded_bytes": 3 * 3 * 8, "ignored": {}}}
    for by_position in (-1, 2, "2"):  # the column used is recorded by its name
        ds = data.read(p, label_column=by_position)
        assert ds.y.tolist() == [0, 1, 0] and ds.params["label_column"] == "species"


def test_auto_label_column_by_name_keeps_class_names(tmp_path, rng):
    """label_column="auto" takes a column named like labels (any case, any position),
    and the class names stay the file's."""
    names = np.array(["setosa", "versicolor", "virginica"])
    y = rng.integers(0, 3, 40)
    X = rng.normal(size=(40, 3))
    header = ["sepal", "Species", "petal", "width"]
    rows = [f"{a:.4f},{names[c]},{b:.4f},{d:.4f}" for (a, b, d), c in zip(X, y, strict=True)]
    p = _write(tmp_path / "iris.csv", ",".join(header) + "\n" + "\n".join(rows) + "\n")
    ds = data.read(p, label_column="auto")
    assert ds.params["label_column"] == "Species"
    assert ds.params["columns"] == tuple(header)
    assert ds.classes == tuple(names[np.unique(y)])
    assert [ds.classes[c] for c in ds.y] == names[y].tolist()
    assert ds.d == 3 and ds.feature_names == ("sepal", "petal", "width")
    np.testing.assert_allclose(ds.X, X, atol=1e-4)
    # Numeric labels in a "target" column: taken by name, values kept as classes.
    p = _write(tmp_path / "t.csv", "u,v,target\n0.1,0.2,7\n0.3,0.4,3\n0.5,0.6,7\n")
    ds = data.read(p, label_column="auto")
    assert ds.params["label_column"] == "target" and ds.classes == (3, 7)
    assert ds.y.tolist() == [1, 0, 1] and ds.d == 2


def test_auto_label_column_is_the_only_text_column(tmp_path):
    """Without a label-like name, the one non-numeric column is the label column, with or
    without a header; with none or two, nothing (or the usual error) follows."""
    p = _write(tmp_path / "a.csv", "kind,p,q\nred,1,2\nblue,3,4\nred,5,6\n")
    ds = data.read(p, label_column="auto")
    assert ds.params["label_column"] == "kind" and ds.classes == ("blue", "red")
    assert ds.params["columns"] == ("kind", "p", "q")
    p = _write(tmp_path / "b.csv", "1,2,#a\n3,4,#b\n5,6,#a\n")
    ds = data.read(p, label_column="auto")
    assert ds.params["label_column"] == 2 and ds.params["columns"] == (0, 1, 2)
    assert ds.classes == ("#a", "#b") and ds.feature_names is None
    p = _write(tmp_path / "c.csv", "x,y\n1,2\n3,4\n")  # "y" is a coordinate, not labels
    ds = data.read(p, label_column="auto")
    assert ds.y is None and ds.params["label_column"] is None and ds.d == 2
    p = _write(tmp_path / "d.csv", "p,q,r\n1,a,b\n2,c,d\n")
    with pytest.raises(ValueError, match=r"column 'q' is not numeric"):
        data.read(p, label_column="auto")
    p = _write(tmp_path / "auto.csv", "auto,label,p\n0,1,2\n1,0,3\n")  # a column named auto
    assert data.read(p, label_column="auto").params["label_column"] == "auto"


def test_auto_label_column_of_numpy_files(tmp_path, rng):
    X = rng.normal(size=(20, 3))
    np.save(tmp_path / "x.npy", X)
    ds = data.read(tmp_path / "x.npy", label_column="auto")
    assert ds.y is None and ds.params["columns"] == (0, 1, 2)
    y = np.array(["b", "a"] * 10)
    np.savez(tmp_path / "xy.npz", X=X, y=y)
    ds = data.read(tmp_path / "xy.npz", label_column="auto")
    assert ds.params["label_column"] == "y" and ds.classes == ("a", "b")
    assert [ds.classes[c] for c in ds.y] == y.tolist()


def test_read_csv_without_header_semicolons_and_comments(tmp_path):
    p = _write(tmp_path / "x.csv", "# comment\n1.5;2;0\n3;4e-1;1\n\n5;6;1\n")
    ds = data.read(p, label_column=2)
    np.testing.assert_allclose(ds.X, [[1.5, 2], [3, 0.4], [5, 6]])
    assert ds.y.tolist() == [0, 1, 1] and ds.feature_names is None


def test_read_tsv_and_whitespace(tmp_path):
    ds = data.read(_write(tmp_path / "x.tsv", "x\ty\n1\t2\n3\t4\n"))
    assert ds.feature_names == ("x", "y") and ds.y is None
    ds = data.read(_write(tmp_path / "x.txt", "1 2 3\n4 5 6\n"))
    np.testing.assert_array_equal(ds.X, [[1, 2, 3], [4, 5, 6]])


@given(hnp.arrays(np.float32, st.tuples(st.integers(2, 30), st.integers(1, 6)),
                  elements=st.floats(-1e6, 1e6, width=32)))
def test_read_csv_round_trips_float32(tmp_path_factory, X):
    path = tmp_path_factory.mktemp("rt") / "data.csv"
    pd.DataFrame(X, columns=[f"f{j}" for j in range(X.shape[1])]).to_csv(
        path, index=False, float_format="%.9g")
    np.testing.assert_array_equal(data.read(path).X, X)


@pytest.mark.parametrize(
    ("text", "kwargs", "words"),
    [
        ("a,b\n1,2\n3,4,5\n", {}, ["x.csv", "ragged", "same number of fields"]),
        ("a,b,c\n1,2,3\n4,5\n", {}, ["x.csv", "'c'", "missing", "short rows"]),
        ("a,b\n1,hello\n3,4\n", {}, ["x.csv", "'b'", "not numeric", "'hello'", "label column"]),
        ("a,b\n1,2\n3,\n", {}, ["x.csv", "'b'", "missing"]),
        ("a,b\n1,2\n3,4\n", {"label_column": "c"}, ["label_column='c'", "'a', 'b'"]),
        ("a,b\n1,2\n3,4\n", {"label_column": 5}, ["label_column=5", "2 columns"]),
        ("a,lab\n1,x\n3,\n", {"label_column": "lab"}, ["missing labels"]),
        ("a\n1\n", {}, ["x.csv", "n=1", "n >= 2"]),
        ("a,b\n1,2\n3,nan\n", {}, ["x.csv", "non-finite"]),
        ("lab\nx\ny\n", {"label_column": 0}, ["no feature columns"]),
        ("# only a comment\n", {}, ["x.csv", "no data rows"]),
    ],
)
def test_read_csv_errors_name_file_and_problem(tmp_path, text, kwargs, words):
    p = _write(tmp_path / "x.csv", text)
    with pytest.raises(ValueError) as info:
        data.read(p, **kwargs)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_read_rejects_missing_empty_and_unknown_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.csv"):
        data.read(tmp_path / "nothere.csv")
    with pytest.raises(ValueError, match="empty"):
        data.read(_write(tmp_path / "e.csv", ""))
    with pytest.raises(ValueError, match=r"'\.xlsx'.*\.csv"):
        data.read(_write(tmp_path / "a.xlsx", "x"))
    with pytest.raises(TypeError, match="label_column"):
        data.read(_write(tmp_path / "b.csv", "1,2\n3,4\n"), label_column=1.5)


def test_read_npy_plain_and_structured(tmp_path, rng):
    X = rng.normal(size=(20, 3))
    np.save(tmp_path / "x.npy", X)
    ds = data.read(tmp_path / "x.npy")
    np.testing.assert_array_equal(ds.X, X.astype(np.float32))
    labelled = np.column_stack([X, rng.integers(0, 3, 20)])
    np.save(tmp_path / "l.npy", labelled)
    ds = data.read(tmp_path / "l.npy", label_column=-1)
    assert ds.X.shape == (20, 3) and ds.y.tolist() == np.unique(
        labelled[:, -1], return_inverse=True)[1].tolist()
    rec = np.zeros(5, dtype=[("u", "f4"), ("v", "f8"), ("kind", "U5")])
    rec["u"], rec["v"], rec["kind"] = np.arange(5), -np.arange(5), list("ababa")
    np.save(tmp_path / "s.npy", rec)
    ds = data.read(tmp_path / "s.npy", label_column="kind")
    assert ds.feature_names == ("u", "v") and ds.classes == ("a", "b")
    with pytest.raises(ValueError, match="'kind'.*not numeric"):
        data.read(tmp_path / "s.npy")


def test_read_npy_errors(tmp_path):
    np.save(tmp_path / "one.npy", np.arange(5.0))
    with pytest.raises(ValueError, match="one.npy.*2-D.*1-D"):
        data.read(tmp_path / "one.npy")
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match="obj.npy.*pickle"):
        data.read(tmp_path / "obj.npy")
    np.save(tmp_path / "two.npy", np.ones((4, 2)))
    with pytest.raises(ValueError, match="no names"):
        data.read(tmp_path / "two.npy", label_column="y")
    _write(tmp_path / "bad.npy", "not numpy")
    with pytest.raises(ValueError, match="bad.npy.*not a readable NumPy file"):
        data.read(tmp_path / "bad.npy")


def test_read_npz_variants(tmp_path, rng):
    X, y = rng.normal(size=(12, 4)), rng.integers(0, 2, 12)
    np.savez(tmp_path / "a.npz", X=X, y=y)
    ds = data.read(tmp_path / "a.npz")
    np.testing.assert_array_equal(ds.X, X.astype(np.float32))
    np.testing.assert_array_equal(ds.y, np.unique(y, return_inverse=True)[1])
    np.savez(tmp_path / "b.npz", meta=np.arange(3), features=X, target=y)
    ds = data.read(tmp_path / "b.npz", label_column="target")
    assert ds.X.shape == (12, 4) and ds.y is not None
    assert data.read(tmp_path / "b.npz").y is None
    np.savez(tmp_path / "c.npz", v=np.arange(3))
    with pytest.raises(ValueError, match="c.npz.*no data array.*'X'"):
        data.read(tmp_path / "c.npz")
    np.savez(tmp_path / "d.npz", X=X, y=y[:5])
    with pytest.raises(ValueError, match="5 labels for 12 rows"):
        data.read(tmp_path / "d.npz")


def test_read_parquet(tmp_path, rng):
    frame = pd.DataFrame({"x": rng.normal(size=8), "y": rng.normal(size=8),
                          "cls": list("abcdabcd")})
    frame.to_parquet(tmp_path / "d.parquet")
    ds = data.read(tmp_path / "d.parquet", label_column="cls")
    np.testing.assert_array_equal(ds.X, frame[["x", "y"]].to_numpy(np.float32))
    assert ds.classes == ("a", "b", "c", "d") and ds.feature_names == ("x", "y")
    with pytest.raises(ValueError, match="d.parquet.*'cls'.*not numeric"):
        data.read(tmp_path / "d.parquet")
    _write(tmp_path / "bad.parquet", "nope")
    with pytest.raises(ValueError, match="bad.parquet.*not a readable Parquet"):
        data.read(tmp_path / "bad.parquet")
