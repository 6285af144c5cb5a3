"""The searched factors beside the theory (inspect, plan, plot on a search): columns against closed forms."""

from __future__ import annotations

import json
import math

import pytest

from helpers.cli import run
from ropekit.search.compare import factor_rows

S, D, BASE = 4.0, 32, 10000.0
SEARCH = {
    "model": "tiny",
    "rope": {"head_dim": D, "rotary_dim": D, "base": BASE},
    "original_length": 256,
    "target_length": 1024,
    "factor": S,
    "long_factor": [1.0 + 0.25 * i for i in range(16)],
    "short_factor": [1.0 + 0.25 * i for i in range(16)],
    "critical_pair": {"found": 6, "theory": 7},
}


def test_rows_against_closed_forms():
    rows = factor_rows(SEARCH)
    assert [row["searched"] for row in rows] == SEARCH["long_factor"]
    for i, row in enumerate(rows):
        assert math.isclose(row["wavelength"], 2 * math.pi * BASE ** (2 * i / D), rel_tol=1e-12)
        assert math.isclose(row["ntk"], S ** (2 * i / (D - 2)), rel_tol=1e-6)  # NTK: base·s^(d/(d-2))
        assert 1.0 <= row["yarn"] <= S
    assert [row["mark"] for row in rows if row["mark"]] == ["found", "theory"]


def test_inspect_plan_and_plot_on_a_search_folder(tmp_path):
    (tmp_path / "search.json").write_text(json.dumps(SEARCH))
    shown = run("inspect", "--model", tmp_path)
    assert shown.exit_code == 0, shown.output
    assert "critical pair found 6, theory 7" in shown.stdout
    line = next(line for line in shown.stdout.splitlines() if line.split()[:1] == ["6"])
    assert line.split()[2] == "2.5000" and line.split()[-1] == "found"
    as_json = json.loads(run("plan", "--model", tmp_path, "--target-length", "1k", "--json").stdout)
    assert [row["searched"] for row in as_json["searched"]] == SEARCH["long_factor"]
    pytest.importorskip("matplotlib")
    figure = tmp_path / "factors.png"
    assert run("plot", "searched", "--search", tmp_path, "-o", figure).exit_code == 0
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
