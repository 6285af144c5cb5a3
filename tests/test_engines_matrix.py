"""The conformance matrix script (evidence/engines_matrix): a fast subset here (Llama and Phi-3 through MLX-LM), the
whole list of RoPE architectures under ``-m slow``. The oracle: no cell is a raw traceback, and every refusal is one
line that names what it refuses."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "engines_matrix"))

import matrix

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]


def _check(rows) -> None:
    for row in rows:
        for cell in row.cells:
            assert cell.verdict != "TRACEBACK", (row.arch, cell)
            if cell.verdict == "refused":
                assert cell.detail and "\n" not in cell.detail


def test_fast_subset_has_no_traceback() -> None:
    rows = matrix.run(["phi3"], engines="MLX-LM")
    _check(rows)
    cells = {(cell.method, cell.engine): cell for cell in rows[0].cells}
    assert "Phi3Config" in cells[("dynamic", "extend")].detail  # refused by name, nothing written
    assert ("linear", "MLX-LM") in cells  # written in a form transformers loads, then compared


@pytest.mark.slow
def test_every_rope_architecture_has_no_traceback() -> None:
    _check(matrix.run(matrix.rope_architectures(), engines="MLX-LM"))
