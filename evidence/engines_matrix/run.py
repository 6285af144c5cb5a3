"""Write docs/engines_matrix.md: ``python evidence/engines_matrix/run.py [--only a,b] [--engines ...] [--jobs N]
[--out PATH]`` (run it niced in the background; ``--jobs 2`` on 2 cores: the page gives the measured time).

Each architecture's row is stored in ``rows.json`` beside this file as soon as it is measured, and the page is
written from every stored row, so a run can be stopped and resumed (``--skip-done``), and ``--only ARCH`` remeasures
one architecture without losing the others. ``findings.md`` beside this file is the page's hand-written reading of
the rows; the command that made each row is kept with it.

With ``--jobs N`` the architectures are measured by N processes at once, each with its own engine probe processes
(a probe serves one process's requests in turn); this process alone writes the rows and the page. Each architecture
has :data:`LIMIT` seconds in its process; past them its row says so, and that process's probes are stopped (a reply
still on its way would otherwise answer the next architecture's request).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from matrix import Cell, Row, rope_architectures, run, shipped_rows
from page import full_table, summary

ROWS = Path(__file__).with_name("rows.json")
#: the full table (every cell's whole detail); the summary goes to ``--out``
FULL = Path(__file__).with_name("matrix.md")
#: seconds one architecture may take (build, six extensions, their comparisons) before its row says so
LIMIT = 600
FINDINGS = Path(__file__).with_name("findings.md")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--only",
        help="comma-separated rows: model types, or <model type>@shipped (default: every RoPE architecture, then "
        "every family of shipped.py)",
    )
    parser.add_argument("--engines", help="comma-separated engines (default: all)")
    parser.add_argument("--skip-done", action="store_true", help="leave architectures rows.json already holds")
    parser.add_argument(
        "--jobs", type=int, default=1, help="architectures measured at once, each in its own process (default 1)"
    )
    parser.add_argument("--out", default="docs/engines_matrix.md")
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from rows.json, measuring nothing")
    args = parser.parse_args()
    if args.page_only:
        write_page(json.loads(ROWS.read_text()), Path(args.out))
        return
    if args.jobs < 1:
        parser.error(f"--jobs {args.jobs}: give 1 or more processes")
    quiet()
    stored = json.loads(ROWS.read_text()) if ROWS.is_file() else {}
    types = args.only.split(",") if args.only else rope_architectures() + shipped_rows()
    command = "python " + " ".join(sys.argv)
    todo = [model_type for model_type in types if not (args.skip_done and model_type in stored)]
    for model_type, row, seconds in measured(todo, args.engines, args.jobs):
        stored[model_type] = {**asdict(row), "command": command}
        ROWS.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
        write_page(stored, Path(args.out))
        print(model_type, row.built, len(row.cells), f"{seconds:.0f} s", flush=True)


def quiet(threads: int | None = None) -> None:
    """transformers' log output silenced; torch on ``threads`` threads where given (one per process of ``--jobs``)."""
    import transformers

    transformers.logging.set_verbosity_error()
    if threads is not None:
        import torch

        torch.set_num_threads(threads)


def measured(types: list[str], engines: str | None, jobs: int) -> Iterator[tuple[str, Row, float]]:
    """``(model type, row, seconds)`` for each of ``types`` as it is measured: in this process (``jobs`` 1), else in
    ``jobs`` processes at once, in the order they finish."""
    if jobs == 1 or len(types) <= 1:
        for model_type in types:
            yield (model_type, *timed(model_type, engines))
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    context = multiprocessing.get_context("spawn")  # nothing of this process's torch threads or probe pipes
    with ProcessPoolExecutor(jobs, mp_context=context, initializer=quiet, initargs=(1,)) as pool:
        futures = {pool.submit(timed, model_type, engines): model_type for model_type in types}
        for future in as_completed(futures):
            yield (futures[future], *future.result())


def timed(model_type: str, engines: str | None) -> tuple[Row, float]:
    """``model_type``'s row (:func:`measure`) and the seconds it took."""
    start = time.monotonic()
    row = measure(model_type, engines)
    return row, time.monotonic() - start


def write_page(stored: dict, out: Path) -> None:
    """The summary of every stored row at ``out`` (with the commands that measured them and :data:`FINDINGS`),
    and the full table at :data:`FULL`."""
    rows = sorted((Row(e["arch"], e["built"], [Cell(**c) for c in e["cells"]]) for e in stored.values()), key=_key)
    commands = sorted({e["command"] for e in stored.values()})
    out.write_text(summary(rows, commands, FINDINGS.read_text()))
    FULL.write_text(full_table(rows, commands))


def _key(row: Row) -> str:
    return row.arch


class OverTime(BaseException):
    """An architecture past :data:`LIMIT` (a BaseException: no ``except Exception`` on the way turns it into a cell)."""


def measure(model_type: str, engines: str | None) -> Row:
    """``model_type``'s row, or one saying it took longer than :data:`LIMIT` here."""

    def alarm(*_: object) -> None:
        raise OverTime

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT)
    try:
        return run([model_type], engines)[0]
    except OverTime:
        from ropekit.engines import probe_worker

        probe_worker.close()  # a request still in flight: its reply must not answer the next architecture
        return Row(model_type, built=f"not measured: over {LIMIT} s on this machine")
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    main()
