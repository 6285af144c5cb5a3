"""Every evaluation backend implements :class:`ropekit.eval.protocol.EvalModel`; the evaluations ask no model what it
has."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import ropekit.eval
from ropekit.attention.registry import get_attention
from ropekit.eval.hf_model import HFEvalModel
from ropekit.eval.models import TinyEvalModel
from ropekit.eval.protocol import AnswersAll, EvalModel
from ropekit.eval.tasks.decode import TinyDecoder


def test_the_evaluations_probe_no_model():
    root = Path(ropekit.eval.__file__).parent
    probing = re.compile(r"\b(hasattr|getattr)\((eval_)?model\b|\bmodel: Any\b")
    found = [
        f"{path.relative_to(root)}:{number}: {line.strip()}"
        for path in sorted(root.rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if probing.search(line)
    ]
    assert found == []


def test_every_backend_is_an_eval_model():
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel
    from ropekit.eval.backends.openai import OpenAIEvalModel

    for backend in (TinyEvalModel, HFEvalModel, LlamaCppEvalModel, OpenAIEvalModel):
        assert EvalModel in backend.__mro__, backend
    assert issubclass(OpenAIEvalModel, AnswersAll)
    assert not any(issubclass(b, AnswersAll) for b in (TinyEvalModel, HFEvalModel, LlamaCppEvalModel))


def test_the_tiny_model_declares_its_capabilities():
    model = TinyEvalModel("tiny")
    config = model.model.config
    assert isinstance(model, EvalModel) and not isinstance(model, AnswersAll)
    assert isinstance(model.decoder(), TinyDecoder)
    assert model.layer_sizes() == (config.d_model, config.ffn_dim)
    assert model.max_positions == config.max_positions and model.ran_as() == {}
    method = get_attention("self_extend")(group=2, window=8)
    assert model.set_attention(method) is None
    assert all(block.attn.method is method for block in model.model.blocks)
    model.set_attention(None)
    assert all(block.attn.method is None for block in model.model.blocks)


class Minimal(EvalModel):
    name = "minimal"


def test_the_protocol_defaults_refuse_what_a_backend_does_not_declare():
    model = Minimal()
    assert model.max_positions is None and model.ran_as() == {} and model.layer_sizes() is None
    assert model.set_attention(None) is None
    with pytest.raises(LookupError, match=r"minimal runs no attention method of ropekit's \(self_extend\)"):
        model.set_attention(get_attention("self_extend")(group=2, window=8))
    with pytest.raises(ValueError, match="minimal answers whole samples"):
        model.decoder()
