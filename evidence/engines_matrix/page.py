"""The matrix's two pages, written from its rows: the summary a person reads (``docs/engines_matrix.md``:
architecture × engine, every verdict other than "same" with its reason, each reason written once) and the full
table (``evidence/engines_matrix/matrix.md``: architecture × method × engine → verdict and the whole detail).

A reason is a row's detail without its measured numbers (the largest difference, the first position it shows,
frequencies measured to several digits, written "…", the temporary folder it was made in), with the engine's model
file written ``{file}``, the architecture's own name ``{arch}`` and the method's, where the reason names the method it
does not run or quotes it, ``{method}``: "MLX-LM cannot load this checkpoint: Model type {arch} not supported." is
one reason for every architecture it applies to.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from matrix import FACTOR, METHODS, Cell, Row

#: the summary's columns: what refused before any engine ran (``extend``, ``engines``), then each engine
COLUMNS = ("ropekit", "MLX-LM", "llama.cpp", "vLLM", "SGLang", "Ollama")
#: each column's letter in the reason labels (V3: the third reason of vLLM's column)
LETTERS = {"ropekit": "R", "MLX-LM": "M", "llama.cpp": "L", "vLLM": "V", "SGLang": "S", "Ollama": "O"}
#: the longest reason the summary prints (the full text is in the full table); reasons alike up to there are one
REASON_CHARS = 160


@dataclass(frozen=True)
class Keyed:
    """One cell with its column and its reason (``""`` for "same")."""

    arch: str
    cell: Cell
    column: str
    reason: str


def column_of(cell: Cell) -> str:
    return "ropekit" if cell.engine in ("extend", "engines") else cell.engine


def verdict_of(cell: Cell) -> str:
    """The cell's verdict, "same" through an engine's Transformers backend told apart, an ``extend``/``engines``
    refusal named by the command."""
    if cell.verdict == "same" and "Transformers backend" in cell.detail:
        return "backend"
    if cell.engine in ("extend", "engines"):
        return f"{cell.engine} {cell.verdict}"
    return cell.verdict


def reason_of(arch: str, cell: Cell) -> str:
    """The cell's reason (module docstring); ``""`` for "same"."""
    if cell.verdict == "same":
        return ""
    text = cell.detail
    if cell.verdict == "differs" and "why: " in text:
        text = text.split("why: ", 1)[1]
    text = re.sub(r"; measured: .*$", "", text)
    text = re.sub(r" \(rotary module of [^)]*\)$", "", text)
    text = re.sub(r"/tmp/[^\s)']*", "<folder>", text)
    text = re.sub(r"\b(?:vllm|sglang|mlx_lm)/[\w/]+\.py\b", "{file}", text)  # one reason for every engine file
    text = re.sub(r"(?<![\w.])\d+\.\d{3,}(?:e-?\d+)?(?![\w.])|(?<![\w.])\d(?:\.\d+)?e-?\d+(?![\w.])", "…", text)
    text = re.sub(r"(?<![\w.-])" + re.escape(arch) + r"(?![\w-])", "{arch}", text)
    if cell.method != "none":  # "plain RoPE, not yarn", "no linear on a sliding layer": one reason for every method
        text = re.sub(r"\b(not|no) " + re.escape(cell.method) + r"\b", r"\1 {method}", text)
        text = re.sub(r"(?<=\W)(['`])" + re.escape(cell.method) + r"\1", r"\1{method}\1", text)
        text = re.sub(r"\b" + re.escape(cell.method) + r" turns by\b", "{method} turns by", text)
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1] + "…"


def keyed(rows: Iterable[Row]) -> list[Keyed]:
    return [Keyed(row.arch, cell, column_of(cell), reason_of(row.arch, cell)) for row in rows for cell in row.cells]


def labels(cells: list[Keyed]) -> dict[tuple[str, str, str], str]:
    """``(column, verdict, reason)`` → its label (V3), numbered per column from the most frequent reason on."""
    counts: dict[tuple[str, str, str], int] = {}
    for k in cells:
        if k.reason or verdict_of(k.cell) != k.cell.verdict:
            key = (k.column, verdict_of(k.cell), k.reason)
            counts[key] = counts.get(key, 0) + 1
    named: dict[tuple[str, str, str], str] = {}
    for column in COLUMNS:
        mine = sorted((key for key in counts if key[0] == column), key=lambda key: (-counts[key], key))
        for number, key in enumerate(mine, 1):
            named[key] = f"{LETTERS[column]}{number}"
    return named


def grid_cell(cells: list[Keyed], named: dict[tuple[str, str, str], str]) -> str:
    """One architecture's cells of one column: each verdict with its reason label, the most frequent one with how
    many methods it covers ("same ×4"), the others with their methods."""
    if not cells:
        return ""
    groups: dict[tuple[str, str], list[str]] = {}
    for k in cells:
        verdict = verdict_of(k.cell)
        label = named.get((k.column, verdict, k.reason), "")
        groups.setdefault((verdict, label), []).append(k.cell.method)
    largest = max(groups, key=lambda key: len(groups[key]))
    parts = []
    for (verdict, label), methods in sorted(groups.items(), key=lambda item: item[0] != largest):
        which = f"×{len(methods)}" if (verdict, label) == largest and len(methods) > 1 else ", ".join(methods)
        parts.append(f"{verdict} {which}" + (f" [{label}]" if label else ""))
    return "; ".join(parts)


