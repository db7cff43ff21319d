"""Handwritten digits: scikit-learn's 8×8 set, and an endless 28×28 generator made from it.

Both ship inside scikit-learn (``load_digits`` reads a file installed with it); nothing
is downloaded.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy import ndimage

from explorer._validation import check_float, check_int

SIZE = 28  # MNIST's frame
_INNER = 20  # MNIST centres each digit in a 20×20 box inside the 28×28 frame
_CONTROL = 4  # control points per axis of the elastic displacement field
_BATCH = 4096  # samples per vectorised step (bounds the temporaries to ~50 MB each)


@functools.lru_cache(maxsize=1)
def _digits():
    from sklearn.datasets import load_digits

    bunch = load_digits()
    return bunch.images.astype(np.float32) / 16.0, bunch.target.astype(np.int64)


def digits(n, rng):
    """scikit-learn's digits: 1797 images of 8×8 pixels, values in [0, 1].

    `n` below 1797 takes a random subset (without replacement), in random order.
    """
    images, target = _digits()
    X = images.reshape(len(images), -1)
    if n < len(X):
        rows = np.sort(rng.choice(len(X), n, replace=False))
        X, target = X[rows], target[rows]
    return np.ascontiguousarray(X), target.copy()


@functools.lru_cache(maxsize=1)
def _templates():
    """The digits upscaled to MNIST's layout, on a one-pixel zero border.

    Cubic-spline zoom of each 8×8 image into the 20×20 centre of a 28×28 frame
    (``scipy.ndimage.zoom`` with ``grid_mode=True``, so pixel areas, not centres,
    are aligned), clipped to [0, 1]; then a zero border of one pixel so bilinear
    reads just outside the frame find background instead of wrapping.
    """
    images, _ = _digits()
    up = ndimage.zoom(images, (1, _INNER / 8, _INNER / 8), order=3, grid_mode=True,
                      mode="grid-constant", cval=0.0)
    out = np.zeros((len(images), SIZE + 2, SIZE + 2), dtype=np.float32)
    pad = 1 + (SIZE - _INNER) // 2
    out[:, pad : pad + _INNER, pad : pad + _INNER] = np.clip(up, 0.0, 1.0)
    return out


@functools.lru_cache(maxsize=1)
def _spline_basis():
    """(SIZE², _CONTROL²) matrix: a smooth displacement field from control values.

    Column j is the cubic-spline zoom of the j-th unit impulse on the control grid,
    so ``basis @ values`` equals zooming the control grid, at the price of one
    small matrix product per batch instead of a filter pass per sample.
    """
    eye = np.eye(_CONTROL * _CONTROL).reshape(-1, _CONTROL, _CONTROL)
    zoomed = ndimage.zoom(eye, (1, SIZE / _CONTROL, SIZE / _CONTROL), order=3,
                          grid_mode=True, mode="nearest")
    return np.ascontiguousarray(zoomed.reshape(len(eye), -1).T, dtype=np.float32)


def infinite_digits(n, rng, *, rotation=10.0, scale=0.1, shear=0.2, translate=2.25,
                    elastic=1.0, gamma=2.5, blend=0.5, originals=60_000, spread=1.5):
    """Endless labelled digits: deformed blends of scikit-learn's digits at 28×28.

    Each sample picks one of the 1797 digits at random (its class is the label) and
    a second digit of the same class, both upscaled to MNIST's layout (the digit in
    the central 20×20 box of a 28×28 frame), blends the two (a pixelwise weighted
    mean) and resamples the blend through its own random deformation: an affine map
    (rotation, scale, shear, translation) plus an elastic displacement field.

    Like the paper's MNIST120K and MNIST240K, which the InfMNIST code makes by
    appending deformed digits to MNIST's 60 000, the samples past the first
    `originals` are drawn with wider affine maps (`spread`), so that they are more
    spread out than the first ones and the graph's density grows more slowly than n.

    Parameters
    ----------
    n : int
    rng : numpy.random.Generator
    rotation : float, default 10
        Largest rotation, degrees (uniform in ±rotation).
    scale : float in [0, 1), default 0.1
        Scale factor uniform in ``1 ± scale``, independently per axis.
    shear : float, default 0.2
        Shear factor uniform in ±shear.
    translate : float, default 2.25
        Shift in pixels, uniform in ±translate per axis.
    elastic : float, default 1.0
        Standard deviation in pixels of the elastic displacement at each control
        point of a 4×4 grid; between them the field is a cubic spline, smooth over
        about 7 pixels (the Simard et al. elastic distortion, built from a coarse
        random field instead of a gaussian-filtered fine one).
    gamma : float > 0, default 2.5
        Stroke contrast: pixel values are raised to this power. The upscaled 8×8
        digits have wide blurred strokes, which makes all images alike under the
        cosine; a power above 1 thins them towards MNIST's.
    blend : float in [0, 0.5], default 0.5
        Largest weight of the second digit: its weight is uniform in
        ``[0.6·blend, blend]``, the first digit's is the rest. 0 gives single digits.
    originals : int >= 1 or None, default 60 000
        Samples up to this index are drawn with the affine ranges above, later ones
        with the ranges times `spread`. None: all samples alike.
    spread : float >= 0, default 1.5
        Factor on `rotation`, `scale`, `shear` and `translate` for the samples past
        `originals` (the elastic field is unchanged). ``scale * spread`` must stay
        below 1 (unless `originals` is None).

    Returns
    -------
    X : ndarray (n, 784) float32 in [0, 1]
    y : ndarray (n,) int64

    Notes
    -----
    Why blends. With single digits, 60 000 samples hold about 33 mildly deformed
    copies of each of the 1797 originals: each original becomes a dense clique, the
    copies of unusual ones form components of their own at cosine 0.8, and those
    take the smallest eigenvalues (measured on a GPU, seed 0, n = 60 000: 312
    nonzeros per row, about 300 isolated points and 15 components of 2 points
    besides the giant one, all 10 smallest Laplacian eigenvalues 0, ARI 0.00). A
    blend of two random digits of the class is nearly unique to its sample: at
    n = 4000 the most similar other sample shares the first digit for about 2 % of
    the rows, against 8-10 % with single digits and ±1 pixel shifts.

    Why `originals`. For independent samples from one distribution the mean number
    of neighbours above a fixed threshold is exactly (n − 1) times the probability
    that two samples are neighbours: it grows linearly with n, whatever the
    distribution. The paper's MNIST shapes grow far more slowly (251, 299, 478
    nonzeros per row at 60, 120 and 240 thousand rows, Table 3) because InfMNIST's
    added digits are deformed more than the originals. The extra samples here have
    their own digits (deforming the first samples again would recreate near-copies).
    The price is the paper's too: sparser rows leave more stray points, and the
    paper clustered MNIST240K at cosine 0.84 rather than 0.8 (MNIST240K*).

    Measured with seed 0 (``load("infinite-digits", n_samples=n, random_state=0)``):

    - n = 60 000, cosine > 0.8, the whole graph on the CPU, ``SpectralClustering(
      n_clusters=10, metric="cosine", threshold_sim=0.8, eigen_solver="chebyshev",
      backend="cpu", random_state=0)``: 15.06 M nonzeros, 251.0 per row on average
      and 3578 at most (MNIST60K, Table 3: 15.1 M, 251, 2196); 143 isolated points
      and one component of all the others; ARI 0.54, NMI 0.63 against the digit
      labels (isolated points labelled −1; the paper: 0.44, 0.66).
    - n = 120 000 and 240 000, cosine > 0.8, rows counted against all rows for 1000
      sampled rows of each part (originals, extras): about 316 and 494 nonzeros per
      row on average (MNIST120K and 240K: 299, 478), about 4100 and 6900 in the
      densest sampled row (the maxima: 3310, 5552); about 0.3 % and 0.2 % of the
      extra rows isolated, none of the sampled originals. Components and clustering
      were not measured at these sizes.
    - n = 10 000 with the suggested threshold (0.78): ARI 0.41, NMI 0.53.

    Every random number is drawn up front from `rng` (41 per sample), so the
    output depends on the seed only, never on the batch size; the first
    ``min(n, originals)`` samples are drawn before any extra one, so a set of more
    than `originals` rows begins with the set of `originals` rows. The per-sample
    work is vectorised over batches: a contiguous gather of the two padded templates,
    one (2×2)·(2×784) product for the affine map, one (2·16)·(16×784) product for the
    elastic field, and a bilinear gather of four pixels of the blend per output
    pixel. About 4-5 s per 60 000 samples on two cores (with 0.5 s once per process
    to prepare the templates); 240 000 samples take 16-20 s (the single-digit
    generator: 26 s beside it), 750 MB for X and 1.2 GB at the peak.
    """
    return _generate(np, n, rng, rotation, scale, shear, translate, elastic, gamma, blend,
                     originals, spread)


def infinite_digits_gpu(n, rng, **options):
    """:func:`infinite_digits` rendered on the GPU: the same draws from `rng` (on the
    host), the images resampled by CuPy (equal to the host's up to float32 rounding of
    the products; not compared by a test yet); X is a CuPy array (y NumPy). For
    benchmarks of millions of rows, where the host's rendering would take minutes (on
    the GPU 10⁷ rows take seconds, most of it the host's draws)."""
    import inspect

    import cupy

    bound = inspect.signature(infinite_digits).bind(n, rng, **options)
    bound.apply_defaults()
    return _generate(cupy, *bound.arguments.values())


