"""``ropekit search`` on the bundled tiny model at 4×: seconds per candidate, what a search of N candidates costs,
and the cost of a candidate over the batched forward it is made of (the search's own overhead: setting the scaling,
the operators, the journal).

One run, in this order: load the model and build the samples (untimed), one bare batched forward of the search
samples with the model's plain RoPE (the floor), then a search of ``--evaluations`` candidates with a journal in a
temporary folder, then the best candidate and YaRN (as its own method) on the held-out samples. Printed as JSON.

Usage::

    nice -n 10 python benchmarks/bench_search.py                       # 32 candidates, 16 samples of 1,024 tokens
    python benchmarks/bench_search.py --evaluations 96 --samples 24
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--evaluations", type=int, default=32)
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--heldout-samples", type=int, default=32)
    parser.add_argument("--multiple", type=float, default=4.0)
    args = parser.parse_args()

    from ropekit.search.objective import answer_losses, needle_loss
    from ropekit.search.request import SearchRequest
    from ropekit.search.run import execute, formula_scores, prepare, score

    request = SearchRequest(
        target_multiple=args.multiple,
        evaluations=args.evaluations,
        samples=args.samples,
        heldout_samples=args.heldout_samples,
    )
    prepared = prepare(request)
    needle_loss(prepared.model, prepared.search, None)  # warm-up
    floors = []
    for _ in range(3):
        start = time.perf_counter()
        answer_losses(prepared.model, prepared.search)
        floors.append(time.perf_counter() - start)
    floor = statistics.median(floors)
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        trace, _ = execute(prepared, args.evaluations, journal_path=Path(folder) / "journal.jsonl")
        searched = time.perf_counter() - start
    best, best_score = trace.best
    formulas = formula_scores(prepared)
    per_candidate = searched / len(trace.scored)
    print(
        json.dumps(
            {
                "target_length": prepared.target_length,
                "samples": args.samples,
                "evaluations": len(trace.scored),
                "search_seconds": round(searched, 2),
                "seconds_per_candidate": round(per_candidate, 3),
                "bare_forward_seconds": round(floor, 3),
                "candidate_over_forward": round(per_candidate / floor, 3),
                "candidates_in_10_minutes": int(600 / per_candidate),
                "best_search": best_score,
                "best_heldout": score(prepared, best, prepared.heldout),
                "yarn": formulas["yarn"],
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
