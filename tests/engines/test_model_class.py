"""What ropekit reads from an engine's model file (``source_reader``, the labelled fallback), checked against the files as installed: the
``is_neox_style``, the scaling and the dual-chunk config each one passes to its ``get_rope``."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ropekit.engines import sglang, vllm

pytestmark = [
    pytest.mark.slow,  # imports vLLM and SGLang (about 20 s)
    pytest.mark.skipif(sglang.version() is None, reason="needs vLLM and SGLang in the vLLM environment"),
]

ENGINES = Path(vllm.__file__).parent
#: engine → architecture → (model file, is_neox_style, passes the scaling, passes dual_chunk_attention_config,
#: permutes transformers' q/k weights at load)
EXPECTED = {
    "vllm": {
        "LlamaForCausalLM": ("llama.py", True, True, False, False),
        "Phi3ForCausalLM": ("llama.py", True, True, False, False),  # phi3.py's class extends Llama's
        "StableLmForCausalLM": ("stablelm.py", True, True, False, False),
        "Glm4ForCausalLM": ("glm4.py", False, True, False, False),
        "CohereForCausalLM": ("commandr.py", False, True, False, False),
        "Qwen2ForCausalLM": ("qwen2.py", True, True, True, False),
        "GPTNeoXForCausalLM": None,  # the Transformers backend
        "Llama4ForCausalLM": ("llama4.py", True, True, False, True),
        "Ernie4_5ForCausalLM": ("llama.py", False, True, False, False),  # ernie45.py sets is_neox_style = False
        "MistralForCausalLM": (
            "llama.py",
            True,
            True,
            False,
            False,
        ),  # its class extends Llama; mistral.py permutes only Mistral's own wq/wk
    },
    "sglang": {
        "LlamaForCausalLM": ("llama.py", True, True, False, False),
        "StableLmForCausalLM": ("stablelm.py", True, False, False, False),
        "Glm4ForCausalLM": ("glm4.py", False, True, True, False),
        "CohereForCausalLM": ("commandr.py", False, True, False, False),
        "Qwen2ForCausalLM": ("qwen2.py", True, True, True, False),
        "GPTNeoXForCausalLM": None,
        "Llama4ForCausalLM": ("llama4.py", True, True, False, False),  # only mllama4.py's class permutes
        "Ernie4_5_MoeForCausalLM": ("llama.py", True, True, False, False),  # ernie4.py builds Llama's attention
    },
}

SCRIPT = """
import importlib.util, json, sys
from pathlib import Path
here = Path(sys.argv[1])
def load(name):
    spec = importlib.util.spec_from_file_location(name, here / f"{name}.py")
    module = importlib.util.module_from_spec(spec); spec.loader.exec_module(module); return module
probe, reader = load("_vllm_probe"), load("source_reader")
from vllm.model_executor.layers.rotary_embedding import get_rope as vllm_rope
from sglang.srt.layers.rotary_embedding import get_rope as sglang_rope
models = Path(importlib.util.find_spec("sglang").origin).parent / "srt" / "models"
found = {"vllm": {}, "sglang": {}}
for arch in json.loads(sys.argv[2]):
    path = probe.model_file(arch)
    found["vllm"][arch] = path and probe.class_facts(path, vllm_rope)
    path = reader.sglang_model_file(str(models), arch)
    found["sglang"][arch] = path and reader.follow(path, sglang_rope, "rope_scaling", "sglang.srt.models.")
print(json.dumps(found))
"""


#: the pairing a class reads from the config, passed down or held in a local name: [key, default, negated]
NEOX_CONFIG = {
    ("sglang", "Ernie4_5_MoeForCausalLM"): ["rope_is_neox_style", False, False],
    ("sglang", "LlamaForCausalLM"): ["rope_is_neox_style", True, False],
    ("sglang", "DeepseekV3ForCausalLM"): ["rope_interleave", True, True],
}


def test_what_each_model_file_passes_to_get_rope() -> None:
    archs = sorted({arch for table in EXPECTED.values() for arch in table} | {a for _, a in NEOX_CONFIG})
    done = subprocess.run(
        [str(vllm.python()), "-P", "-c", SCRIPT, str(ENGINES), json.dumps(archs)],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout.strip().splitlines()[-1])
    for engine, table in EXPECTED.items():
        for arch, expected in table.items():
            facts = found[engine][arch]
            if expected is None:
                assert facts is None, (engine, arch, facts)
                continue
            got = (Path(facts["file"]).name, facts["neox"], facts["scaling"], facts["dual_chunk"], facts["permutes_qk"])
            assert got == expected, (engine, arch, got)
    for (engine, arch), expected in NEOX_CONFIG.items():
        assert found[engine][arch]["neox_config"] == expected, (engine, arch, found[engine][arch])