def _generate(xp, n, rng, rotation, scale, shear, translate, elastic, gamma, blend,
              originals, spread):
    """:func:`infinite_digits`'s work, the images rendered by the array module `xp`."""
    rotation = check_float(rotation, "rotation", low=0.0, high=180.0)
    scale = check_float(scale, "scale", low=0.0, high=1.0, high_inclusive=False)
    shear = check_float(shear, "shear", low=0.0)
    translate = check_float(translate, "translate", low=0.0)
    elastic = check_float(elastic, "elastic", low=0.0)
    gamma = check_float(gamma, "gamma", low=0.0, low_inclusive=False)
    blend = check_float(blend, "blend", low=0.0, high=0.5)
    originals = check_int(originals, "originals", low=1, allow_none=True)
    spread = check_float(spread, "spread", low=0.0)
    if originals is not None and scale * spread >= 1.0:
        raise ValueError(f"scale * spread = {scale:g} * {spread:g} is out of range; allowed: "
                         "below 1 (the extra samples' scale factors 1 ± scale * spread)")

    m = n if originals is None else min(n, originals)
    draws = _draw(rng, m, blend, rotation, scale, shear, translate, elastic)
    if m < n:  # the extra samples: their own digits, wider affine maps
        extra = _draw(rng, n - m, blend, rotation * spread, scale * spread, shear * spread,
                      translate * spread, elastic)
        draws = {key: np.concatenate([value, extra[key]]) for key, value in draws.items()}
    _, labels = _digits()
    X = _render(draws, n, xp)
    if gamma != 1.0:
        xp.power(X, xp.float32(gamma), out=X)
    return X, labels[draws["first"]].astype(np.int64)


