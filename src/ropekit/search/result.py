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
    space             the candidates' form, "free" or "longrope2"; ntk_base: b' of the tied pairs (longrope2), else null
    scores            {"search", "objective", "heldout", "short_change"}: the best candidate's needle loss (nats per
                      answer token) on the search kinds, its objective (with the short-length term), its needle loss
                      on the held-out kinds, and its 1x perplexity change on held-out L0 windows
    short             {"short_floor", "short_tolerance", "short_floor_exceeds"}: on the search windows, the 1x
                      perplexity change of longrope's attention factor alone, the total 1x change allowed (the floor
                      included), and whether the floor alone is over it (then the search minimised the excess)
    seeds             {name: {"critical_pair", "factors", "search", "heldout"}}: each formula as longrope factors
    table             the final table on the held-out kinds (:mod:`ropekit.search.table`): per row loss, accuracy,
                      1x change, the paired difference against the search, each with its 95% interval; winner; verdict
    formulas          {method: {"search", "heldout"} or {"skipped"}}: each formula as its own method
    samples           {"search", "heldout", "seed", "text", "depths", "search_kinds", "heldout_kinds"}
    evaluations       candidates scored; trace: one row per candidate (index, generation, score, best so far,
                      critical_pair, factors)
    settings          the request; seconds; launch (engine → line, for a transformers folder); folder
"""

from __future__ import annotations

import math
from typing import Any

from ropekit.search.evolve import SearchTrace
from ropekit.search.needles import MAX_DEPTH
from ropekit.search.run import Prepared, score, short_floor, theory_pair
from ropekit.search.space import ntk_base, seed_candidates
from ropekit.search.table import final_table

FORMAT = "ropekit-search/1"


def describe(
    prepared: Prepared, trace: SearchTrace, formulas: dict[str, Any], seconds: float, *, processes: Any = None
) -> dict[str, Any]:
    """The ``search.json`` dict (every number a plain float or int); scores the best, the seeds and the formulas on
    the held-out samples and windows (:func:`~ropekit.search.table.final_table`, its rows shared among
    ``processes``: every process calls this and gets the same dict)."""
    from dataclasses import asdict

    best, best_score = trace.best
    table = final_table(prepared, best, processes=processes)
    rows = table["rows"]
    parts = prepared.parts.get(best.key(), {})
    seeds = {}
    original, factor = prepared.original_length, prepared.factor
    rope = prepared.model.rope
    for name, candidate in seed_candidates(rope, original, factor).items():
        known = prepared.parts.get(candidate.key())
        seeds[name] = {
            "critical_pair": candidate.critical_pair,
            "factors": candidate.factors,
            "search": known["needle"] if known else score(prepared, candidate, prepared.search),
            "heldout": rows[f"longrope[{name}]"]["loss"],
        }
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
        "space": prepared.request.space,
        "ntk_base": ntk_base(best, rope.base),
        "scores": {
            "search": parts["needle"] if parts else score(prepared, best, prepared.search),
            "objective": best_score,
            "heldout": rows["searched"]["loss"],
            "short_change": rows["searched"]["short_change"],
        },
        "short": short_floor(prepared),
        "seeds": seeds,
        "formulas": formulas,
        "table": table,
        "samples": {
            "search": prepared.request.samples,
            "heldout": prepared.request.heldout_samples,
            "seed": prepared.request.seed,
            "text": prepared.text,
            "depths": [0.0, MAX_DEPTH],
            "search_kinds": sorted(set(prepared.search.kinds)),
            "heldout_kinds": sorted(set(prepared.heldout.kinds)),
        },
        "evaluations": len(trace.scored),
        "settings": asdict(prepared.request),
        "seconds": seconds,
        "trace": trace.to_list(),
    }
