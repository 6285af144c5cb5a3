"""Does the search beat YaRN and its best seed formula on held-out needle kinds and wordings, over five seeds, at 4x
and 8x, in both forms (free, longrope2)? And where does the searched critical pair fall beside theory's?

Per target length one held-out set (the kinds and wordings of ``ropekit.search.needles.HELDOUT_KINDS``, seed 0) and
one set of held-out L0 windows; every formula, every seed formula as longrope factors and the factors of
evidence/search (``shipped``) are scored on it once; then per search seed (0-4) and form, a search on that seed's
own search samples and windows (the search kinds only), its best candidate scored on the same held-out set, paired
against every other row (bootstrap 95%). Small budgets, so that the whole run fits ~45 min on 2 shared CPU cores.

The short-length term is the search's default: 1x perplexity may change by 2% in all against the model without
scaling (the attention factor's floor included); each searched row's 1x change is in the table.

Usage: PYTHONPATH=src nice -n 10 python evidence/search_seeds/run.py [4] [8]   (default both; writes rows.json and
summary.md here). rows.json is written after every search, and a run whose multiple, form, seed and settings are
already there is kept, not searched again: a run stopped part-way continues where it stopped, and each multiple can
run as its own process.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import sys
import time
from pathlib import Path

import numpy as np

from ropekit.eval.bootstrap import paired_interval
from ropekit.eval.text import shipped_text, tokenize
from ropekit.search.evolve import SearchSettings, run_search
from ropekit.search.needles import SEARCH_KINDS
from ropekit.search.objective import SEARCH_STREAM, SHORT_SEARCH_STREAM, needle_samples, short_windows
from ropekit.search.request import SHORT_TOLERANCE, SearchRequest
from ropekit.search.run import objective, prepare
from ropekit.search.space import seed_candidates, theory_critical_pair
from ropekit.search.table import SEARCHED, measure_factors, measured_rows, summarize

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
SEEDS = (0, 1, 2, 3, 4)
#: the forms searched per multiple (both at 4x; the free form alone at 8x, for the CPU budget)
SPACES = {4: ("free", "longrope2"), 8: ("free",)}
#: per multiple: search samples (= search windows), held-out samples (= held-out windows), evaluations, population
SIZES = {4: (3, 14, 10, 6), 8: (3, 14, 10, 6)}
COMMAND = "PYTHONPATH=src nice -n 10 python evidence/search_seeds/run.py"
if os.environ.get("SEARCH_SEEDS_SMOKE"):  # a check of the script itself, written elsewhere: one seed, tiny sizes
    SEEDS, SIZES, HERE = (0,), {4: (2, 7, 7, 7), 8: (2, 7, 7, 7)}, Path(os.environ["SEARCH_SEEDS_SMOKE"])


def searched(base, filler, seed: int, space: str, sizes: tuple[int, int, int, int]):
    """A search of ``space`` with ``seed`` on its own search samples and windows; its best candidate and seconds."""
    samples, _, evaluations, population = sizes
    model = base.model

    def encode(data: bytes):
        return model.encode(data).numpy()

    request = dataclasses.replace(base.request, seed=seed, space=space)
    prepared = dataclasses.replace(
        base,
        request=request,
        search=needle_samples(
            filler, base.target_length, samples, seed=seed, stream=SEARCH_STREAM, encode=encode, kinds=SEARCH_KINDS
        ),
        short=short_windows(
            model, filler, base.original_length, samples, seed=seed, stream=SHORT_SEARCH_STREAM, factor=base.factor
        ),
        seeds=seed_candidates(model.rope, base.original_length, base.factor, space),
        parts={},
    )
    start = time.perf_counter()
    settings = SearchSettings(evaluations=evaluations, population=population, parents=3, seed=seed)
    trace = run_search(lambda c: objective(prepared, c), prepared.seeds, settings, factor=base.factor)
    best = trace.best[0]
    return best, prepared.parts[best.key()], time.perf_counter() - start


def settings(multiple: int) -> dict:
    """What a run's rows depend on besides its form and seed; a stored run with other settings is searched again."""
    names = ("search_samples", "heldout_samples", "evaluations", "population")
    return {"sizes": dict(zip(names, SIZES[multiple], strict=True)), "short_tolerance": SHORT_TOLERANCE}


