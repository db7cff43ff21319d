"""Argument validation shared by every public entry (library, CLI, app).

Each check raises ``ValueError`` or ``TypeError`` with a message that names the
argument, the value it got and what is allowed. Private helpers assume valid input.
"""

from __future__ import annotations

import numbers

import numpy as np

from ._backend import array_module


def check_data(X, *, name: str = "X", min_samples: int = 2):
    """Validate a data matrix and return it as a C-contiguous float32 n×d array.

    NumPy and CuPy arrays are accepted and stay on their device; lists and other
    array-likes become NumPy arrays. float64 input is converted to float32, the
    precision every builder computes in.

    Raises
    ------
    TypeError
        If `X` is not numeric.
    ValueError
        If `X` is not 2-D, has fewer than `min_samples` rows, no columns, or
        non-finite values.
    """
    xp = array_module(X)
    if xp is np:
        try:
            X = np.asarray(X)
        except (ValueError, TypeError) as exc:  # ragged nested lists
            raise ValueError(f"{name} must be a rectangular n×d array; got {exc}") from None
    if X.dtype == object or not (
        np.issubdtype(X.dtype, np.number) or np.issubdtype(X.dtype, np.bool_)
    ):
        raise TypeError(f"{name} must be numeric; got dtype {X.dtype}")
    if np.issubdtype(X.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real-valued; got dtype {X.dtype}")
    if X.ndim != 2:
        raise ValueError(
            f"{name} must be a 2-D array of shape (n_samples, n_features); got {X.ndim}-D "
            f"shape {tuple(X.shape)}"
        )
    n, d = X.shape
    if d < 1:
        raise ValueError(f"{name} has d=0 features (shape {tuple(X.shape)}); need d >= 1")
    if n < min_samples:
        raise ValueError(
            f"{name} has n={n} samples (shape {tuple(X.shape)}); need n >= {min_samples}"
        )
    with np.errstate(over="ignore"):  # overflow is reported below, as an error
        X32 = xp.ascontiguousarray(X, dtype=xp.float32)
    finite = xp.isfinite(X32)
    if not bool(finite.all()):
        bad = int((~finite).sum())
        if bool(xp.isfinite(X).all()):  # finite, but not in float32
            raise ValueError(
                f"{name} has {bad} value(s) beyond float32's range (|x| > 3.4e38), the "
                "precision every builder computes in; rescale the data"
            )
        raise ValueError(
            f"{name} contains {bad} non-finite value(s) (NaN or inf); all values must be finite"
        )
    return X32


def check_int(value, name: str, *, low=None, high=None, allow_none: bool = False):
    """Validate an integer parameter in ``[low, high]`` and return it as ``int``."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an integer; got {value!r} ({type(value).__name__})")
    value = int(value)
    if (low is not None and value < low) or (high is not None and value > high):
        raise ValueError(
            f"{name}={value} is out of range; allowed: {_range_text(low, high, True, True)}"
        )
    return value


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
    value = float(value)
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
