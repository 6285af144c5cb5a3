"""A warning during a command is one ``warning: ...`` line on stderr, not Python's ``path:line: UserWarning`` and a
line of source code; the filters are restored after the command."""

from __future__ import annotations

import json
import warnings

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app

pytest.importorskip("transformers")


def test_a_config_whose_keys_disagree_warns_in_one_line_each(llama_config, tmp_path) -> None:
    folder = tmp_path / "model"
    llama_config().save_pretrained(folder)
    config = json.loads((folder / "config.json").read_text())
    config["rope_parameters"] = {"rope_type": "default", "rope_theta": 10000.0}
    config["rope_scaling"] = {"rope_type": "linear", "factor": 2.0, "rope_theta": 10000.0}
    config["rope_theta"] = 20000.0
    (folder / "config.json").write_text(json.dumps(config))
    before = (warnings.showwarning, list(warnings.filters))
    result = CliRunner().invoke(app, ["plan", "--model", str(folder), "--target-length", "256"])
    assert result.exit_code == 0, result.output
    lines = [line for line in result.stderr.splitlines() if "warn" in line.lower()]
    assert lines == [
        "warning: config has both rope_scaling and rope_parameters, and they disagree on ['rope_type']; using "
        "rope_scaling (transformers reads `rope_scaling or rope_parameters`)",
        "warning: config has rope_theta=20000.0 at the top level and rope_theta=10000.0 in rope_scaling; using "
        "10000.0 from rope_scaling (transformers' rule)",
    ]
    assert (warnings.showwarning, list(warnings.filters)) == before
