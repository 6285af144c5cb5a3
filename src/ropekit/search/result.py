"""``search.json``: what a search found, in one flat, documented schema (docs/search.md) that ``ropekit eval``
(:mod:`ropekit.eval.searched`), the fine-tuning commands and people read.

Top-level keys::

    format            "ropekit-search/1"
    model             the model searched (as given)
    rope              {"head_dim", "rotary_dim", "base"}
    original_length   L0 (tokens)
    target_length     T (tokens)
    factor            s = T / L0
    attention_factor  longrope's √(1 + ln s / ln L0), what every engine applies with these factors
    long_factor       the best candidate's factors, one per rotary pair (>= 1, non-decreasing)
    short_factor      = long_factor (default), or all ones (``--switch``)
    critical_pair     {"found": the best candidate's, "theory": Liu et al.'s}
    scores            {"search": ..., "heldout": ...}: the best candidate's needle loss (nats per answer token)
    seeds             {name: {"critical_pair", "factors", "search", "heldout"}}: each formula as longrope factors
    formulas          {method: {"search", "heldout"} or {"skipped"}}: each formula as its own method
    samples           {"search", "heldout", "seed", "text", "depths"}
    evaluations       candidates scored; trace: one row per candidate (index, generation, score, best so far,
                      critical_pair, factors)
    settings          the request; seconds; launch (engine → line, for a transformers folder); folder
"""

from __future__ import annotations

import math
from typing import Any

from ropekit.search.evolve import SearchTrace
from ropekit.search.objective import MAX_DEPTH
from ropekit.search.run import Prepared, score, theory_pair

FORMAT = "ropekit-search/1"


def describe(prepared: Prepared, trace: SearchTrace, formulas: dict[str, Any], seconds: float) -> dict[str, Any]:
    """The ``search.json`` dict (every number a plain float or int); scores the best and the seeds on the held-out
    samples."""
    from dataclasses import asdict

    best, best_score = trace.best
    scores = {key: score for key, score in ((c.key(), s) for c, s, _ in trace.scored)}
    seeds = {}
    for name, candidate in prepared.seeds.items():
        seeds[name] = {
            "critical_pair": candidate.critical_pair,
            "factors": candidate.factors,
            "search": scores[candidate.key()]
            if candidate.key() in scores
            else score(prepared, candidate, prepared.search),
            "heldout": score(prepared, candidate, prepared.heldout),
        }
    original, factor = prepared.original_length, prepared.factor
    rope = prepared.model.rope
    return {
        "format": FORMAT,
        "model": prepared.request.model,
        "rope": {"head_dim": rope.head_dim, "rotary_dim": rope.dim, "base": rope.base},
        "original_length": original,
        "target_length": prepared.target_length,
        "factor": factor,
        "attention_factor": math.sqrt(1 + math.log(factor) / math.log(original)),
        "long_factor": best.factors,
        "short_factor": [1.0] * len(best.factors) if prepared.request.switch else best.factors,
        "critical_pair": {"found": best.critical_pair, "theory": theory_pair(prepared)},
        "scores": {"search": best_score, "heldout": score(prepared, best, prepared.heldout)},
        "seeds": seeds,
        "formulas": formulas,
        "samples": {
            "search": prepared.request.samples,
            "heldout": prepared.request.heldout_samples,
            "seed": prepared.request.seed,
            "text": prepared.text,
            "depths": [0.0, MAX_DEPTH],
        },
        "evaluations": len(trace.scored),
        "settings": asdict(prepared.request),
        "seconds": seconds,
        "trace": trace.to_list(),
    }
