"""Run inside the vLLM environment, where SGLang is installed beside vLLM: SGLang's own rotary module on the probe
vectors.

Reads the same JSON request as :mod:`ropekit.engines._vllm_probe` and prints one JSON line: SGLang's version, its
``mscale`` and, per served length, the table of A·cos, A·sin its module applies (the probe's ``rotated_tables``).
SGLang's ``get_rope(head_size, rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype)`` takes the base
apart and ``None`` for plain RoPE. Imports only SGLang, torch and the vLLM probe's table code (by its path: this
folder is not on ``sys.path``, where ``vllm.py`` would shadow vLLM).
"""

import importlib.util
import json
import logging
import sys
from pathlib import Path


def main() -> None:
    request = json.loads(sys.stdin.read())
    logging.disable(logging.WARNING)
    from importlib.metadata import version

    import torch
    from sglang.srt.layers.rotary_embedding import get_rope

    spec = importlib.util.spec_from_file_location("_vllm_probe", Path(__file__).with_name("_vllm_probe.py"))
    shared = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(shared)
    head, half = request["head_size"], request["rotary_dim"] // 2
    params = dict(request["rope_parameters"])
    base = params.pop("rope_theta")
    scaling = None if params.get("rope_type", "default") == "default" else params
    neox = request.get("is_neox_style", True)
    rope = get_rope(head, 2 * half, request["max_position"], base, neox, scaling, torch.float32)
    tables = shared.rotated_tables(rope, head, half, neox, request["served"])
    mscale = getattr(rope, "mscale", None)
    reply = {"version": version("sglang"), "mscale": None if mscale is None else float(mscale), "tables": tables}
    print(json.dumps(reply))


if __name__ == "__main__":
    main()
