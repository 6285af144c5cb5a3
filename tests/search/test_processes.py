"""A search on several processes: each scores a share of every generation, and the result is the one process's.

Oracles: the same search in one plain process (no launcher, so accelerate is never imported), for the real launch
(two CPU processes joined by gloo, started as ``accelerate launch`` starts its workers by ``tests/eval/dp_worker.py``);
and for the loop itself, :func:`run_search` with two ranks played in turn in this process against the plain loop.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ropekit.config import RopeConfig
from ropekit.eval.parallel import dealt
from ropekit.search.evolve import SearchSettings, run_search
from ropekit.search.journal import Journal, read_journal
from ropekit.search.processes import refuse_device_map
from ropekit.search.space import Candidate, seed_candidates

FACTOR = 4.0
SEEDS = seed_candidates(RopeConfig(32, base=10000.0), 256, FACTOR)
ROOT = Path(__file__).resolve().parents[2]
WORKER = ROOT / "tests" / "eval" / "dp_worker.py"
#: a search with two generations (the six seeds, then four children, two per process) and a small final table
SEARCH = [
    "search", "--model", "tiny", "--target-length", "2x", "--evaluations", "10", "--population", "4", "--parents",
    "2", "--samples", "2", "--heldout-samples", "2", "--json",
]  # fmt: skip


def planted(candidate: Candidate) -> float:
    """A bowl in log-factor space (every factor near e^0.9) with a slope in the critical pair."""
    return float(sum((x - 0.9) ** 2 for x in candidate.log_factors) + 0.1 * candidate.critical_pair)


class PlayedRanks:
    """Two processes played in this one: ``map`` runs rank 0's share as the main process, then rank 1's as the
    other (``is_main`` false while it does), and returns every result in unit order, as a launch's gather does."""

    processes, rank = 2, 0

    def __init__(self) -> None:
        self.is_main = True
        self.scored_by: list[int] = []

    def _hand(self, costs: list[int], rank: int) -> list[int]:
        order, (base, extra) = dealt(costs, 2), divmod(len(costs), 2)
        start = rank * base + min(rank, extra)
        return sorted(order[start : start + base + (rank < extra)])

    def share(self, costs: list[int]) -> list[int]:
        return self._hand(costs, 0)

    def map(self, costs: list[int], run) -> list:
        results: list = [None] * len(costs)
        for rank in (0, 1):
            self.is_main = rank == 0
            hand = self._hand(costs, rank)
            for index, result in zip(hand, run(hand), strict=True):
                results[index] = result
                self.scored_by.append(rank)
        self.is_main = True
        return results


def test_two_ranks_give_the_one_process_trace_and_one_journal_line_per_candidate(tmp_path):
    settings = SearchSettings(evaluations=40, population=7, seed=3)
    alone = run_search(planted, SEEDS, settings, factor=FACTOR).to_list()
    ranks, calls, shown = PlayedRanks(), [], []
    journal = Journal(tmp_path / "journal.jsonl", {"settings": {"seed": 3}})
    journal.begin({"evaluations": 40})

    def scored(candidate):
        calls.append(candidate.key())
        return planted(candidate)

    progress = lambda done, best: shown.append((done, best))  # noqa: E731
    shared = run_search(scored, SEEDS, settings, factor=FACTOR, journal=journal, progress=progress, processes=ranks)
    assert shared.to_list() == alone
    assert len(calls) == len(set(calls)) == 40  # each candidate scored once, by one of the two
    assert ranks.scored_by.count(1) >= 15  # rank 1 scored its share of every generation
    _, entries, skipped = read_journal(tmp_path / "journal.jsonl")
    assert sorted(entries) == list(range(40)) and skipped == []  # the main process wrote every score, once
    assert [entries[i]["score"] for i in range(40)] == [row["score"] for row in alone]
    assert [done for done, _ in shown] == list(range(1, 41))  # the main process reported every score
    assert shown[-1][1] == min(row["score"] for row in alone)

    resumed = Journal(tmp_path / "journal.jsonl", {"settings": {"seed": 3}})  # read back by one process, as before
    again = run_search(lambda c: pytest.fail("scored again"), SEEDS, settings, factor=FACTOR, journal=resumed)
    assert again.to_list() == alone


def test_a_device_map_on_several_processes_is_refused_by_name():
    with pytest.raises(ValueError, match=r"device_map 'auto' spreads one model .* on 2 processes") as refused:
        refuse_device_map(PlayedRanks(), "auto")
    assert refused.value.argument == "device_map"
    refuse_device_map(PlayedRanks(), None)
    refuse_device_map(PlayedRanks(), "cuda")  # each process's own device


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK")}
    return {**env, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}


