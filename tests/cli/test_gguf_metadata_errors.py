"""Hostile GGUF metadata is a one-line error naming --model, the key and its value, for every command that reads a
GGUF file's RoPE (exit 2, no traceback).

Oracles: the key and value each case writes into the file (both must appear in the error).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import assert_error, run
from helpers.gguf_bytes import array, f32, gguf_bytes, llama_keys, text, u32, write

CASES = {
    "name-not-utf8": (llama_keys(**{"general.name": text(b"caf\xe9")}), ("'general.name'", r"b'caf\xe9'")),
    "freq-base-array": (llama_keys(rope__freq_base=array([1.0, 2.0])), ("'llama.rope.freq_base'", "[1.0, 2.0]")),
    "freq-base-zero": (llama_keys(rope__freq_base=f32(0.0)), ("'llama.rope.freq_base'", "= 0.0")),
    "zero-heads": (
        llama_keys(rope__dimension_count=None, attention__head_count=u32(0)),
        ("'llama.attention.head_count'", "= 0"),
    ),
    "odd-rotary-dim": (llama_keys(rope__dimension_count=u32(63)), ("'llama.rope.dimension_count'", "= 63")),
    "negative-yarn-factor": (
        llama_keys(rope__scaling__type=text("yarn"), rope__scaling__factor=f32(-4.0)),
        ("'llama.rope.scaling.factor'", "= -4.0"),
    ),
    "negative-linear-scale": (llama_keys(rope__scale_linear=f32(-2.0)), ("'llama.rope.scale_linear'", "= -2.0")),
    "architecture-not-a-name": (llama_keys(**{"general.architecture": text("../x")}), ("'general.architecture'",)),
    "context-not-a-number": (llama_keys(context_length=text("long")), ("'llama.context_length'", "'long'")),
}


def _commands(model: Path, tmp_path: Path) -> list[tuple[str, ...]]:
    return [
        ("inspect", "--model", model),
        ("plan", "--model", model, "--target-length", "32k"),
        ("extend", "--model", model, "--scaling", "yarn", "--factor", "2", "-o", tmp_path / "out.gguf"),
    ]


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_hostile_metadata_is_one_line_naming_the_key_and_value(tmp_path: Path, case: str) -> None:
    keys, fragments = CASES[case]
    model = write(tmp_path / "m.gguf", gguf_bytes(keys))
    for args in _commands(model, tmp_path):
        assert_error(run(*args), "--model", str(model), *fragments)
    assert not (tmp_path / "out.gguf").exists()


def test_a_negative_yarn_factor_is_not_read_as_one(tmp_path: Path) -> None:
    """The same file with factor +4 reads as YaRN x4 (so the refusal above is about the sign, not the key)."""
    from ropekit.integrations.gguf.read_rope import read_file_rope

    keys = llama_keys(rope__scaling__type=text("yarn"), rope__scaling__factor=f32(4.0))
    rope = read_file_rope(write(tmp_path / "m.gguf", gguf_bytes(keys))).rope
    assert (rope.scaling_type, rope.factor) == ("yarn", 4.0)
