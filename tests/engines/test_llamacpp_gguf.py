"""llama.cpp's row on SmolLM2's GGUF (``real``): a GGUF whose RoPE is not the folder's is reported as "differs"
(the verdict can fail), and ``ropekit engines`` on a GGUF dequantises it once."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.engines.compare import compare_folder, probe_for
from ropekit.scaling import LinearScaling, YarnScaling

pytestmark = [pytest.mark.slow, pytest.mark.real, pytest.mark.llamacpp, pytest.mark.hf]
L0 = 256


def test_a_gguf_with_another_rope_differs(smollm2_path, tmp_path) -> None:
    pytest.importorskip("llama_cpp")
    from ropekit.integrations.gguf.write_rope import extend_gguf
    from ropekit.integrations.hf.extend import extend

    plain = extend(smollm2_path, None, tmp_path / "source", original_length=L0).out
    yarn = YarnScaling(factor=4.0, original_max_position_embeddings=L0)
    folder = extend(plain, yarn, tmp_path / "yarn", target_length=4 * L0, original_length=L0).out
    wrong = extend_gguf(smollm2_path, LinearScaling(factor=4.0), tmp_path / "linear.gguf", target_length=4 * L0).out
    probe = probe_for(folder, logit_tokens=320)
    _, rows = compare_folder(folder, probe, engines=("llama.cpp",), gguf=wrong, source=(plain, smollm2_path))
    floor = rows[0].numbers["floor"]
    assert rows[0].verdict == "differs", rows[0].detail
    assert rows[0].numbers["logits_mean_diff"] > 3 * floor["logits_mean_diff"]  # far beyond the quantisation floor


def test_engines_dequantises_the_gguf_once(smollm2_path, monkeypatch) -> None:
    pytest.importorskip("llama_cpp")
    from ropekit.integrations.hf import extend as export

    calls = []
    load = export.load_model
    monkeypatch.setattr(export, "load_model", lambda *args, **kwargs: calls.append(args) or load(*args, **kwargs))
    args = ["engines", "--model", str(smollm2_path), "--scaling", "linear", "--factor", "4", "--original-length"]
    result = CliRunner().invoke(app, [*args, str(L0), "--logits", "32", "--engines", "llama.cpp", "--json"])
    assert result.exit_code == 0, result.output
    assert len(calls) == 1
    assert json.loads(result.stdout)["engines"][0]["numbers"]["floor"]  # the floor was measured on that one copy
