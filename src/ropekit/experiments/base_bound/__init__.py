"""Reproducing "superficial long context" (Men et al., arXiv 2405.14591) at tiny scale.

Claim: a model whose RoPE base is below the lower bound for its context length can reach low perplexity
at that length yet fail to retrieve from far back. The experiment trains copies of the tiny model that
differ only in the RoPE base (straddling ropekit's computed bound for (context, head_dim)) plus a NoPE
control — same data order, seed and steps — with passkey episodes (needle at uniformly random distances up
to the context) mixed into training. For each model it measures held-out perplexity at the context,
retrieval accuracy against needle distance (Wilson 95% intervals) and B_m(base) over the same distances.

Files: ``settings`` (what defines a run, the planned bases), ``measure`` (perplexity, retrieval by distance, B_m),
``run`` (train, measure, write), ``verdict`` (the conclusion in plain words), ``page`` (figure and HTML).
"""

from ropekit.experiments.base_bound.measure import heldout_perplexity, overall_accuracy, retrieval_by_distance
from ropekit.experiments.base_bound.page import write_page
from ropekit.experiments.base_bound.run import run_experiment
from ropekit.experiments.base_bound.settings import MODEL_KEYS, ExperimentSettings, model_config, planned_models
from ropekit.experiments.base_bound.verdict import conclusion, within_model

__all__ = [
    "MODEL_KEYS",
    "ExperimentSettings",
    "conclusion",
    "heldout_perplexity",
    "model_config",
    "overall_accuracy",
    "planned_models",
    "retrieval_by_distance",
    "run_experiment",
    "within_model",
    "write_page",
]
