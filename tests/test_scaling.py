"""Feature scaling (explorer.preprocessing) and its use by the estimator and the CLI."""

import json
import warnings

import numpy as np
import pytest
from sklearn.preprocessing import MinMaxScaler, StandardScaler

from explorer import SpectralClustering
from explorer.cli import main
from explorer.preprocessing import (
    ConstantFeatureWarning,
    FeatureScaleWarning,
    check_feature_scales,
    fit_scaler,
    scale_features,
)


def _wide(rng, n=300):
    """Columns whose spreads span five orders of magnitude, with an offset."""
    spreads = np.array([1e-2, 1.0, 3e2, 1e3])
    return (rng.normal(size=(n, 4)) * spreads + np.array([5.0, -2.0, 1e4, 0.0]))


@pytest.mark.parametrize("method, reference", [("standard", StandardScaler),
                                                ("minmax", MinMaxScaler)])
def test_values_match_scikit_learn_in_float64(rng, method, reference):
    X = _wide(rng)
    expected = reference().fit_transform(X)
    X32 = X.astype(np.float32)
    scaler = fit_scaler(X32, method)
    out = scaler.transform(X32)
    assert out.dtype == np.float32 and out.flags.c_contiguous and out.shape == X.shape
    # The statistics are float64 of the float32 data: the float64 map of it, rounded once.
    exact = reference().fit_transform(X32.astype(np.float64))
    np.testing.assert_allclose(out, exact.astype(np.float32), rtol=0, atol=2e-6)
    np.testing.assert_allclose(out, expected, atol=1e-4)
    assert scale_features(X32, method).tobytes() == out.tobytes()
    assert scale_features(X32, None) is X32


def test_statistics_are_float64_and_exact_on_offset_data():
    # float32 sums over 10^5 rows of 1e4 + small values lose the small part; float64 not.
    rng = np.random.default_rng(3)
    X = (1e4 + rng.normal(size=(100_000, 1)) * 0.5).astype(np.float32)
    scaler = fit_scaler(X, "standard")
    x64 = X.astype(np.float64)
    assert scaler.offset.dtype == np.float64
    assert scaler.offset[0] == pytest.approx(x64.mean(), rel=1e-14)
    assert scaler.scale[0] == pytest.approx(x64.std(), rel=1e-10)
    out = scaler.transform(X)
    assert abs(float(out.astype(np.float64).mean())) < 1e-6
    assert float(out.astype(np.float64).std()) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize("method", ["standard", "minmax"])
def test_constant_column_warns_by_name_and_is_not_divided_by_zero(rng, method):
    X = rng.normal(size=(50, 3)).astype(np.float32)
    X[:, 1] = 7.5
    with pytest.warns(ConstantFeatureWarning, match=r"1 constant feature\(s\) \(column 1\)"):
        scaler = fit_scaler(X, method)
    assert list(scaler.constant) == [False, True, False]
    assert scaler.scale[1] == 1.0
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division by zero, no invalid value
        out = scaler.transform(X)
    assert np.all(np.isfinite(out)) and np.all(out[:, 1] == 0.0)
    assert "1 constant" in scaler.describe()


def test_scale_ratio_warning_only_when_ranges_differ_by_orders(rng):
    X = _wide(rng).astype(np.float32)
    with pytest.warns(FeatureScaleWarning, match=r"factor [\d.e+]+ \(column 3: .*column 0: "
                      r".*pass scale='auto' .* or scale='standard'"):
        ratio = check_feature_scales(X)
    x64 = X.astype(np.float64)
    ranges = x64.max(axis=0) - x64.min(axis=0)
    assert ratio == pytest.approx(ranges.max() / ranges.min(), rel=1e-9)
    X = rng.normal(size=(200, 3)) * np.array([1.0, 20.0, 50.0])
    X = np.column_stack([X, np.zeros(200)])  # a constant column is not a range of 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert check_feature_scales(X.astype(np.float32)) < 100


def test_auto_scales_mixed_units_only(rng):
    from sklearn.datasets import load_digits, load_iris, load_wine

    from explorer.preprocessing import choose_scaling

    assert choose_scaling(load_wine().data)[0] == "standard"
    assert "2.65e+03-fold" in choose_scaling(load_wine().data)[1]
    assert choose_scaling(load_iris().data)[0] is None
    digits = load_digits().data  # pixels 0-16: one unit, many constant or rare columns
    assert choose_scaling(digits)[0] is None
    std = digits.std(axis=0)
    assert std.max() / std[std > 0].min() > 100  # what the spreads alone would flag
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        check_feature_scales(digits)


