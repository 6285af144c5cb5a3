"""The base-bound experiment's conclusion in plain words, from the measured numbers alone."""

from __future__ import annotations

from typing import Any

from ropekit.experiments.base_bound.measure import overall_accuracy


def _pooled(bins: list[dict[str, Any]]) -> dict[str, float] | None:
    return overall_accuracy(bins) if bins and sum(b["trials"] for b in bins) else None


def _percent(a: dict[str, float]) -> str:
    return f"{a['accuracy']:.0%} [{a['low']:.0%}, {a['high']:.0%}]"


def within_model(row: dict[str, Any]) -> str | None:
    """For a model whose first negative B_m lies inside the context: accuracy before vs after that distance."""
    first = row.get("first_negative_m")
    if first is None or not row.get("retrieval"):
        return None
    before = _pooled([b for b in row["retrieval"] if b["high_distance"] <= first])
    after = _pooled([b for b in row["retrieval"] if b["low_distance"] >= first])
    if before is None or after is None:
        return None
    if after["high"] < before["low"]:
        verdict = "collapses past that distance, as the bound predicts"
    elif after["low"] > before["high"]:
        verdict = "is better past that distance"
    else:
        verdict = "does not change significantly past that distance (the bound is not sharp here)"
    return (
        f"{row['label']} (b={row['base']:.4g}, first B_m < 0 at m={first}): retrieval {_percent(before)} at "
        f"distances below {first}, {_percent(after)} beyond: it {verdict}."
    )


def conclusion(results: list[dict[str, Any]]) -> list[str]:
    """Plain words from the numbers: is perplexity similar while retrieval differs across the bound?

    A below-bound model is *superficial* when its perplexity is within 10% of the best above-bound model's while
    its retrieval interval lies entirely below that model's (Wilson 95%).
    """
    rope = [r for r in results if r["base"] is not None]
    below = [r for r in rope if r["base"] < r["smallest_base"]]
    above = [r for r in rope if r["base"] >= r["robust_base"]]
    if not below or not above:
        return ["The planned bases did not straddle the bound; no conclusion."]
    ppl = lambda r: r["heldout"]["perplexity"]  # noqa: E731
    acc = lambda r: r["retrieval_overall"]  # noqa: E731
    best_above = min(above, key=ppl)
    best_retrieval = max(above, key=lambda r: acc(r)["accuracy"])
    lines = []
    for r in below:
        ratio = ppl(r) / ppl(best_above)
        separated = acc(r)["high"] < acc(best_above)["low"]
        lines.append(
            f"{r['label']} (b={r['base']:.4g}, below the bound {r['smallest_base']:.4g}): perplexity {ppl(r):.3f} "
            f"vs {ppl(best_above):.3f} for {best_above['label']} ({ratio:.2f}×); retrieval {_percent(acc(r))} vs "
            f"{_percent(acc(best_above))}" + (" — intervals do not overlap." if separated else " — intervals overlap.")
        )
    lines += [line for line in map(within_model, rope) if line]
    worse = [r for r in below if acc(r)["high"] < acc(best_above)["low"]]
    superficial = [r for r in worse if ppl(r) / ppl(best_above) < 1.10]
    unharmed = [r for r in below if r not in worse]
    names = lambda rows: ", ".join(r["label"] for r in rows)  # noqa: E731
    if acc(best_retrieval)["high"] < 0.5:
        verdict = (
            f"Inconclusive at this scale: no model at or above the bound learned retrieval (best "
            f"{_percent(acc(best_retrieval))}, {best_retrieval['label']}), so the run cannot show whether a "
            "below-bound base hurts it. Train longer or larger until the above-bound models retrieve, then compare."
        )
    elif superficial and not unharmed:
        verdict = (
            f"Reproduced at this scale: every below-bound base retrieves significantly worse, and {names(superficial)} "
            f"{'keeps' if len(superficial) == 1 else 'keep'} perplexity within 10% of the best above-bound model "
            "while doing so."
        )
    elif superficial:
        verdict = (
            f"Partly reproduced: {names(superficial)} {'keeps' if len(superficial) == 1 else 'keep'} perplexity within "
            f"10% of the best above-bound model while retrieving significantly worse, but {names(unharmed)} "
            "retrieve as well although below the bound."
        )
    elif worse:
        verdict = (
            f"Partly reproduced: {names(worse)} retrieve significantly worse, but their perplexity is also more than "
            "10% worse, so perplexity alone would not have been misleading here."
        )
    else:
        verdict = (
            "Not reproduced at this scale: below-bound bases do not retrieve significantly worse. Possible reasons: "
            "at a context of a few hundred tokens a small model can locate the needle by content with a few "
            "heads whose rotation it learns to tolerate, and the bound's argument concerns the expected "
            "attention of similar tokens, which trained projections need not follow."
        )
    nope = [r for r in results if r["base"] is None]
    if nope:
        lines.append(f"NoPE control: perplexity {ppl(nope[0]):.3f}, retrieval {_percent(acc(nope[0]))}.")
    return [verdict, *lines]
