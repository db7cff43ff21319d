"""The :class:`Dataset` every loader returns, and the catalogue entry type."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass(eq=False)  # arrays inside: identity, not element-wise, comparison
class Dataset:
    """A data matrix with its optional ground truth and where it came from.

    Attributes
    ----------
    X : ndarray of shape (n, d), float32
        C-contiguous, finite.
    y : ndarray of shape (n,), int64, or None
        Ground-truth class of each row, coded ``0 .. n_classes - 1``; None when the
        data has no labels.
    name : str
        The built-in name (``"moons"``, ...) or the file name.
    description : str
        One line saying what the data is.
    params : dict
        What produced it: ``n_samples``, ``random_state`` and the generator options
        for a built-in set; ``path`` and ``label_column`` for a file.
    preset : dict or None
        Graph keywords fixed by the generator (the paper's settings, ``metric``,
        ``sigma``, ``threshold_sqdist`` or ``threshold_sim``) where a built-in set has
        them; the library's own choice for any data is
        :meth:`explorer.SpectralClustering.plan` (or :func:`explorer.graph.suggest_params`).
    classes : tuple or None
        The original label values, in code order (``classes[y[i]]`` is row i's label
        as the file wrote it); None without labels.
    feature_names : tuple of str or None
        Column names when the source had them.
    """

    X: np.ndarray
    y: np.ndarray | None
    name: str
    description: str
    params: dict = field(default_factory=dict)
    classes: tuple | None = None
    feature_names: tuple | None = None
    preset: dict | None = field(default=None, repr=False)

    @property
    def n(self) -> int:
        """Number of samples (rows)."""
        return int(self.X.shape[0])

    @property
    def d(self) -> int:
        """Number of features (columns)."""
        return int(self.X.shape[1])

    @property
    def n_classes(self) -> int | None:
        """Number of distinct ground-truth classes, or None without labels."""
        return None if self.y is None else int(np.unique(self.y).size)

    def summary(self) -> str:
        """One line for logs and the CLI, e.g. ``moons: n=2000, d=2, 2 classes``."""
        classes = "no labels" if self.y is None else f"{self.n_classes} classes"
        return f"{self.name}: n={self.n}, d={self.d}, {classes}"


@dataclass(frozen=True)
class DatasetInfo:
    """A catalogue entry of :data:`explorer.data.DATASETS` (what a dropdown shows).

    Attributes
    ----------
    description : str
        One line.
    default_n : int
        The size :func:`explorer.data.load` generates when `n_samples` is None.
    max_n : int or None
        The largest size available (digits has 1797 rows); None when unbounded.
    d : int
        Features per sample.
    n_classes : int or None
        Ground-truth classes at the default options; None for data without labels.
    options : dict
        Generator options (keyword -> default value) that ``load`` accepts.
    """

    description: str
    default_n: int
    max_n: int | None
    d: int
    n_classes: int | None
    options: dict = field(default_factory=dict)