def one_length(multiple: int, done: list[dict], save) -> dict:
    """The formulas and every search of ``multiple``; ``done``: runs already stored for it (kept when their settings
    are these); ``save(length)`` is called after every search with what there is so far."""
    samples, heldout, _, _ = SIZES[multiple]
    base = prepare(
        SearchRequest(model="tiny", target_multiple=float(multiple), samples=samples, heldout_samples=heldout)
    )
    filler = tokenize(shipped_text(), base.model.encode, base.model.separator).ids.numpy()
    shipped = json.loads((ROOT / f"evidence/search/tiny_{multiple}x/search.json").read_text())["long_factor"]
    theory_best = base.seeds["theory"]
    rows = measured_rows(base, theory_best, {"shipped": shipped})
    rows.pop(SEARCHED)
    runs = []
    length = {
        "multiple": multiple,
        "target_length": base.target_length,
        "theory_critical_pair": theory_critical_pair(base.model.rope, base.original_length),
        "kinds": sorted(set(base.heldout.kinds)),
        "heldout_samples": heldout,
        **settings(multiple),
        "short_floor": math.expm1(base.heldout_short.floor),
        "formula_losses": {name: row["losses"].tolist() for name, row in rows.items()},
        "runs": runs,
    }
    stored = {(run["space"], run["seed"]): run for run in done}
    for space in SPACES[multiple]:
        for seed in SEEDS:
            if (space, seed) in stored:
                runs.append(stored[(space, seed)])
                continue
            best, parts, seconds = searched(base, filler, seed, space, SIZES[multiple])
            table = summarize({SEARCHED: measure_factors(base, best.factors), **rows}, base.heldout.kinds)
            runs.append(
                {
                    "space": space,
                    "seed": seed,
                    "seconds": seconds,
                    "critical_pair": best.critical_pair,
                    "ntk_base": None if best.log_base_ratio is None else 1e4 * math.exp(best.log_base_ratio),
                    "factors": best.factors,
                    "search_needle": parts["needle"],
                    "search_short_change": math.expm1(parts["short_change"]),
                    "table": table,
                    "losses": measure_factors(base, best.factors)["losses"].tolist(),
                }
            )
            save(length)
            print(f"{multiple}x {space} seed {seed} ({seconds:.0f} s): {table['verdict']}", file=sys.stderr, flush=True)
    return length


def pooled(length: dict, space: str, other: str) -> tuple[float, tuple[float, float]]:
    """``other`` minus the searched factors averaged over the seeds, per held-out sample, with its 95% interval."""
    mean = np.mean([run["losses"] for run in length["runs"] if run["space"] == space], axis=0)
    return paired_interval(length["formula_losses"][other], mean)


