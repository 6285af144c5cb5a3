"""Run inside the vLLM environment (not ropekit's): vLLM's own rotary module on the probe vectors.

Reads a JSON request on stdin (``head_size``, ``rotary_dim``, ``max_position``, ``rope_parameters``,
``is_neox_style``, ``served``: served length → positions) and prints one JSON line: vLLM's version, its ``mscale`` and, per served length, the
``(positions, rotary_dim/2, 2)`` table of A·cos, A·sin that ``forward_native`` applies. Imports only vLLM and torch.
"""

import json
import logging
import os
import sys
import types


def main() -> None:
    request = json.loads(sys.stdin.read())
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.disable(logging.WARNING)
    import torch
    import vllm
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    head, half = request["head_size"], request["rotary_dim"] // 2
    config = VllmConfig(device_config=DeviceConfig(device="cpu"))
    # the served --max-model-len, the one model_config field vLLM's rotary classes read (LongRoPE's list choice);
    # a full ModelConfig would load the model's files
    object.__setattr__(config, "model_config", types.SimpleNamespace(max_model_len=request["max_position"]))
    with set_current_vllm_config(config):
        neox = request.get("is_neox_style", True)
        rope = get_rope(head, request["max_position"], neox, request["rope_parameters"], torch.float32)
        tables = rotated_tables(rope, head, half, neox, request["served"])
    mscale = getattr(rope, "mscale", None)
    reply = {"version": vllm.__version__, "mscale": None if mscale is None else float(mscale), "tables": tables}
    print(json.dumps(reply))


def rotated_tables(rope, head: int, half: int, neox: bool, served: dict) -> dict:
    """Per served length, the ``(positions, half, 2)`` table of A·cos, A·sin that ``rope`` applies to a unit vector
    (``forward_native`` where the class has it, else ``forward``; SGLang's probe shares this)."""
    import torch

    tables = {}
    for length, positions in served.items():
        index = torch.tensor(positions, dtype=torch.long)
        forward = getattr(rope, "forward_native", None)
        # (tokens, heads, head size) for forward_native (DeepSeek's broadcasts over heads); LongRoPE has only
        # forward, which takes (tokens, heads · head size)
        shape = (len(positions), 1, head) if forward is not None else (len(positions), head)
        query = torch.zeros(*shape, dtype=torch.float32)
        if neox:
            query[..., :half] = 1.0  # the first of each pair (i, i + d/2)
        else:
            query[..., : 2 * half : 2] = 1.0  # the first of each pair (2i, 2i + 1)
        rotated, _ = (forward or rope.forward)(index, query.clone(), query.clone())
        rotated = rotated.reshape(len(positions), head).double()
        if not neox:  # to the half-split layout: cos at 2i, sin at 2i + 1
            rotated = torch.cat([rotated[:, 0 : 2 * half : 2], rotated[:, 1 : 2 * half : 2]], dim=-1)
        tables[length] = torch.stack([rotated[:, :half], rotated[:, half : 2 * half]], dim=-1).tolist()
    return tables


if __name__ == "__main__":
    main()
