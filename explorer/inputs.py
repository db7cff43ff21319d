"""The one input stage: every entry's data become float32 points the same way.

:func:`prepare_input` takes what users pass — NumPy and CuPy arrays, pandas
DataFrames, lists, Dask arrays — of any real dtype, validates it with scikit-learn's
conventions and messages (:func:`explorer._validation.real_matrix`), and converts it
to the C-contiguous float32 matrix every builder and k-means computes in. Two things
are done in float64 first, where the float32 cast would otherwise lose the data:

- **offset**: a column whose values sit far from 0 and vary by far less (timestamps
  in ms, 1.7·10¹²; coordinates 5·10⁶ + small) is centred on its midpoint
  (:data:`explorer._validation.OFFSET_RATIO`), only when ``center=True``: distances
  and k-means are translation invariant, a cosine is not;
- **unit**: data whose magnitude leaves float32's comfortable range (squared
  distances overflow beyond about 10¹⁹, underflow below about 10⁻¹⁹) are multiplied
  by a power of two, exactly, so that the largest centred value is near 1. Lengths
  in the result scale back by the same factor (:attr:`InputData.unit`): the
  estimator converts a given σ or threshold into these units and reports its edge
  rule in the user's.

The estimators, :meth:`explorer.EdgeRule.suggest`, :func:`explorer.build_graph`,
:func:`explorer.graph_stats`, the Dask engine, the command line and the app all come
through here, and :class:`InputData` records what was done.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ._backend import array_module, column_centred_sums, column_extremes
from ._validation import check_data, column_offsets, real_matrix

__all__ = ["UNIT_HIGH", "UNIT_LOW", "InputData", "Prepared", "prepare_input", "source_kind"]

#: The largest centred magnitude kept as it is: squared distances of float32 values
#: must stay below float32's maximum (3.4·10³⁸) with room for sums over features.
UNIT_HIGH = 2.0**50
#: ... and the smallest: squared differences must stay above float32's smallest
#: normal number (1.2·10⁻³⁸).
UNIT_LOW = 2.0**-50


@dataclass(frozen=True)
class InputData:
    """Validated points, as every stage computes on them, and what was done to them.

    Attributes
    ----------
    X : float32 array of shape (n, d)
        NumPy or CuPy (the input's device), C-contiguous; a Dask array of float32
        blocks for Dask input. ``X = float32((input − shift) · unit)``.
    shift : float64 ndarray of shape (d,) or None
        The per-column offset taken off in float64 before the cast (0 for columns
        without one); None when none was.
    unit : float
        The power of two the centred values were multiplied by (1.0: none).
    source : str
        What was given: ``"numpy"``, ``"cupy"``, ``"pandas"``, ``"dask"`` or
        ``"other"`` (lists and other array-likes).
    float64 : bool
        The input held 64-bit values (float64, or 64-bit integers): results in its
        units (k-means centres) are given back in float64.
    notes : tuple of str
        One sentence per conversion that changed values (the offset, the unit).
    """

    X: object
    shift: np.ndarray | None
    unit: float
    source: str
    float64: bool = False
    notes: tuple = ()

    @property
    def n(self) -> int:
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        return int(self.X.shape[1])

    @property
    def is_dask(self) -> bool:
        return self.source == "dask"

    def to_user_length(self, value):
        """A length (σ, a distance) of these points in the input's units."""
        return value / self.unit

    def to_user_points(self, P):
        """Points `P` (k × d, NumPy or CuPy) of this space in the input's space, float64:
        ``P / unit + shift``."""
        xp = array_module(P)
        out = xp.asarray(P, dtype=xp.float64)
        if self.unit != 1.0:
            out = out / self.unit
        if self.shift is not None:
            out = out + xp.asarray(self.shift)
        return out

    def to_working_points(self, P):
        """Points `P` of the input's space (a given init, new points) in this space,
        float64: ``(P − shift) · unit``."""
        xp = array_module(P)
        out = xp.asarray(P, dtype=xp.float64)
        if self.shift is not None:
            out = out - xp.asarray(self.shift)
        return out * self.unit if self.unit != 1.0 else out

    def describe(self) -> str:
        """One line: the points and what was done to them."""
        text = f"{self.n:,} × {self.d} float32 points from {self.source} input"
        return text + ("; " + "; ".join(self.notes) if self.notes else "")


@dataclass(frozen=True)
class Prepared:
    """Points that have been through this stage already (:attr:`InputData.X`, or rows,
    scaled rows or representatives of them): the entries a fit calls again
    (:meth:`explorer.EdgeRule.suggest`, :func:`explorer.build_graph`,
    :func:`explorer.graph_stats`) take them as they are instead of validating them a
    second time, which would find nothing to do (no offset, no unit) and cost a read
    of the points and host round trips each time.

    Attributes
    ----------
    X : float32 array of shape (n, d)
        NumPy or CuPy, C-contiguous, finite, in working units.
    """

    X: object


def source_kind(X) -> str:
    """``"numpy"``, ``"cupy"``, ``"pandas"``, ``"dask"`` or ``"other"``: what kind of
    data `X` is, read from its type without importing its library."""
    root = type(X).__module__.split(".")[0]
    if root in ("numpy", "cupy", "cupyx", "pandas", "dask"):
        return "cupy" if root == "cupyx" else root
    return "other"


def prepare_input(X, *, name: str = "X", center: bool | str = True, min_samples: int = 2,
                  like: InputData | None = None) -> InputData:
    """Validate and convert `X` (see the module docstring).

    Parameters
    ----------
    X : array-like of shape (n, d) or Prepared
        NumPy, CuPy, pandas, a list of rows, or a Dask array chunked by rows; or
        :class:`Prepared` points, returned as they are.
    name : str
        The argument's name in messages.
    center : bool or "mean"
        True: take dominating per-column offsets off in float64 (graphs of distance
        rules); ``"mean"``: take the column means of 64-bit data off in float64
        (k-means, whose float32 sums keep the most digits about the mean); False: the
        values as they are (cosine similarities are not translation invariant).
    min_samples : int
        Fewest rows allowed.
    like : InputData, optional
        Apply the offset and unit of this earlier input (a fit's) instead of finding
        them: new points for ``predict`` land in the fitted space.

    Returns
    -------
    InputData

    Raises
    ------
    TypeError, ValueError
        Sparse, non-numeric, complex, not 2-D, too few rows or columns, NaN or inf;
        the message names `name`, the value and what is allowed.
    """
    if isinstance(X, Prepared):
        return InputData(X=X.X, shift=None, unit=1.0, source=source_kind(X.X))
    source = source_kind(X)
    if source == "dask":
        return _prepare_dask(X, name=name, center=center, min_samples=min_samples)
    A = real_matrix(X, name=name, min_samples=min_samples)
    xp = array_module(A)
    wide = A.dtype.itemsize > 4 or A.dtype.kind in "iu"
    finite = None  # known from the extremes, when they were read
    if like is not None:  # the caller has checked the number of features
        shift, unit = like.shift, like.unit
    else:
        if center == "mean":
            shift = _host(column_centred_sums(A, squares=False)[0] / A.shape[0]) if wide else None
        else:
            shift = column_offsets(A) if center else None
        unit, finite = _unit(A, shift)
    if (finite and shift is None and unit == 1.0 and A.dtype == np.float32
            and A.flags.c_contiguous):
        # Already the float32 points, and finite (NaN and ±inf show in the extremes):
        # check_data would read them again to find that out.
        return InputData(X=A, shift=None, unit=1.0, source=source)
    notes = []
    if shift is not None and center != "mean":
        notes.append(_offset_note(shift))
    if unit != 1.0:
        notes.append(_unit_note(unit))
    if shift is not None or unit != 1.0:
        with np.errstate(invalid="ignore", over="ignore"):
            A = A.astype(xp.float64, copy=True)
            if shift is not None:
                A -= xp.asarray(shift, dtype=xp.float64)
            if unit != 1.0:
                A *= unit
    X32 = check_data(A, name=name, min_samples=min_samples, center=False)
    return InputData(X=X32, shift=None if shift is None else np.asarray(_host(shift)),
                     unit=unit, source=source, float64=bool(wide), notes=tuple(notes))


def _host(a):
    return a.get() if hasattr(a, "get") else a


def _unit(A, shift) -> tuple[float, bool | None]:
    """The power of two that brings the largest centred magnitude of `A` near 1, when
    it lies outside [:data:`UNIT_LOW`, :data:`UNIT_HIGH`] (else 1), and whether `A` is
    finite (None where its extremes were not read: empty or narrow integer data)."""
    if A.size == 0 or A.dtype.kind in "biu" and A.dtype.itemsize < 8:
        return 1.0, None
    with np.errstate(invalid="ignore", over="ignore"):
        lo, hi = np.asarray(_host(array_module(A).stack(column_extremes(A))))  # one copy
        finite = bool(np.isfinite(lo).all() and np.isfinite(hi).all())
        if shift is not None:
            lo, hi = lo - np.asarray(_host(shift)), hi - np.asarray(_host(shift))
        top = float(np.maximum(np.abs(lo), np.abs(hi)).max())
    if not math.isfinite(top) or top == 0.0 or UNIT_LOW <= top <= UNIT_HIGH:
        return 1.0, finite
    return 2.0 ** (-math.frexp(top)[1]), finite


def _offset_note(shift) -> str:
    cols = np.flatnonzero(np.asarray(_host(shift)))
    shown = ", ".join(f"{float(_host(shift)[j]):.6g}" for j in cols[:4])
    more = "" if cols.size <= 4 else f" and {cols.size - 4} more"
    return (f"column offset(s) {shown}{more} taken off in float64 before the float32 "
            "cast (float32 could not carry the variation on top of them)")


def _unit_note(unit: float) -> str:
    return (f"values multiplied by 2^{int(round(math.log2(unit)))} in float64 (their "
            "magnitude is outside float32's range for squared distances); lengths are "
            "reported in the input's units")


def _prepare_dask(X, *, name, center, min_samples) -> InputData:
    """The input stage on a Dask array: the same checks and conversions, per block on
    the workers (the offset and magnitude from one float64 reduction)."""
    import dask.array as da

    if X.ndim != 2:
        raise ValueError(f"Expected 2D array, got {X.ndim}D array instead: {name} must be a "
                         f"2-D Dask array of shape (n_samples, n_features); got shape "
                         f"{X.shape}")
    if not (np.issubdtype(X.dtype, np.number) or X.dtype == np.bool_) or np.issubdtype(
            X.dtype, np.complexfloating):
        raise TypeError(f"{name} must hold real numbers; got dtype {X.dtype}")
    if len(X.chunks[1]) != 1:
        raise ValueError(f"{name} must be chunked by rows only (one chunk across the "
                         f"{X.shape[1]} columns); got column chunks {X.chunks[1]}; use "
                         f"{name}.rechunk({{1: -1}})")
    n, d = (int(s) for s in X.shape)
    if n < min_samples or d < 1:
        raise ValueError(f"{name} has shape ({n}, {d}); need n >= {min_samples} samples and "
                         "d >= 1 features")
    lo, hi = da.compute(X.min(axis=0).astype(np.float64), X.max(axis=0).astype(np.float64))
    lo, hi = np.asarray(_host(lo)), np.asarray(_host(hi))
    if not (np.isfinite(lo).all() and np.isfinite(hi).all()):
        raise ValueError(f"Input {name} contains non-finite value(s) (NaN or inf); all "
                         "values must be finite")
    wide = X.dtype.itemsize > 4 or X.dtype.kind in "iu"
    shift = None
    if center and wide:
        shift = column_offsets(np.stack([lo, hi]))
    bounds = np.stack([lo, hi]) - (0.0 if shift is None else shift)
    top = float(np.abs(bounds).max())
    unit = 1.0
    if X.dtype.kind == "f" and top > 0 and not UNIT_LOW <= top <= UNIT_HIGH:
        unit = 2.0 ** (-math.frexp(top)[1])
    notes = ([_offset_note(shift)] if shift is not None else []) + (
        [_unit_note(unit)] if unit != 1.0 else [])

    meta = X._meta if hasattr(X, "_meta") else None
    out = X.map_blocks(_convert_block, shift, unit, dtype=np.float32,
                       meta=None if meta is None else meta.astype(np.float32))
    return InputData(X=out, shift=shift, unit=unit, source="dask", float64=bool(wide),
                     notes=tuple(notes))


def _convert_block(block, shift, unit):
    """One block of a Dask array through the input stage's conversion (module level:
    worker processes import it by name)."""
    xp = array_module(block)
    if shift is None and unit == 1.0:
        return xp.ascontiguousarray(block, dtype=xp.float32)
    B = block.astype(xp.float64)
    if shift is not None:
        B = B - xp.asarray(shift)
    return xp.ascontiguousarray(B * unit, dtype=xp.float32)
