"""Run inside the vLLM environment, where SGLang is installed beside vLLM: SGLang's own rotary module, as the
architecture's model class builds it, on the probe vectors.

Reads the same JSON requests as :mod:`ropekit.engines._vllm_probe` and answers each with one line: SGLang's version, its
model file for the architecture (the one whose ``EntryClass`` names it) and what that file passes to ``get_rope``
(:mod:`ropekit.engines.source_reader`), the module's ``mscale`` and, per served length, the table of A·cos, A·sin it
applies (the vLLM probe's ``rotated_tables``). SGLang's ``get_rope(head_size, rotary_dim, max_position, base,
is_neox_style, rope_scaling, dtype, partial_rotary_factor, dual_chunk_attention_config)`` takes the base apart and
``None`` for plain RoPE. An architecture no SGLang model file names answers ``"backend": "transformers"`` (SGLang's
Transformers fallback). Imports only SGLang, torch and the files beside this one (by their paths).
"""

import importlib.util
import logging
from pathlib import Path


def vllm_probe():
    """The vLLM probe script beside this file, by its path."""
    spec = importlib.util.spec_from_file_location("_vllm_probe", Path(__file__).with_name("_vllm_probe.py"))
    shared = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shared)
    return shared


def main() -> None:
    logging.disable(logging.WARNING)
    vllm_probe().serve(answer)


def answer(request: dict) -> dict:
    """SGLang's reply to one request (module docstring)."""
    from importlib.metadata import version

    shared = vllm_probe()
    reader = shared.shared("source_reader")
    reply = {"version": version("sglang")}
    models = Path(importlib.util.find_spec("sglang").origin).parent / "srt" / "models"
    path = reader.sglang_model_file(str(models), request["architecture"])
    if path is None:
        return {**reply, "backend": "transformers"}
    import torch
    from sglang.srt.layers.rotary_embedding import get_rope

    shared.forget(get_rope)
    facts = reader.follow(path, get_rope, "rope_scaling", "sglang.srt.models.")
    reply["model_file"] = "sglang/srt/models/" + Path(path).name
    reply.update({key: facts.get(key) for key in shared.FACT_KEYS})
    head, half = request["head_size"], request["rotary_dim"] // 2
    params = dict(request["rope_parameters"])
    base = params.pop("rope_theta")
    params.pop("partial_rotary_factor", None)  # the rotary width is given as rotary_dim
    scaling = None if params.get("rope_type", "default") == "default" else params
    neox, dual = request.get("is_neox_style", True), None
    if request.get("class_rule") != "ropekit" and facts["calls"]:
        neox = shared.class_pairing(facts, request.get("config") or {})
        reply["neox"] = neox
        scaling = scaling if facts["scaling"] else None
        dual = request.get("dual_chunk_attention_config") if facts["dual_chunk"] else None
    options = {"dual_chunk_attention_config": dual} if dual else {}
    try:
        rope = get_rope(head, 2 * half, request["max_position"], base, neox, scaling, torch.float32, **options)
        pairs = shared.read_interleaved(request, facts, neox)
        reply["tables"] = shared.rotated_tables(rope, head, half, pairs, request["served"])
    except Exception as error:  # the class refuses this configuration, or cannot be built here
        return shared.failed(reply, error)
    return shared.described(reply, rope)


if __name__ == "__main__":
    main()
