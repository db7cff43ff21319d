"""What an edge is: the metric, its threshold and σ, validated once.

Every builder (CPU and GPU, CSR-1/2/3 and the rest) takes a :class:`GraphParams` and
obeys the table of DESIGN.md "Semantics":

=========  ===================  ============================  ==========================
metric     threshold            edge (i, j), i != j, iff      weight s_ij
=========  ===================  ============================  ==========================
gaussian   threshold_sqdist=t   ||xi - xj||^2 < t             exp(-||xi - xj||^2 / 2σ^2)
gaussian   threshold_sim=t      s_ij > t                      exp(-||xi - xj||^2 / 2σ^2)
cosine     threshold_sim=t      s_ij > t                      xi·xj / (||xi|| ||xj||)
uniform    threshold_sqdist=t   ||xi - xj||^2 < t             1
=========  ===================  ============================  ==========================

A gaussian similarity threshold is the distance threshold ``-2σ² ln t`` in disguise
(exp is monotone), so the builders only ever compare either a squared distance
(``compares == "sqdist"``) or a cosine (``compares == "cosine"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .._validation import check_choice, check_float

METRICS = ("gaussian", "cosine", "uniform")

#: Relative width of the float32 rounding band around a threshold (DESIGN.md
#: "Exactness"): pairs whose float64 value lies this close to the threshold may be
#: decided either way by a float32 builder.
BAND_RTOL = 1e-5


@dataclass(frozen=True)
class GraphParams:
    """A validated edge rule. Build it with :meth:`from_args`.

    Attributes
    ----------
    metric : {"gaussian", "cosine", "uniform"}
    sigma : float or None
        Gaussian width; None for the other metrics.
    threshold_kind : {"sqdist", "sim"}
        Which keyword the user gave.
    threshold : float
        Its value.
    """

    metric: str
    sigma: float | None
    threshold_kind: str
    threshold: float

    @classmethod
    def from_args(cls, metric="gaussian", sigma=None, threshold_sqdist=None, threshold_sim=None):
        """Validate the user's keywords and return the edge rule.

        `sigma` is required for ``metric="gaussian"`` and ignored by the others (as
        scikit-learn ignores ``gamma`` for kernels that do not use it), so switching
        metric in an estimator or a UI needs no other change.

        Raises
        ------
        ValueError
            Unknown metric, a missing or doubled threshold, a threshold kind the
            metric does not take, or a value out of its range.
        """
        check_choice(metric, "metric", METRICS)
        if (threshold_sqdist is None) == (threshold_sim is None):
            given = "both" if threshold_sqdist is not None else "neither"
            raise ValueError(
                f"give exactly one of threshold_sqdist and threshold_sim; got {given} "
                f"(threshold_sqdist={threshold_sqdist!r}, threshold_sim={threshold_sim!r})"
            )
        kind = "sqdist" if threshold_sqdist is not None else "sim"
        if metric == "cosine" and kind == "sqdist":
            raise ValueError(
                "metric='cosine' takes threshold_sim in [-1, 1); "
                f"got threshold_sqdist={threshold_sqdist!r}"
            )
        if metric == "uniform" and kind == "sim":
            raise ValueError(
                f"metric='uniform' takes threshold_sqdist > 0; got threshold_sim={threshold_sim!r}"
            )
        if kind == "sqdist":
            t = check_float(threshold_sqdist, "threshold_sqdist", low=0.0, low_inclusive=False)
        elif metric == "cosine":
            t = check_float(
                threshold_sim, "threshold_sim", low=-1.0, high=1.0, high_inclusive=False
            )
        else:  # gaussian similarity lies in (0, 1]; t = 0 would keep underflowed pairs
            t = check_float(
                threshold_sim, "threshold_sim", low=0.0, high=1.0, low_inclusive=False,
                high_inclusive=False,
            )
        if metric == "gaussian":
            if sigma is None:
                raise ValueError("metric='gaussian' needs sigma > 0; got sigma=None")
            sigma = check_float(sigma, "sigma", low=0.0, low_inclusive=False)
        else:
            sigma = None
        return cls(metric, sigma, kind, t)

    @property
    def compares(self) -> str:
        """``"cosine"`` or ``"sqdist"``: the quantity a builder thresholds."""
        return "cosine" if self.metric == "cosine" else "sqdist"

    @property
    def sqdist_cutoff(self) -> float:
        """Edge iff squared distance < this (metrics that compare distances only)."""
        if self.compares != "sqdist":
            raise AttributeError("a cosine rule has no squared-distance cutoff")
        if self.threshold_kind == "sqdist":
            return self.threshold
        return -2.0 * self.sigma**2 * math.log(self.threshold)

    @property
    def radius(self) -> float:
        """ε = sqrt(sqdist_cutoff): the neighbourhood radius (distance rules only)."""
        return math.sqrt(self.sqdist_cutoff)

    @property
    def band(self) -> float:
        """Half-width of the rounding band around the compared threshold, in its units.

        Relative to the threshold for squared distances. Cosines are bounded by 1 and a
        float32 dot product errs in absolute terms, so their band is relative to
        ``max(|t|, 1)``: a threshold near 0 would otherwise get a band far narrower
        than float32 can resolve.
        """
        if self.compares == "sqdist":
            return BAND_RTOL * self.sqdist_cutoff
        return BAND_RTOL * max(abs(self.threshold), 1.0)

    def describe(self) -> str:
        """One line for tables and logs, e.g. ``gaussian σ=0.01, ‖xi−xj‖² < 0.0008``."""
        if self.metric == "cosine":
            return f"cosine, s > {self.threshold:g}"
        head = f"gaussian σ={self.sigma:g}" if self.metric == "gaussian" else "uniform"
        if self.threshold_kind == "sim":
            return f"{head}, s > {self.threshold:g} (‖xi−xj‖² < {self.sqdist_cutoff:.6g})"
        return f"{head}, ‖xi−xj‖² < {self.threshold:g}"