def summary(lengths: list[dict]) -> str:
    lines = ["# Search over five seeds, free and LongRoPE2 forms, on held-out needle kinds (tiny model)", ""]
    lines += [f"Command: `{COMMAND}`", ""]
    for length in lengths:
        sizes = length["sizes"]
        lines += [
            f"## {length['multiple']}x ({length['target_length']:,} tokens)",
            "",
            f"{sizes['evaluations']} candidates per search (population {sizes['population']}), "
            f"{sizes['search_samples']} search samples and windows per seed; {length['heldout_samples']} held-out "
            f"samples of {', '.join(length['kinds'])}. Loss: nats per answer token, lower is better; differences are "
            "the row minus the searched factors (above 0: the search is better), bootstrap 95%. 1x ppl: the "
            f"perplexity change at L0 on the held-out windows against the model without scaling; the search allows "
            f"{length['short_tolerance']:.0%} in all, and longrope's attention factor alone costs "
            f"{length['short_floor']:+.1%} there. Searches took {sum(run['seconds'] for run in length['runs']):.0f} s "
            "in all.",
            "",
            "| form | seed | critical pair (theory "
            f"{length['theory_critical_pair']}) | NTK base | held-out loss | 1x ppl | yarn − searched | best seed − "
            "searched | held-out winner |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- | --- | --- |",
        ]
        for run in length["runs"]:
            rows = run["table"]["rows"]
            seeds = [name for name in rows if name.startswith("longrope[")]
            cells = []
            for name in ("yarn", seeds[0]):
                paired = rows[name]["minus_searched"]
                low, high = paired["ci95"]
                cells.append(f"{name}: {paired['difference']:+.3f} [{low:+.3f}, {high:+.3f}]")
            base = "" if run["ntk_base"] is None else f"{run['ntk_base']:,.0f}"
            lines.append(
                f"| {run['space']} | {run['seed']} | {run['critical_pair']} | {base} | {rows[SEARCHED]['loss']:.3f} | "
                f"{rows[SEARCHED]['short_change']:+.1%} | {cells[0]} | {cells[1]} | {run['table']['winner']} |"
            )
        lines += ["", "Formulas on the same held-out samples (once):", "", "| row | held-out loss | 1x ppl |"]
        lines += ["| --- | ---: | ---: |"]
        table = length["runs"][0]["table"]["rows"]
        for name, row in table.items():
            if name != SEARCHED:
                lines.append(f"| {name} | {row['loss']:.3f} | {row['short_change']:+.1%} |")
        lines += ["", "Seeds pooled (the searched losses averaged over the five seeds, per sample):", ""]
        best_seed = min(
            (n for n in length["formula_losses"] if n.startswith("longrope[")),
            key=lambda n: float(np.mean(length["formula_losses"][n])),
        )
        for space in SPACES[length["multiple"]]:
            for other in ("yarn", best_seed, "shipped"):
                difference, (low, high) = pooled(length, space, other)
                lines.append(f"- {space}: {other} − searched {difference:+.3f} [{low:+.3f}, {high:+.3f}]")
            runs = [run for run in length["runs"] if run["space"] == space]
            pairs = [run["critical_pair"] for run in runs]
            lines.append(f"- {space}: critical pairs found {pairs} (theory {length['theory_critical_pair']})")
            changes = ", ".join(f"{run['table']['rows'][SEARCHED]['short_change']:+.1%}" for run in runs)
            lines.append(
                f"- {space}: 1x change of the written factors, seeds {[run['seed'] for run in runs]}: {changes}"
            )
        lines.append("")
    return "\n".join(lines) + "\n"


def stored_lengths() -> dict[int, dict]:
    """The lengths rows.json holds (none when there is no file)."""
    path = HERE / "rows.json"
    if not path.exists():
        return {}
    return {length["multiple"]: length for length in json.loads(path.read_text())["lengths"]}


def main(multiples: tuple[int, ...]) -> None:
    lengths = stored_lengths()

    def save(length: dict) -> None:
        lengths[length["multiple"]] = length
        ordered = [lengths[m] for m in sorted(lengths)]
        (HERE / "rows.json").write_text(json.dumps({"command": COMMAND, "lengths": ordered}, indent=1) + "\n")

    for multiple in multiples:
        known = lengths.get(multiple, {})
        same = all(known.get(key) == value for key, value in settings(multiple).items())
        save(one_length(multiple, known.get("runs", []) if same else [], save))
    (HERE / "summary.md").write_text(summary([lengths[m] for m in sorted(lengths)]))


if __name__ == "__main__":
    main(tuple(int(arg) for arg in sys.argv[1:]) or tuple(SPACES))