def _draw(rng, n, blend, rotation, scale, shear, translate, elastic) -> dict:
    """Every random number of `n` samples, in a fixed order (41 per sample)."""
    _, labels = _digits()
    members, starts, counts = _classes()
    first = rng.integers(0, len(labels), n)
    cls = labels[first]
    second = members[starts[cls] + (rng.random(n) * counts[cls]).astype(np.int64)]
    weight = rng.uniform(0.6 * blend, blend, n)
    theta = np.deg2rad(rng.uniform(-rotation, rotation, n))
    zoom = 1.0 + rng.uniform(-scale, scale, (n, 2))
    skew = rng.uniform(-shear, shear, n)
    shift = rng.uniform(-translate, translate, (n, 2))
    control = rng.standard_normal((n, 2, _CONTROL * _CONTROL)).astype(np.float32) * elastic

    # Source-pixel map of each sample, applied to output pixel p (centred on the
    # frame): src = centre + R(θ) · Shear · diag(1/zoom) · p + shift + field(p).
    cos, sin = np.cos(theta), np.sin(theta)
    inv_y, inv_x = 1.0 / zoom[:, 0], 1.0 / zoom[:, 1]
    M = np.empty((n, 2, 2))
    M[:, 0, 0] = cos * inv_y
    M[:, 0, 1] = (cos * skew - sin) * inv_x
    M[:, 1, 0] = sin * inv_y
    M[:, 1, 1] = (sin * skew + cos) * inv_x
    return {
        "first": first.astype(np.int32),
        "second": second.astype(np.int32),
        "weight": weight.astype(np.float32),
        "M": M.astype(np.float32),
        "offset": (shift + (SIZE - 1) / 2 + 1).astype(np.float32),  # +1: the zero border
        "control": control,
    }


@functools.lru_cache(maxsize=1)
def _classes():
    """Template indices sorted by class, each class's first position and size."""
    _, labels = _digits()
    counts = np.bincount(labels)
    starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
    return np.argsort(labels, kind="stable"), starts, counts


def _render(draws, n, xp=np):
    templates = xp.asarray(_templates().reshape(len(_templates()), -1))
    grid = xp.asarray(np.mgrid[0:SIZE, 0:SIZE].reshape(2, -1).astype(np.float32) - (SIZE - 1) / 2)
    basis_t = xp.asarray(np.ascontiguousarray(_spline_basis().T))
    width = SIZE + 2
    X = xp.empty((n, SIZE * SIZE), dtype=np.float32)
    batch = _BATCH if xp is np else 16 * _BATCH
    for start in range(0, n, batch):
        stop = min(n, start + batch)
        part = {key: xp.asarray(value[start:stop]) for key, value in draws.items()}
        # Each sample's own padded template: the blend of its two digits.
        w = part["weight"][:, None]
        mixed = xp.take(templates, part["first"], axis=0)
        mixed *= 1 - w
        mixed += xp.take(templates, part["second"], axis=0) * w
        src = part["M"] @ grid  # (b, 2, 784)
        src += part["offset"][:, :, None]
        src += part["control"] @ basis_t
        # Keep reads inside the padded frame: beyond it is background anyway.
        xp.clip(src, 0.0, width - 1.001, out=src)
        corner = xp.floor(src)
        src -= corner
        wy, wx = src[:, 0], src[:, 1]
        corner = corner.astype(np.int32)
        index = corner[:, 0] * width + corner[:, 1]
        index += (xp.arange(stop - start, dtype=np.int32) * (width * width))[:, None]
        top = xp.take(mixed, index)
        right = xp.take(mixed, index + 1)
        right -= top
        right *= wx
        top += right
        bottom = xp.take(mixed, index + width)
        right = xp.take(mixed, index + (width + 1))
        right -= bottom
        right *= wx
        bottom += right
        bottom -= top
        bottom *= wy
        xp.add(top, bottom, out=X[start:stop])
    xp.clip(X, 0.0, 1.0, out=X)  # bilinear weights can round a hair outside
    return X
