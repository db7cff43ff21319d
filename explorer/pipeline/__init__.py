"""The pipeline of a spectral fit, written once.

::

    X ──input stage (explorer.inputs)──▶ InputData
    keywords ──parameter table (explorer.params)──▶ params
    (InputData, params) ──plan_fit──▶ FitPlan: engine, backend, mode, graph kind, edge
                                      rule, eigensolver, each with its reason
    FitPlan ──run_plan: runner[mode] on engine[in process | registered]──▶ FitResult
    FitResult ──SpectralClustering._record──▶ fitted attributes, set in one place

A new mode is one more runner, a new engine registers itself with
:func:`explorer.engines.register_engine`.
"""

from .plan import FitPlan, Points, plan_fit, plan_graph_of, plan_points, precomputed_graph
from .runners import FitResult, run_graph, run_landmarks, run_plan

__all__ = ["FitPlan", "FitResult", "Points", "plan_fit", "plan_graph_of", "plan_points",
           "precomputed_graph", "run_graph", "run_landmarks", "run_plan"]
