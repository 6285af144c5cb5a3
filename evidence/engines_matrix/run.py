"""Write docs/engines_matrix.md: ``python evidence/engines_matrix/run.py [--only a,b] [--engines ...] [--out PATH]``
(the whole matrix takes about an hour on 2 shared cores: run it niced in the background).

Each architecture's row is stored in ``rows.json`` beside this file as soon as it is measured, and the page is
written from every stored row, so a run can be stopped and resumed (``--skip-done``), and ``--only ARCH`` remeasures
one architecture without losing the others. ``findings.md`` beside this file is the page's hand-written reading of
the rows; the command that made each row is kept with it.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
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
    parser.add_argument("--out", default="docs/engines_matrix.md")
    parser.add_argument("--page-only", action="store_true", help="rewrite the page from rows.json, measuring nothing")
    args = parser.parse_args()
    if args.page_only:
        write_page(json.loads(ROWS.read_text()), Path(args.out))
        return
    import transformers

    transformers.logging.set_verbosity_error()
    stored = json.loads(ROWS.read_text()) if ROWS.is_file() else {}
    types = args.only.split(",") if args.only else rope_architectures() + shipped_rows()
    command = "python " + " ".join(sys.argv)
    for model_type in types:
        if args.skip_done and model_type in stored:
            continue
        row = measure(model_type, args.engines)
        stored[model_type] = {**asdict(row), "command": command}
        ROWS.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
        write_page(stored, Path(args.out))
        print(model_type, row.built, len(row.cells), flush=True)


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
        return Row(model_type, built=f"not measured: over {LIMIT} s on this machine")
    finally:
        signal.alarm(0)


if __name__ == "__main__":
    main()
