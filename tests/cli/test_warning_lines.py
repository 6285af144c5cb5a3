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
    # transformers' own config class resolves the two dicts (rope_scaling wins: linear ×2), as ropekit now reads them;
    # the top-level rope_theta that disagrees with the resolved dict is the one warning left
    assert lines == [
        "warning: config has rope_theta=20000.0 at the top level and rope_theta=10000.0 in rope_parameters; using "
        "10000.0 from rope_parameters (transformers' rule)",
    ]
    assert (warnings.showwarning, list(warnings.filters)) == before
