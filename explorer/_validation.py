"""Argument validation shared by every public entry (library, CLI, app).

Each check raises ``ValueError`` or ``TypeError`` with a message that names the
argument, the value it got and what is allowed. Private helpers assume valid input.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.sparse
from sklearn.utils.validation import validate_data

from ._backend import array_module, column_extremes, sparse_module
from ._csr import csr_from_arrays, entry_rows, matmul, rmatmul


def is_sparse(X) -> bool:
    """Whether `X` is a SciPy or cupyx sparse matrix or array (without importing CuPy)."""
    module = type(X).__module__
    if module.startswith("cupyx.scipy.sparse"):
        return True
    return module.startswith("scipy.sparse") and scipy.sparse.issparse(X)


def check_data(X, *, name: str = "X", min_samples: int = 2, center: bool | None = None):
    """Validate a data matrix and return it as a C-contiguous float32 n×d array.

    NumPy and CuPy arrays are accepted and stay on their device; lists, pandas
    DataFrames and other array-likes become NumPy arrays, and NumPy object arrays of
    numbers are converted (as scikit-learn does). float64 input is converted to
    float32, the precision every builder computes in.

    Messages follow scikit-learn's where its users look for them ("Complex data not
    supported", "Expected 2D array", "Reshape your data", "0 feature(s) (shape=(n, 0))
    while a minimum of 1 is required", "Input X contains", "Sparse data ... sparse
    input is not supported") and name the argument, its value and what is allowed.

    Large offsets. A float64 (or 64-bit integer) column whose values sit far from 0 and
    vary by far less (coordinates 5e6 + small, timestamps 1.7e9 + 60 i) loses most of its
    variation in the float32 cast. With ``center=True`` (the graph entries, for distance
    rules, which are translation invariant) such columns are centred in float64 before
    the cast; with ``center=None`` (the default) a ``UserWarning`` says that precision
    is lost; ``center=False`` (a caller that centres itself, as KMeans) says nothing.

    Raises
    ------
    TypeError
        If `X` is sparse (a graph is given to ``SpectralClustering`` with
        ``affinity="precomputed"``) or not numeric.
    ValueError
        If `X` is complex ("Complex data not supported", scikit-learn's type and
        words; explorer raised ``TypeError`` before), not 2-D, has fewer than
        `min_samples` rows, no columns, or non-finite values.
    """
    X = real_matrix(X, name=name, min_samples=min_samples)
    xp = array_module(X)
    wide = X.dtype.itemsize > 4 or X.dtype.kind in "iu"  # float32 may not hold it exactly
    found = _offset(X, xp) if wide and center is not False else None
    if found is not None and center:
        # Centring is for precision, not range: values float32 cannot hold are refused
        # as they would be without it.
        n_big = int(xp.count_nonzero(xp.abs(X) > np.finfo(np.float32).max))
        if n_big:
            raise ValueError(_BEYOND_F32.format(name=name, bad=n_big))
        with np.errstate(invalid="ignore", over="ignore"):
            X = X.astype(xp.float64, copy=False) - found[0]
    elif found is not None and found[1] >= 0 and center is None:
        j = found[1]
        warnings.warn(
            f"{name} has an offset that float32 cannot carry: column {j} lies around "
            f"{float(found[0][j]):.6g} and varies by far less, so the float32 copy every "
            "builder computes in keeps few digits of its variation; the graph entries "
            "(build_graph, graph_stats, SpectralClustering) centre such data in float64 "
            "before the cast, explorer.data.read(..., center=True) does it for a file, other "
            "uses should centre it first (X - X.mean(axis=0))",
            UserWarning, stacklevel=3,
        )
    with np.errstate(over="ignore"):  # overflow is reported below, as an error
        X32 = xp.ascontiguousarray(X, dtype=xp.float32)
    _check_finite(X32, name, original=X)
    return X32


def real_matrix(X, *, name: str = "X", min_samples: int = 2):
    """`X` as a NumPy or CuPy 2-D array of a real dtype with at least `min_samples` rows
    and one column, not yet cast (float64 stays float64): the checks of
    :func:`check_data` before its cast, for a caller that works on the values first
    (:func:`explorer.inputs.prepare_input`). A pandas DataFrame's columns are read as
    float64 with missing values as NaN (reported later as non-finite), and a column
    that holds text is named."""
    X = _as_array(_from_frame(X, name), name)
    _check_2d(X, name)
    _check_size(X, name, min_samples=min_samples, min_features=1)
    return X


def _from_frame(X, name: str):
    """A pandas DataFrame as a float64 NumPy array (NA as NaN); anything else unchanged
    (a Series is 1-D data, refused as such later)."""
    if not type(X).__module__.startswith("pandas"):
        return X
    import pandas as pd

    if not isinstance(X, pd.DataFrame):
        return X
    frame = X
    for col, dtype in frame.dtypes.items():
        if not (pd.api.types.is_numeric_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)):
            raise TypeError(
                f"{name} must be numeric; column {col!r} holds {dtype} values (e.g. "
                f"{frame[col].iloc[0]!r}); drop it or encode it first, e.g. "
                f"{name}.drop(columns=[{col!r}])")
        if pd.api.types.is_complex_dtype(dtype):
            raise ValueError(f"Complex data not supported: {name} column {col!r} holds "
                             f"{dtype} values; {name} must be real-valued")
    return frame.to_numpy(dtype=np.float64, na_value=np.nan)


#: A column is re-centred before the float32 cast (``check_data(center=True)``) when
#: its midpoint is more than this many times its half-range: the float32 copy would
#: keep at least 3 bits fewer of its variation than the centred one.
OFFSET_RATIO = 8.0


def column_offsets(X):
    """The per-column shifts ``check_data(X, center=True)`` takes off before the float32
    cast (float64, 0 for columns without a dominating offset), or None when it takes
    none. `X` is the data as given (NumPy or CuPy, any numeric dtype)."""
    X = _as_array(X, "X")
    if not (X.dtype.itemsize > 4 or X.dtype.kind in "iu") or X.ndim != 2:
        return None
    found = _offset(X, array_module(X))
    return None if found is None else found[0]


def _offset(X, xp):
    """``(midpoints, j)``: per-column midpoints (float64, 0 where the offset does not
    dominate, :data:`OFFSET_RATIO`) and the column whose variation the float32 cast
    would damage most, when it loses 10 bits or more (else -1); None for data without
    a dominating offset or with non-finite values (reported later)."""
    if X.size == 0:
        return None
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = column_extremes(X)
        mid = lo / 2 + hi / 2
        half = hi / 2 - lo / 2
    if not (bool(xp.isfinite(mid).all()) and bool(xp.isfinite(half).all())):
        return None
    # (Midpoints below float32's normal range are no offset: such values are lost in
    # the cast whatever is done.)
    dominated = ((xp.abs(mid) > OFFSET_RATIO * half)
                 & (xp.abs(mid) > np.finfo(np.float32).tiny))
    if not bool(dominated.any()):
        return None
    ratio = xp.where(half > 0, xp.abs(mid) / xp.where(half > 0, half, 1.0), 0.0)
    j = int(xp.argmax(ratio))
    return xp.where(dominated, mid, 0.0), (j if float(ratio[j]) >= 2.0**10 else -1)


def check_affinity(X, *, name: str = "X", min_samples: int = 2):
    """Validate a precomputed affinity (similarity) matrix and return it as CSR.

    Parameters
    ----------
    X : array-like, SciPy or cupyx sparse matrix of shape (n, n)
        Square, symmetric (to a relative 1e-5), non-negative and finite weights.
        Dense input becomes CSR (its zeros are no edges); any sparse format is
        converted to CSR. CuPy input stays on its device.

    Returns
    -------
    scipy.sparse.csr_matrix or cupyx.scipy.sparse.csr_matrix
        float32 values, no stored diagonal (a vertex's similarity to itself is
        ignored, as scikit-learn's Laplacian ignores it) and no stored zero, column
        indices sorted; the input's index dtype is kept (int64 indices stay int64).

    Raises
    ------
    TypeError, ValueError
        As :func:`check_data` for the values (dtype, 2-D, sizes, NaN/inf); and
        ``ValueError`` for a matrix that is not square, has negative weights or is
        not symmetric.
    """
    what = "affinity='precomputed'"
    if is_sparse(X):
        A = X.tocsr()
        _check_dtype(A.dtype, name)
        _check_size(A, name, min_samples=min_samples, min_features=1)
        values = A.data
    else:
        values = _as_array(X, name)
        _check_2d(values, name)
        _check_size(values, name, min_samples=min_samples, min_features=1)
        A = None
    xp = array_module(values)
    if values.size:
        # min and max propagate NaN and reach +-inf: two reductions, no mask.
        low, high = float(values.min()), float(values.max())
        if not (np.isfinite(low) and np.isfinite(high)):
            _check_finite(values, name, original=values)
    shape = tuple(int(s) for s in (values if A is None else A).shape)
    if shape[0] != shape[1]:
        raise ValueError(
            f"{what} needs {name} to be a square (n_samples, n_samples) affinity matrix; "
            f"got shape {shape} (to cluster points, use the default affinity='epsilon')"
        )
    if values.size and low < 0:
        n_negative = int(xp.count_nonzero(values < 0))
        raise ValueError(
            f"Negative values in data passed as {name} with {what}: {n_negative} negative "
            f"value(s) (min {low:g}); allowed: affinities >= 0 (a distance matrix d is not "
            "an affinity: convert it, e.g. exp(-d**2 / (2 * sigma**2)))"
        )
    A = A if A is not None else values
    if values.size and high > 0 and not 2.0**-100 <= high <= 2.0**100:
        # Weights float32 cannot hold (underflow to 0 or overflow to inf in the cast):
        # scaled by an exact power of two in float64 first. The normalised Laplacian
        # D^-1/2 S D^-1/2 does not change with the scale of S.
        factor = 2.0 ** (-math.frexp(high)[1])
        A = A.astype(xp.float64) * factor if is_sparse(A) else (
            xp.asarray(A, dtype=xp.float64) * factor)
    A = _to_csr32(A, xp)
    A = _drop_diagonal_and_zeros(A, xp)
    _check_symmetric(A, name, what, xp)
    return A


def check_features(estimator, X, *, reset: bool) -> None:
    """Record (``reset=True``, in ``fit``) or check (in ``predict``) `n_features_in_` and
    `feature_names_in_` of `estimator` from `X`, the input as given (a DataFrame keeps
    its column names), after :func:`check_data` accepted it.

    scikit-learn's ``validate_data`` with ``skip_check_array=True``: its messages
    ("X has 1 features, but KMeans is expecting 4 features as input", "The feature
    names should match those that were passed during fit") are the ones
    scikit-learn's users know, and it never copies `X` (CuPy stays on its device).
    """
    validate_data(estimator, X, skip_check_array=True, reset=reset)


def _check_dtype(dtype, name: str) -> None:
    if np.issubdtype(dtype, np.complexfloating):
        raise ValueError(
            f"Complex data not supported: {name} must be real-valued; got dtype {dtype}"
        )
    numeric = np.issubdtype(dtype, np.number) or np.issubdtype(dtype, np.bool_)
    if dtype.kind == "O" or not numeric:
        raise TypeError(f"{name} must be numeric; got dtype {dtype}")


def reject_matrix(X, name: str = "X") -> None:
    """Refuse ``numpy.matrix`` (whose rows stay 2-D when indexed), with scikit-learn's
    words."""
    if isinstance(X, np.matrix):
        raise TypeError(f"np.matrix is not supported. Please convert to a numpy array with "
                        f"np.asarray({name}); {name} must be an ndarray, not a np.matrix")


def _as_array(X, name: str):
    """X as a NumPy or CuPy array of a real numeric dtype (not yet shape-checked)."""
    reject_matrix(X, name)
    if is_sparse(X):
        raise TypeError(
            f"Sparse data was passed for {name} ({type(X).__module__}.{type(X).__name__}), "
            "but dense data is required: sparse input is not supported for data points; "
            f"use {name}.toarray(), or give SpectralClustering a sparse affinity matrix "
            "with affinity='precomputed'"
        )
    if array_module(X) is np:
        try:
            X = np.asarray(X)
        except (ValueError, TypeError) as exc:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular n×d array; got {exc}") from None
        if X.dtype == object and X.ndim == 0:  # None, a dict, ...: not an array
            raise TypeError(
                f"{name} must be numeric; got dtype object (a {type(X.item()).__name__}, "
                "not an array)"
            )
        if X.dtype == object:
            # Numbers held as Python objects (scikit-learn converts them too).
            try:
                X = X.astype(np.float64)
            except (ValueError, TypeError) as exc:
                raise TypeError(
                    f"{name} must be numeric; got dtype object holding a value that is not a "
                    f"number ({exc})"
                ) from None
    _check_dtype(X.dtype, name)
    return X


def _check_2d(X, name: str) -> None:
    if X.ndim == 2:
        return
    kind = "scalar" if X.ndim == 0 else f"{X.ndim}D"
    message = (
        f"Expected 2D array, got {kind} array instead: {name} must be a 2-D array of shape "
        f"(n_samples, n_features); got {X.ndim}-D shape {tuple(X.shape)}"
    )
    if X.ndim == 1:
        message += (
            f". Reshape your data either using {name}.reshape(-1, 1) if your data has a "
            f"single feature or {name}.reshape(1, -1) if it contains a single sample"
        )
    raise ValueError(message)


def _check_size(X, name: str, *, min_samples: int, min_features: int) -> None:
    n, d = (int(s) for s in X.shape)
    shape = f"(shape=({n}, {d}))"
    if n < min_samples:
        raise ValueError(
            f"{name} has n={n} samples (found array with {n} sample(s) {shape} while a "
            f"minimum of {min_samples} is required); need n >= {min_samples}"
        )
    if d < min_features:
        raise ValueError(
            f"{name} has d={d} features (found array with {d} feature(s) {shape} while a "
            f"minimum of {min_features} is required); need d >= {min_features}"
        )


_BEYOND_F32 = ("{name} has {bad} value(s) beyond float32's range (|x| > 3.4e38), the "
               "precision every builder computes in; rescale the data")


def _check_finite(X32, name: str, *, original) -> None:
    xp = array_module(X32)
    if X32.size == 0 or all(bool(xp.isfinite(v).all()) for v in column_extremes(X32)):
        return  # (NaN propagates into a column's extremes; ±inf is one of them)
    bad = int((~xp.isfinite(X32)).sum())
    if bool(xp.isfinite(original).all()):  # finite, but not in float32
        raise ValueError(_BEYOND_F32.format(name=name, bad=bad))
    raise ValueError(
        f"Input {name} contains {bad} non-finite value(s) (NaN or inf); all values must "
        "be finite"
    )


def _to_csr32(A, xp):
    """Canonical CSR (sorted, duplicate-free rows) with float32 values, keeping the index
    dtype of a sparse `A`; a dense `A` becomes CSR of its nonzeros."""
    sp = sparse_module(xp)
    if not is_sparse(A):
        return sp.csr_matrix(xp.ascontiguousarray(A, dtype=xp.float32))
    A = A.tocsr()
    idx = A.indices.dtype
    if not A.has_canonical_format:
        A = A.copy()
        A.sum_duplicates()
    return csr_from_arrays(
        A.data.astype(xp.float32, copy=False), A.indices.astype(idx, copy=False),
        A.indptr.astype(idx, copy=False), A.shape, canonical=True,
    )


def _drop_diagonal_and_zeros(A, xp):
    """`A` without stored diagonal entries and stored zeros (`A` itself when it has none)."""
    n, nnz = A.shape[0], int(A.nnz)
    if nnz == 0:
        return A
    idx = A.indptr.dtype
    rows = entry_rows(A.indptr, xp, span=(0, nnz), dtype=idx)
    keep = (rows != A.indices) & (A.data != 0)
    if bool(keep.all()):
        return A
    counts = xp.bincount(rows[keep], minlength=n)
    indptr = xp.zeros(n + 1, dtype=idx)
    indptr[1:] = xp.cumsum(counts)
    return csr_from_arrays(A.data[keep], A.indices[keep], indptr, A.shape, canonical=True)


def _check_symmetric(A, name: str, what: str, xp) -> None:
    """Randomised symmetry check: A r == A^T r for a random r, to a relative 1e-5.

    O(nnz) and no transpose is formed (as the embedding's own check); an asymmetric
    A passes only if r happens to be orthogonal to the rows of A - A^T.
    """
    if int(A.nnz) == 0:
        return
    # r in A's dtype: cuSPARSE multiplies operands of one dtype.
    r = xp.random.RandomState(12345).standard_normal(A.shape[0]).astype(A.dtype)
    left, right = matmul(A, r), rmatmul(A, r)
    scale = float(xp.linalg.norm(left)) or 1.0
    err = float(xp.linalg.norm(left - right))
    if err > 1e-5 * scale:
        raise ValueError(
            f"{what} needs a symmetric affinity matrix; {name} is not symmetric "
            f"(||X r - X^T r|| / ||X r|| = {err / scale:.2e} for a random r, allowed up to "
            "1e-5); symmetrise it, e.g. (X + X.T) / 2"
        )


def check_int(value, name: str, *, low=None, high=None, allow_none: bool = False):
    """Validate an integer parameter in ``[low, high]`` and return it as ``int``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {value!r} ({type(value).__name__})")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(
            f"{name}={_short(value)} is out of range; allowed: "
            f"{_range_text(low, high, True, True)}"
        )
    return value


def check_limit(value, name: str, limit, why: str):
    """Refuse a valid number above a practical `limit` (``value`` is already checked).

    The declared bounds say what is meaningful (``n_init >= 1``); the limit says what
    can finish (``n_init=10**9`` restarts would run for days). Kept apart from the
    bounds so that their messages stay as they are.
    """
    if value is not None and value > limit:
        raise ValueError(
            f"{name}={_short(value)} is above the practical limit {limit:,}: {why}; "
            f"allowed: values up to {limit:,}"
        )
    return value


#: Largest seed NumPy's RandomState takes.
_MAX_SEED = 2**32 - 1


def check_random_state(seed, name: str = "random_state"):
    """Validate a seed and return a ``numpy.random.RandomState``.

    Accepts what scikit-learn's ``check_random_state`` accepts (None: NumPy's global
    RandomState; an int in ``[0, 2**32 - 1]``; a RandomState, returned as is) and a
    NumPy ``Generator``, converted soundly: the RandomState returned draws from the
    Generator's own bit generator, so its draws advance the Generator (and a seeded
    Generator gives repeatable results). Refuses bool (``True`` is not a seed), with
    messages that name the argument.
    """
    if seed is None:
        return np.random.mtrand._rand
    if isinstance(seed, np.random.RandomState):
        return seed
    if isinstance(seed, np.random.Generator):
        return np.random.RandomState(seed.bit_generator)
    if isinstance(seed, (bool, np.bool_)) or not isinstance(seed, numbers.Integral):
        raise TypeError(
            f"{name} must be None, an int in [0, 2**32 - 1], a numpy.random.RandomState or "
            f"a numpy.random.Generator; got {_short(seed)} ({type(seed).__name__})"
        )
    seed = int(seed)
    if not 0 <= seed <= _MAX_SEED:
        raise ValueError(
            f"{name}={_short(seed)} is out of range; allowed: [0, {_MAX_SEED}] (or None, a "
            "RandomState or a Generator)"
        )
    return np.random.RandomState(seed)


def _short(value) -> str:
    """``repr(value)``, with a huge integer written as a power of ten (``~1e+400``)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        v = int(value)
        if abs(v) >= 10**18:
            digits = len(str(abs(v))) - 1
            return f"{'-' if v < 0 else ''}~1e+{digits}"
        return str(v)
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_float(
    value,
    name: str,
    *,
    low=None,
    high=None,
    low_inclusive: bool = True,
    high_inclusive: bool = True,
    allow_none: bool = False,
):
    """Validate a finite real parameter in a (half-)open interval and return ``float``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number; got {value!r} ({type(value).__name__})")
    try:
        value = float(value)
    except OverflowError:  # an int (or Fraction) beyond float64's range
        raise ValueError(
            f"{name}={_short(value)} is out of range: it is beyond float64's range "
            f"(|x| > 1.8e308); allowed: {_range_text(low, high, low_inclusive, high_inclusive)}"
        ) from None
    ok = np.isfinite(value)
    if ok and low is not None:
        ok = value >= low if low_inclusive else value > low
    if ok and high is not None:
        ok = value <= high if high_inclusive else value < high
    if not ok:
        raise ValueError(
            f"{name}={value!r} is out of range; allowed: "
            f"{_range_text(low, high, low_inclusive, high_inclusive)}"
        )
    return value


def check_choice(value, name: str, choices):
    """Validate that `value` is one of `choices` (strings) and return it."""
    if not isinstance(value, str) or value not in choices:
        raise ValueError(
            f"{name}={value!r} is not allowed; use one of {', '.join(map(repr, choices))}"
        )
    return value


def _range_text(low, high, low_inclusive, high_inclusive) -> str:
    if low is None and high is None:
        return "any finite number"
    left = ("[" if low_inclusive else "(") + ("-inf" if low is None else repr(low))
    right = ("inf" if high is None else repr(high)) + ("]" if high_inclusive else ")")
    return f"{left}, {right}"
