"""What transformers itself reads from a config dict (``transformers_reads``), against transformers' own loader."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from ropekit.integrations.hf.transformers_reads import read_config


def test_special_floats_are_read_as_transformers_reads_its_own_files(tmp_path) -> None:
    """transformers saves inf as {"__float__": "Infinity"} (Bamba's time_step_limit) and decodes it when it loads a
    folder; ``read_config`` on the file's dict loads the same config, where the plain dict was refused."""
    import transformers

    config = transformers.BambaConfig(time_step_limit=(0.0, float("inf")))
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert {"__float__": "Infinity"} in saved["time_step_limit"]
    loaded = read_config(saved)
    assert list(loaded.time_step_limit) == [0.0, float("inf")]
    assert list(transformers.AutoConfig.from_pretrained(tmp_path).time_step_limit) == [0.0, float("inf")]
