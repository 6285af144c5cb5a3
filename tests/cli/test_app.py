"""The command table: every command has help text; importing ropekit stays light."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import COMMANDS, GROUPS, app

runner = CliRunner()


def test_help_lists_every_command():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    for name in [*COMMANDS, *GROUPS]:
        assert name in result.output


@pytest.mark.parametrize("name", [*COMMANDS, *GROUPS])
def test_each_command_has_help(name):
    result = runner.invoke(app, [name, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


def test_import_ropekit_does_not_import_heavy_optional_packages():
    code = "import sys, ropekit; print(sorted(m for m in ('matplotlib', 'transformers', 'torch') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_frequencies_command_json_matches_the_registry():
    import json

    from ropekit import RopeConfig, frequencies
    from ropekit.scaling import YarnScaling

    result = runner.invoke(
        app,
        ["frequencies", "--head-dim", "16", "--scaling", "yarn", "--factor", "4", "--original-length", "1k", "--json"],
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    expected = frequencies(RopeConfig(16, scaling=YarnScaling(factor=4, original_max_position_embeddings=1024)))
    assert data["inv_freq"] == pytest.approx(expected.inv_freq.tolist(), rel=1e-12)
    assert data["attention_factor"] == pytest.approx(expected.attention_factor)


def test_bad_scaling_name_is_a_clear_error():
    result = runner.invoke(app, ["frequencies", "--scaling", "rope9000"])
    assert result.exit_code == 2
    assert "unknown rope_type 'rope9000'" in result.output