def counts_line(cells: list[Keyed]) -> str:
    counts: dict[str, int] = {}
    for k in cells:
        counts[verdict_of(k.cell)] = counts.get(verdict_of(k.cell), 0) + 1
    return ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items(), key=lambda kv: -kv[1]))


def summary(rows: list[Row], commands: list[str], findings: str) -> str:
    """The summary page (module docstring)."""
    cells = keyed(rows)
    named = labels(cells)
    built = sum(row.built == "ok" for row in rows)
    lines = [
        "# The engines conformance matrix",
        "",
        f"{len(rows)} rows ({built} built): each causal-LM architecture of transformers' "
        "`MODEL_FOR_CAUSAL_LM_MAPPING_NAMES` whose config has RoPE, as a tiny random model of its config class's "
        "defaults (2 layers, hidden size 64, head size 16)"
        + (_SHIPPED if any(row.arch.endswith("@shipped") for row in rows) else "")
        + f". Each is extended with each method (factor {FACTOR}) by `ropekit extend`, then compared by "
        "`ropekit engines --logits 0` against the rotation transformers' own modeling code applies.",
        "",
        "This page is the summary: per architecture and engine, the verdicts over the six methods "
        f'({", ".join(METHODS)}), and every verdict other than "same" with a label for its reason, each reason '
        'written once below ("backend": the engine has no model class of its own for the architecture and '
        "serves it through its Transformers backend, which runs transformers' own RoPE code: same by "
        'construction; "×4": for four of the methods, the others named beside it). The whole detail of every cell is the full table, '
        "[evidence/engines_matrix/matrix.md](../evidence/engines_matrix/matrix.md), and the rows as data are "
        "[rows.json](../evidence/engines_matrix/rows.json).",
        "",
        "Made by: " + "; ".join(f"`{command}`" for command in commands),
        "",
        f"Counts (cells): {counts_line(cells)}",
        "",
        findings.strip(),
        "",
        "## Architecture × engine",
        "",
        "| architecture | " + " | ".join(COLUMNS) + " |",
        "|---|" + "---|" * len(COLUMNS),
    ]
    for row in rows:
        if row.built != "ok":
            lines.append(f"| {row.arch} | {_cell_text(row.built)} |" + " |" * (len(COLUMNS) - 1))
            continue
        mine = [k for k in cells if k.arch == row.arch]
        texts = [grid_cell([k for k in mine if k.column == column], named) for column in COLUMNS]
        lines.append(f"| {row.arch} | " + " | ".join(texts) + " |")
    lines += ["", "## The reasons", ""]
    lines += reason_lines(cells, named)
    return "\n".join(lines) + "\n"


#: what the summary says of the ``@shipped`` rows, where it has some
_SHIPPED = (
    ", and the 2026 families again with the RoPE keys, head sizes and layer kinds their released checkpoints ship "
    "(rows named `…@shipped`, keys and sources in [shipped.py](../evidence/engines_matrix/shipped.py); their first "
    "cell, `shipped`, compares the checkpoint as it ships, before any `extend`)"
)


def reason_lines(cells: list[Keyed], named: dict[tuple[str, str, str], str]) -> list[str]:
    """Each label with its verdict, how many cells and architectures it covers, and its reason."""
    covers: dict[tuple[str, str, str], set[str]] = {}
    counted: dict[tuple[str, str, str], int] = {}
    for k in cells:
        key = (k.column, verdict_of(k.cell), k.reason)
        covers.setdefault(key, set()).add(k.arch)
        counted[key] = counted.get(key, 0) + 1
    lines = []
    for column in COLUMNS:
        mine = sorted((key for key in named if key[0] == column), key=lambda key: int(named[key][1:]))
        if not mine:
            continue
        lines += [f"### {column}", ""]
        for key in mine:
            _, verdict, reason = key
            where = f"{counted[key]} cells, {len(covers[key])} architectures"
            lines.append(f"- **{named[key]}** {verdict} ({where}): {_cell_text(reason) or '(no detail)'}")
        lines.append("")
    return lines


def full_table(rows: list[Row], commands: list[str]) -> str:
    """The full table (module docstring)."""
    lines = [
        "# The engines conformance matrix: every cell",
        "",
        "Architecture × method × engine → verdict and its whole detail; the summary is "
        "[docs/engines_matrix.md](../../docs/engines_matrix.md).",
        "",
        "Made by: " + "; ".join(f"`{command}`" for command in commands),
        "",
        "| architecture | method | engine | verdict | detail |",
        "|---|---|---|---|---|",
    ]
    for row in rows:
        if row.built != "ok":
            lines.append(f"| {row.arch} | | | {_cell_text(row.built)} | |")
        for cell in row.cells:
            lines.append(f"| {row.arch} | {cell.method} | {cell.engine} | {cell.verdict} | {_cell_text(cell.detail)} |")
    return "\n".join(lines) + "\n"


def _cell_text(text: str) -> str:
    return " ".join(text.replace("|", "/").split())
