"""A llama GGUF file's config read from its header equals the config transformers builds from the whole file, and
reading it (as ``inspect --model`` does) imports neither transformers nor torch.

Oracles: transformers' own ``AutoConfig.from_pretrained(gguf_file=...)`` (through
:func:`~ropekit.integrations.hf.load.transformers_config`), key by key and through the layout table ``inspect``
prints; ``sys.modules`` in a child process.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.gguf_bytes import STRING, f32, gguf_bytes, llama_keys, raw_array, text, u32, write

pytestmark = pytest.mark.hf

_WEIGHT = ((32,), b"\0" * 128)


def _tokens(count: int) -> tuple[int, bytes]:
    items = b"".join(struct.pack("<Q", len(f"t{i}")) + f"t{i}".encode() for i in range(count))
    return raw_array(STRING, count, items)


VARIANTS = {
    "untied": (llama_keys(), {"output.weight": _WEIGHT}),
    "tied": (llama_keys(), {"output_norm.weight": _WEIGHT}),
    "head-dim-from-width": (llama_keys(rope__dimension_count=None), {}),
    "defaults": (
        llama_keys(attention__head_count_kv=None, context_length=None, rope__freq_base=None, feed_forward_length=None),
        {},
    ),
    "vocab-from-tokens": (llama_keys(**{"tokenizer.ggml.tokens": _tokens(1500)}), {}),
    "vocab-and-ids": (
        llama_keys(
            vocab_size=u32(300),
            attention__layer_norm_rms_epsilon=f32(1e-5),
            **{"tokenizer.ggml.bos_token_id": u32(1), "tokenizer.ggml.eos_token_id": u32(2)},
        ),
        {},
    ),
    "yarn": (
        llama_keys(
            rope__scaling__type=text("yarn"),
            rope__scaling__factor=f32(4.0),
            rope__scaling__original_context_length=u32(128),
        ),
        {},
    ),
    "mistral-by-name": (llama_keys(**{"general.name": text("mistral")}), {}),
}


@pytest.mark.parametrize("variant", list(VARIANTS), ids=list(VARIANTS))
def test_the_header_config_equals_transformers(tmp_path: Path, variant: str) -> None:
    from ropekit.integrations.hf.load import load_config, transformers_config
    from ropekit.integrations.hf.model_layout import model_layout

    keys, tensors = VARIANTS[variant]
    path = write(tmp_path / "m.gguf", gguf_bytes(keys, tensors))
    ours, theirs = load_config(path), transformers_config(path)
    assert {key: theirs.get(key, "absent") for key in ours} == ours
    assert model_layout(ours).rows == model_layout(theirs).rows


@pytest.mark.real
def test_the_smollm2_config_equals_transformers(smollm2_path: Path) -> None:
    from ropekit.integrations.hf.load import load_config, transformers_config
    from ropekit.integrations.hf.model_layout import model_layout

    ours, theirs = load_config(smollm2_path), transformers_config(smollm2_path)
    assert {key: theirs.get(key, "absent") for key in ours} == ours
    assert model_layout(ours).rows == model_layout(theirs).rows


def test_inspect_reads_a_gguf_without_transformers_or_torch(tmp_path: Path) -> None:
    path = write(tmp_path / "m.gguf", gguf_bytes(llama_keys(**{"tokenizer.ggml.tokens": _tokens(2000)})))
    script = (
        "import sys\n"
        "sys.argv = ['ropekit', 'inspect', '--model', sys.argv[1]]\n"
        "from ropekit.cli.app import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        "print('loaded:', sorted(name for name in ('torch', 'transformers') if name in sys.modules))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
    done = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rotary dim 64 of head 64" in done.stdout
    assert done.stdout.strip().splitlines()[-1] == "loaded: []"
