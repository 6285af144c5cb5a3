"""Run inside the vLLM environment (not ropekit's): vLLM's own rotary module on the probe vectors.

Reads a JSON request on stdin (``head_size``, ``rotary_dim``, ``max_position``, ``rope_parameters``, ``served``:
served length → positions) and prints one JSON line: vLLM's version, its ``mscale`` and, per served length, the
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
        rope = get_rope(head, request["max_position"], True, request["rope_parameters"], torch.float32)
        tables = {}
        for served, positions in request["served"].items():
            index = torch.tensor(positions, dtype=torch.long)
            query = torch.zeros(len(positions), head, dtype=torch.float32)
            query[:, :half] = 1.0
            forward = getattr(rope, "forward_native", None) or rope.forward  # LongRoPE has only forward
            rotated, _ = forward(index, query.clone(), query.clone())
            rotated = rotated.reshape(len(positions), head).double()
            tables[served] = torch.stack([rotated[:, :half], rotated[:, half : 2 * half]], dim=-1).tolist()
    mscale = getattr(rope, "mscale", None)
    reply = {"version": vllm.__version__, "mscale": None if mscale is None else float(mscale), "tables": tables}
    print(json.dumps(reply))


if __name__ == "__main__":
    main()