def test_bad_choice_and_shape_name_the_argument(rng):
    X = rng.normal(size=(20, 2)).astype(np.float32)
    with pytest.raises(ValueError, match="scale='zscore' is not allowed"):
        fit_scaler(X, "zscore")
    with pytest.raises(ValueError, match="X must have 2 features.*got shape \\(20, 3\\)"):
        fit_scaler(X, "standard").transform(np.ones((20, 3), np.float32))
    with pytest.raises(ValueError, match="scale='zscore' is not allowed"):
        SpectralClustering(2, scale="zscore", backend="cpu").fit(X)
    with pytest.raises(ValueError, match="applies to points, not to affinity='precomputed'"):
        SpectralClustering(2, affinity="precomputed", scale="standard",
                           backend="cpu").fit(np.ones((20, 20)))


def test_estimator_scales_before_the_graph_and_records_it(rng):
    # Two blobs apart along the narrow feature, drowned by a wide noise feature.
    n = 400
    y = np.repeat([0, 1], n // 2)
    X = np.column_stack([y * 1.0 + rng.normal(scale=0.1, size=n),
                         rng.normal(scale=1000.0, size=n)])
    with pytest.warns(FeatureScaleWarning, match="scale=None was given"):
        raw = SpectralClustering(2, scale=None, random_state=0, backend="cpu").fit(X)
    assert raw.scaler_ is None
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        auto = SpectralClustering(2, random_state=0, backend="cpu").fit(X)  # scale="auto"
    assert auto.scaler_.method == "standard"
    assert dict(auto.plan_.lines())["scaling"].startswith("standard scaling of 2 features: "
                                                          "scale='auto': the features' ranges")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FeatureScaleWarning)
        sc = SpectralClustering(2, scale="standard", random_state=0, backend="cpu").fit(X)
    assert sc.scaler_.method == "standard"
    from explorer.metrics import adjusted_rand_score

    assert adjusted_rand_score(y, sc.labels_) > 0.95
    assert adjusted_rand_score(y, raw.labels_) < 0.5
    # The graph is the one of the scaled points, with the threshold chosen on them.
    Xs = sc.scaler_.transform(X.astype(np.float32))
    again = SpectralClustering(2, scale=None, random_state=0, backend="cpu").fit(Xs)
    assert again.edge_rule_ == sc.edge_rule_
    assert np.array_equal(again.labels_, sc.labels_)


def test_cli_scale_flag(tmp_path, capsys, rng):
    n = 300
    y = np.repeat([0, 1], n // 2)
    X = np.column_stack([y * 1.0 + rng.normal(scale=0.1, size=n),
                         rng.normal(scale=1000.0, size=n), y])
    path = tmp_path / "wide.csv"
    np.savetxt(path, X, delimiter=",", header="a,b,label", comments="")
    out = tmp_path / "out.json"
    code = main(["run", "--file", str(path), "--label-column", "label", "--scale", "standard",
                 "--backend", "cpu", "--json", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["parameters"]["scale"] == "standard"  # the estimator scales
    assert result["scores"]["ari"] > 0.95
    # --graph left out: the estimator's affinity="auto" rule, with its reason (its plan)
    assert result["graph_kind"]["why"] == result["plan"]["graph kind"].split(": ", 1)[1]
    assert result["graph_kind"]["name"] in ("epsilon", "knn")
    assert not any("differ in range" in w for w in result["warnings"])
    code = main(["stats", "--file", str(path), "--label-column", "label", "--backend", "cpu"])
    assert code == 0
    out = capsys.readouterr()  # scale="auto" left out: mixed units, standardised
    assert "differ in range" not in out.err and "scaling       standard scaling" in out.out
    code = main(["stats", "--file", str(path), "--label-column", "label", "--backend", "cpu",
                 "--scale", "none"])
    assert code == 0
    assert "differ in range" in capsys.readouterr().err
    # the library checks the value (the parameter table), the command line says it
    assert main(["stats", "--file", str(path), "--scale", "z"]) == 2
    assert "scale='z' is not allowed; use one of 'auto', 'standard', 'minmax'" in (
        capsys.readouterr().err)
