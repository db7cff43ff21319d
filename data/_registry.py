"""The built-in data sets: the catalogue (:data:`DATASETS`) and :func:`load`."""

from __future__ import annotations

import inspect
import time

import numpy as np

from explorer import memory
from explorer._validation import check_int

from . import _digits, _shapes, _syn4d
from ._dataset import Dataset, DatasetInfo

_2D = "2-D, fitted into the unit square"

#: name -> (generator, catalogue entry). Generators take (n, rng, **options) and return
#: (X, y); their keyword defaults are the options the catalogue lists.
_GENERATORS = {
    "moons": (_shapes.moons, "Two interleaving half circles", 5000, None, 2, 2),
    "circles": (_shapes.circles, "A circle inside a circle", 5000, None, 2, 2),
    "blobs": (_shapes.blobs, "Isotropic gaussian blobs", 5000, None, 2, 3),
    "aniso": (_shapes.aniso, "Sheared, elongated gaussian blobs", 5000, None, 2, 3),
    "varied": (_shapes.varied, "Gaussian blobs of different spreads", 5000, None, 2, 3),
    "spirals": (_shapes.spirals, "Interleaved spirals", 5000, None, 2, 2),
    "uniform": (_shapes.uniform, "Uniform noise, no structure, no labels", 5000, None, 2, None),
    "digits": (_digits.digits, "scikit-learn's handwritten digits, 8×8 pixels", 1797, 1797, 64,
               10),
    "infinite-digits": (_digits.infinite_digits,
                        "Endless digits: blends of two same-class digits, affine + elastic "
                        "deformations at 28×28 (wider past 60,000, as InfMNIST)",
                        10000, None, 784, 10),
    "syn4d": (_syn4d.syn4d, "The paper's Syn1M/Syn5M shape: 4 uniform boxes in [0, 1]⁴",
              100000, None, 4, 4),
}
_TWO_D = {"moons", "circles", "blobs", "aniso", "varied", "spirals", "uniform"}


def _options(func) -> dict:
    return {
        name: p.default
        for name, p in inspect.signature(func).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }


#: The catalogue: name -> :class:`DatasetInfo` (description, default_n, max_n, d,
#: n_classes, options). Ordered for a dropdown: 2-D shapes first.
DATASETS = {
    name: DatasetInfo(
        description=desc + (f" ({_2D})" if name in _TWO_D else ""),
        default_n=default_n,
        max_n=max_n,
        d=d,
        n_classes=n_classes,
        options=_options(func),
    )
    for name, (func, desc, default_n, max_n, d, n_classes) in _GENERATORS.items()
}

#: The paper's threshold for its MNIST shapes (Table 2: cosine similarity > 0.8).
_DIGITS_SIM = 0.8


def load(name, n_samples=None, random_state=0, **options) -> Dataset:
    """Generate or load a built-in data set.

    Parameters
    ----------
    name : str
        One of :data:`DATASETS`: ``moons``, ``circles``, ``blobs``, ``aniso``,
        ``varied``, ``spirals``, ``uniform``, ``digits``, ``infinite-digits``,
        ``syn4d``.
    n_samples : int >= 2 or None
        Rows to generate; None gives the catalogue's ``default_n``. ``digits`` has
        at most 1797 (fewer takes a random subset).
    random_state : int >= 0, numpy.random.Generator or None, default 0
        Seed; the same seed gives the same data. None draws fresh entropy; a
        Generator is drawn from.
    **options
        Generator options listed in ``DATASETS[name].options`` (e.g. ``noise`` for
        moons and circles, ``cluster_std`` for blobs, ``rotation`` / ``elastic`` for
        infinite-digits).

    Returns
    -------
    Dataset
        ``X`` float32 (n, d), ``y`` int64 labels (None for ``uniform``), and in
        ``params`` everything that produced it (with the generation time);
        ``suggested`` holds graph parameters that suit it (see
        :func:`explorer.data.suggest_params`; the paper's settings for ``digits``
        (cosine > 0.8) and ``syn4d``).

    Raises
    ------
    ValueError
        Unknown name (the message lists the allowed ones), `n_samples` < 2 or above
        the set's size, an unknown option or an option out of its range.
    TypeError
        `n_samples`, `random_state` or an option of the wrong type.

    Examples
    --------
    >>> from explorer import datasets
    >>> ds = datasets.load("moons", n_samples=1000, noise=0.08)
    >>> ds.X.shape, ds.X.dtype, ds.n_classes
    ((1000, 2), dtype('float32'), 2)
    """
    if not isinstance(name, str) or name not in _GENERATORS:
        raise ValueError(f"name={name!r} is not a built-in data set; use one of "
                         f"{', '.join(map(repr, DATASETS))}")
    info = DATASETS[name]
    n = info.default_n if n_samples is None else check_int(n_samples, "n_samples", low=2,
                                                            high=info.max_n)
    if random_state is not None and not isinstance(random_state, np.random.Generator):
        random_state = check_int(random_state, "random_state", low=0)
    unknown = sorted(set(options) - set(info.options))
    if unknown:
        allowed = ", ".join(info.options) if info.options else "none"
        raise ValueError(f"{name} has no option {', '.join(map(repr, unknown))}; its options: "
                         f"{allowed}")
    memory.check_allocation(
        generation_bytes(name, n), f"generating {name} with n_samples={n} "
        f"({n:,} × {info.d} values)", "lower n_samples",
    )
    func = _GENERATORS[name][0]
    rng = np.random.default_rng(random_state)
    start = time.perf_counter()
    X, y = func(n, rng, **options)
    if name in _TWO_D:
        X = _shapes.fit_unit_square(X)
    seconds = time.perf_counter() - start
    used = {**info.options, **options}
    return Dataset(
        X=X,
        y=None if y is None else np.asarray(y, dtype=np.int64),
        name=name,
        description=info.description,
        params={"n_samples": n, "random_state": random_state, **used,
                "generation_seconds": seconds},
        preset=_preset(name, n),
    )


#: Peak bytes per generated value (n × d) while a generator runs: its float64 arrays,
#: their temporaries and the float32 result. The digits generators deform 28×28 images
#: in float64 (source pairs, displacement fields, interpolation weights).
GENERATION_BYTES_PER_VALUE = {"infinite-digits": 48, "digits": 48}
_DEFAULT_BYTES_PER_VALUE = 32


def generation_bytes(name: str, n: int) -> float:
    """Estimated peak bytes of ``load(name, n_samples=n)``."""
    info = DATASETS[name]
    return float(n) * info.d * GENERATION_BYTES_PER_VALUE.get(name, _DEFAULT_BYTES_PER_VALUE)


def memory_max_n(name: str, available: int | None = None) -> int | None:
    """The largest n whose generation :func:`explorer.memory.check_allocation` accepts
    (None when the available memory is unknown)."""
    available = memory.available_host_bytes() if available is None else int(available)
    if available is None:
        return None
    per_row = generation_bytes(name, 1)
    return max(2, int(memory.CPU_MEMORY_FRACTION * available // per_row))


def _preset(name, n) -> dict | None:
    """The paper's settings where the paper has one; None: computed from the data."""
    if name == "syn4d":
        sigma, t = _syn4d.suggested_threshold(n)
        return {"metric": "gaussian", "sigma": sigma, "threshold_sqdist": t}
    if name == "digits":
        return {"metric": "cosine", "threshold_sim": _DIGITS_SIM}
    return None