def _run(args: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(args, capture_output=True, text=True, timeout=600, check=False, env=_env())


@pytest.mark.distributed
def test_two_gloo_processes_find_what_one_process_finds(tmp_path):
    two = _run([sys.executable, str(WORKER), "--processes", "2", "--", *SEARCH, "--out", str(tmp_path / "two")])
    assert two.returncode == 0, two.stderr[-3000:]
    one = _run([sys.executable, "-m", "ropekit.cli", *SEARCH, "--out", str(tmp_path / "one")])
    assert one.returncode == 0, one.stderr[-3000:]
    assert "2 processes, each scoring a share of every generation; no device map" in two.stderr
    assert "1 process; no device map" in one.stderr

    alone, shared = json.loads(one.stdout), json.loads(two.stdout)  # the main process printed once
    assert shared["long_factor"] == alone["long_factor"]
    assert shared["critical_pair"] == alone["critical_pair"]
    assert [r["factors"] for r in shared["trace"]] == [r["factors"] for r in alone["trace"]]
    assert [r["score"] for r in shared["trace"]] == pytest.approx([r["score"] for r in alone["trace"]], rel=1e-6)
    assert shared["scores"] == pytest.approx(alone["scores"], rel=1e-6)
    assert shared["table"]["winner"] == alone["table"]["winner"]
    for key in ("loss", "accuracy", "short_change"):  # the final table's rows, measured in shares
        rows = [{name: row[key] for name, row in run["table"]["rows"].items()} for run in (shared, alone)]
        assert list(rows[0]) == list(rows[1]) and rows[0] == pytest.approx(rows[1], rel=1e-6)
    for method, row in alone["formulas"].items():  # each formula as its own method, measured in shares
        assert shared["formulas"][method] == pytest.approx(row, rel=1e-6)
    assert (shared["plan"]["processes"], alone["plan"]["processes"]) == (2, 1)
    assert json.loads((tmp_path / "two" / "search.json").read_text()) == shared

    written = {name: read_journal(tmp_path / name / "journal.jsonl")[1] for name in ("one", "two")}
    assert sorted(written["two"]) == list(range(10))  # one line per candidate, whichever process scored it
    assert [written["two"][i]["candidate"] for i in range(10)] == [written["one"][i]["candidate"] for i in range(10)]


@pytest.mark.parametrize(
    ("evaluations", "population", "seeds", "processes", "expected"),
    [
        (10, 4, 6, 2, 3 + 2),  # the six seeds in shares of 3, then four children in shares of 2
        (96, 16, 6, 1, 96),  # one process scores every candidate
        (96, 16, 6, 4, 4 * 6),  # six generations of 16, four each
        (21, 16, 6, 4, 4 + 2),  # generation 0 of 16, then the last 5 (two in the largest share)
        (3, 16, 6, 2, 2),  # a budget below the seeds
    ],
)
def test_the_plan_counts_candidates_in_shares(evaluations, population, seeds, processes, expected):
    """Oracle: the generations' sizes written out by hand, each share the ceiling of size / processes."""
    from ropekit.search.run import rounds

    assert rounds(evaluations, population, seeds, processes) == expected


@pytest.mark.distributed
def test_a_failure_in_one_process_stops_the_search_and_its_journal_resumes(tmp_path):
    """Process 1's first candidate raises: both stop, the main process prints that error on one line and writes no
    search.json; its journal holds the main process's own share of generation 0 (the units dealt round-robin:
    candidates 0, 2, 4), which a search in one process then takes instead of scoring again."""
    out = tmp_path / "out"
    worker = [sys.executable, str(WORKER), "--processes", "2", "--fail-rank", "1", "--fail-method", "search"]
    failed = _run([*worker, "--", *SEARCH, "--out", str(out)])
    assert failed.returncode == 2, failed.stderr[-3000:]
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert errors == ["error: search failed: rank 1 of 2: injected failure in rank 1"]
    assert failed.stdout == "" and not (out / "search.json").exists()
    _, kept, _ = read_journal(out / "journal.jsonl")
    assert sorted(kept) == [0, 2, 4]

    seeds = [arg if arg != "10" else "6" for arg in SEARCH]  # --evaluations 6: generation 0, the seeds
    resumed = _run([sys.executable, "-m", "ropekit.cli", *seeds, "--out", str(out)])
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resuming: 3 candidates already scored" in resumed.stderr
    trace = json.loads(resumed.stdout)["trace"]
    assert [trace[i]["score"] for i in (0, 2, 4)] == [kept[i]["score"] for i in (0, 2, 4)]
    assert sorted(read_journal(out / "journal.jsonl")[1]) == list(range(6))
