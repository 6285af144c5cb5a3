"""The table of MLX-LM model files that read no RoPE scaling, derived again from the installed mlx_lm's own files:
a file that builds a RoPE (``nn.RoPE``, ``initialize_rope``) and mentions no ``rope_scaling``/``rope_parameters``/
``scaling_config`` outside its dataclass field reads none."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from ropekit.integrations.hf.legacy_keys import older_reader_gaps
from ropekit.integrations.hf.mlx_lm_scaling import NO_SCALING_FILES, mlx_scaling_gap

FIELD = re.compile(r"^\s{4}(rope_scaling|rope_parameters)\s*:")


def _reads_no_scaling(path: Path) -> bool | None:
    text = path.read_text()
    if not re.search(r"nn\.RoPE|initialize_rope|RoPE\(", text):
        return None  # no RoPE of its own
    lines = [line for line in text.splitlines() if not FIELD.match(line)]
    return not any(re.search(r"rope_scaling|rope_parameters|scaling_config", line) for line in lines)


def test_table_matches_the_installed_mlx_lm_files() -> None:
    spec = importlib.util.find_spec("mlx_lm")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("needs mlx-lm")
    import mlx_lm

    if mlx_lm.__version__ != "0.32.2":
        pytest.skip(f"the table is of mlx-lm 0.32.2, installed {mlx_lm.__version__}")
    models = Path(next(iter(spec.submodule_search_locations))) / "models"
    derived = {path.stem for path in models.glob("*.py") if _reads_no_scaling(path)}
    assert derived == set(NO_SCALING_FILES)


def test_a_scaled_config_of_such_a_file_is_a_gap_and_a_plain_one_is_not() -> None:
    scaled = {"model_type": "stablelm", "rope_scaling": {"type": "linear", "factor": 4.0}}
    assert "stablelm.py reads no rope_scaling" in mlx_scaling_gap(scaled)
    assert older_reader_gaps(scaled) == [mlx_scaling_gap(scaled)]
    assert mlx_scaling_gap({"model_type": "stablelm", "rope_scaling": None, "rope_theta": 5e5}) is None
    assert mlx_scaling_gap({"model_type": "llama", "rope_scaling": {"type": "linear", "factor": 4.0}}) is None
    assert "minimax.py" in mlx_scaling_gap({"model_type": "minimax_m2", "rope_parameters": {"rope_type": "yarn"}})
