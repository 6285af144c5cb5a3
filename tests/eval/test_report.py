"""The report writer: the plain-words summary against hand-built rows, the theory view against closed forms, and
a report on a tiny random checkpoint whose index.html must reference existing, non-blank PNGs."""

from __future__ import annotations

import json
import math
import re
from html import escape as html_escape
from pathlib import Path

import numpy as np
import pytest

from ropekit.eval.loader import load_eval_model
from ropekit.eval.report import perplexity_matrix, summary_lines, theory_view, write_sweep_report
from ropekit.eval.sweep import SweepResult, SweepSettings, run_sweep

TRAIN_LENGTH = 128  # of the conftest's tiny_checkpoint

SETTINGS = SweepSettings(
    methods=("none", "linear", "yarn"),
    multiples=(1, 2),
    passkey_multiples=(1, 2),
    depths=(0.0, 1.0),
    trials=2,
    max_tokens=256,
)


def ppl_rows(values: dict[tuple[str, int], float]) -> list[dict]:
    return [{"method": m, "length": n, "perplexity": v, "beyond": v} for (m, n), v in values.items()]


def test_summary_names_the_best_method_and_by_how_much() -> None:
    result = SweepResult(
        context={},
        perplexity=ppl_rows({("none", 100): 3.0, ("yarn", 100): 3.3, ("none", 800): 40.0, ("yarn", 800): 5.0}),
        passkey=[
            {"method": "yarn", "length": 100, "accuracy": 1.0},
            {"method": "yarn", "length": 100, "accuracy": 0.5},
            {"method": "yarn", "length": 800, "accuracy": 0.0},
        ],
    )
    lines = summary_lines(result, 100)
    assert (
        lines[0]
        == "At 100 tokens (1× the training length) none is best with perplexity 3.00; next best 3.30 (1.10× worse)."
    )
    assert lines[1] == (
        "At 800 tokens (8× the training length) yarn is best with perplexity 5.00, 8.0× lower than no scaling "
        "(40.00); next best 40.00 (8.00× worse)."
    )
    assert lines[2] == "Passkey accuracy with yarn by length — 100: 75%, 800: 0%."


def test_perplexity_matrix_pivots_methods_by_length() -> None:
    cols, rows = perplexity_matrix(ppl_rows({("none", 64): 3.0, ("yarn", 128): 4.0, ("none", 128): 9.0}))
    assert cols == ["method", "64", "128"]
    assert rows == [{"method": "none", "64": 3.0, "128": 9.0}, {"method": "yarn", "128": 4.0}]


def test_theory_view_against_closed_forms(tiny_checkpoint: Path) -> None:
    model = load_eval_model(tiny_checkpoint)
    view = theory_view(model, [TRAIN_LENGTH, 4 * TRAIN_LENGTH])
    d, base = 16, 10000.0
    wavelengths = 2 * math.pi * base ** (np.arange(0, d, 2) / d)
    assert view["wavelengths"] == pytest.approx(wavelengths.tolist(), rel=1e-12)
    assert view["rotary_dim"] == d and view["base"] == base and view["train_length"] == TRAIN_LENGTH
    # pairs whose period fits in the training length: 2π·b^(2i/d) <= T
    assert view["pairs_completing_a_period"] == sum(2 * math.pi * base ** (2 * i / d) <= TRAIN_LENGTH for i in range(8))
    # Liu et al. (arXiv 2310.05209): d_extra = 2⌈(d/2)·log_b(T/2π)⌉, i.e. twice the pairs that complete a period
    assert view["critical_dimension"] == 2 * view["pairs_completing_a_period"]
    assert view["extrapolation_limit"] == pytest.approx(2 * math.pi * base ** (view["critical_dimension"] / d))
    assert [row["length"] for row in view["bound_rows"]] == [TRAIN_LENGTH, 4 * TRAIN_LENGTH]
    for row in view["bound_rows"]:
        assert row["base_clears_bound"] == (base >= row["robust_base"])
        # feasibility by direct summation: B_m(base) >= 0 for every m < length (Men et al., eq. 8)
        m = np.arange(row["length"], dtype=np.float64)
        direct = np.cos(np.outer(m, base ** (-np.arange(0, d, 2) / d))).sum(axis=1)
        assert row["base_feasible"] == bool((direct >= -1e-9).all())


@pytest.fixture(scope="module")
def report(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = load_eval_model(tiny_checkpoint)
    result = run_sweep(model, SETTINGS)
    return write_sweep_report(model, SETTINGS, result, tmp_path_factory.mktemp("report"), elapsed_s=1.0)


def image_sources(index: Path) -> list[str]:
    return re.findall(r"<img src='([^']+)'", index.read_text())


def test_report_references_existing_non_blank_pngs(report: Path) -> None:
    from PIL import Image

    sources = image_sources(report)
    assert sorted(sources) == ["passkey.png", "perplexity.png", "wavelengths.png"]
    for source in sources:
        path = report.parent / source
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        with Image.open(path) as image:
            pixels = np.asarray(image.convert("L"), dtype=np.float64)
        assert min(pixels.shape) > 100
        # a plot: mostly white background, but a good share of drawn (non-white) pixels
        assert 0.02 < (pixels < 200).mean() < 0.9, source


def test_report_folder_is_self_contained(report: Path) -> None:
    folder = report.parent
    html = report.read_text()
    for link in re.findall(r"(?:href|src)='([^']+)'", html):
        assert not link.startswith(("http:", "https:", "/")), link
        assert (folder / link).is_file(), link
    results = json.loads((folder / "results.json").read_text())
    assert {r["method"] for r in results["perplexity"]} == {"none", "linear", "yarn"}
    summary = json.loads((folder / "summary.json").read_text())
    assert len(summary["findings"]) == 2 + 3  # one line per length, one per method's passkey row
    for line in summary["findings"]:
        assert html_escape(line) in html


def test_report_tables_show_every_method_and_length(report: Path) -> None:
    html = report.read_text()
    for method in SETTINGS.methods:
        assert f"<td>{method}</td>" in html
    for length in (TRAIN_LENGTH, 2 * TRAIN_LENGTH):
        assert f"<th>{length}</th>" in html
