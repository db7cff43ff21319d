"""The edge rule in kernel terms: :class:`~explorer.graph.EdgeRule` to
:class:`explorer.kernels.Rule`, the only place the graph layer translates it.

A gaussian similarity threshold becomes its squared-distance cutoff (exp is monotone,
see :attr:`EdgeRule.sqdist_cutoff`), so the kernels only ever compare a squared
distance or a cosine. Importing this module does not import CuPy.
"""

from __future__ import annotations

from ..kernels import Rule
from .rule import EdgeRule


def kernel_rule(params: EdgeRule) -> Rule:
    """The :class:`explorer.kernels.Rule` of validated parameters."""
    if params.compares == "cosine":
        return Rule("cosine", float(params.threshold))
    return Rule(params.metric, float(params.sqdist_cutoff), params.sigma)
