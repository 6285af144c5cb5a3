"""The GGUF side of the CLI: ``extend``'s output kind, its GGUF summary and flags, and ``plan``'s llama.cpp flags.

Oracles: the written file read back with the ``gguf`` package, and llama.cpp's flag names (``common/arg.cpp``).
``extend`` end to end on the real SmolLM2 GGUF is in ``test_llamacpp.py`` (it reads the file through transformers,
about a minute).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from helpers.gguf_files import fields, write_source
from ropekit.cli.app import app
from ropekit.cli.extend_gguf import choose_format, extend_to_gguf
from ropekit.scaling import Llama3Scaling, YarnScaling

gguf = pytest.importorskip("gguf")


def test_the_output_kind_follows_the_suffix_or_format(tmp_path: Path) -> None:
    model = tmp_path / "in.gguf"
    assert choose_format(tmp_path / "out.gguf", model, None) == "gguf"
    assert choose_format(tmp_path / "out", model, None) == "folder"
    assert choose_format(tmp_path / "out", model, "gguf") == "gguf"
    with pytest.raises(typer.Exit):
        choose_format(tmp_path / "out.gguf", tmp_path / "folder", None)  # GGUF out copies a GGUF file's tensors
    with pytest.raises(typer.Exit):
        choose_format(tmp_path / "out", model, "onnx")


def test_gguf_out_prints_the_form_and_the_equivalent_flags(tmp_path: Path, capsys) -> None:
    source = write_source(tmp_path / "in.gguf")
    spec = YarnScaling(factor=2.0, original_max_position_embeddings=512)
    options = {"target": None, "layer_types": None, "force": False, "note": None}
    extend_to_gguf(source, spec, tmp_path / "out.gguf", json_output=True, **options)
    summary = json.loads(capsys.readouterr().out)
    assert summary["rope"]["scaling_type"] == "yarn" and summary["context_length"] == 1024
    assert summary["llamacpp_flags"][:6] == [
        "--rope-scaling",
        "yarn",
        "--rope-freq-base",
        "100000",
        "--rope-scale",
        "2",
    ]
    assert fields(tmp_path / "out.gguf")["llama.rope.scaling.type"] == "yarn"
    llama3 = Llama3Scaling(factor=2.0, original_max_position_embeddings=512, low_freq_factor=1.0, high_freq_factor=4.0)
    extend_to_gguf(source, llama3, tmp_path / "l3.gguf", json_output=False, **options)
    text = capsys.readouterr().out
    assert "with rope_freqs" in text and "no llama.cpp flags" in text
    with pytest.raises(typer.Exit):  # exists, no --force: one line, exit 2
        extend_to_gguf(source, llama3, tmp_path / "l3.gguf", json_output=False, **options)
    assert "--force" in capsys.readouterr().err


def test_plan_prints_llamacpp_flags_per_method() -> None:
    result = CliRunner().invoke(
        app,
        ["plan", "--head-dim", "64", "--base", "100000", "--original-length", "8k", "--target-length", "16k", "--json"],
    )
    assert result.exit_code == 0, result.output
    flags = json.loads(result.output)["llamacpp_flags"]
    assert flags["linear"] == ["--rope-scaling", "linear", "--rope-freq-base", "100000", "--rope-scale", "2"]
    assert flags["yarn"][:2] == ["--rope-scaling", "yarn"] and "--yarn-orig-ctx" in flags["yarn"]
    assert flags["llama3"] is None  # per-pair factors: no flag sets them
