"""Typed reads of a GGUF header's keys: a context length no model has is refused by the file's key, in the one reading
the RoPE and the config share (oracle: the value written into the file's bytes)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers.cli import assert_error, run
from helpers.gguf_bytes import gguf_bytes, llama_keys, u32, write
from helpers.gguf_files import write_source
from ropekit.errors import InvalidArgument

pytest.importorskip("gguf")


def test_a_context_length_of_2_to_the_32_minus_1_is_refused_by_its_key_everywhere(tmp_path: Path) -> None:
    from ropekit.integrations.gguf.read_rope import read_file_rope
    from ropekit.integrations.hf.load import load_config

    path = write(tmp_path / "huge.gguf", gguf_bytes(llama_keys(context_length=u32(2**32 - 1))))
    errors = []
    for read in (read_file_rope, load_config):
        with pytest.raises(InvalidArgument) as caught:
            read(path)
        errors.append(str(caught.value))
    assert errors[0] == errors[1]
    assert "'llama.context_length' = 4294967295" in errors[0] and "1,073,741,824" in errors[0]
    line = assert_error(run("inspect", "--model", path), "'llama.context_length' = 4294967295")
    assert "--train-length" not in line  # a flag the user did not give
    original = write(tmp_path / "orig.gguf", gguf_bytes(llama_keys(rope__scaling__original_context_length=u32(2**31))))
    with pytest.raises(InvalidArgument, match=r"'llama.rope.scaling.original_context_length' = 2147483648"):
        read_file_rope(original)


def test_extend_refuses_a_context_longer_than_ropekit_handles_naming_the_factor(tmp_path: Path) -> None:
    """2^30 tokens (allowed) times 8: the GGUF writer would store 2^33 in a uint32; refused, nothing written."""
    from ropekit.integrations.gguf.write_rope import extend_gguf
    from ropekit.scaling import LinearScaling

    source = write_source(tmp_path / "m.gguf")
    out = tmp_path / "out.gguf"
    result = run("extend", "--model", source, "--scaling", "yarn", "--factor", "2", "--out", out, "--original-length",
                 str(1 << 30))  # fmt: skip
    assert_error(result, "--factor 2", "2,147,483,648 tokens")
    with pytest.raises(InvalidArgument, match=r"target_length at most 1,073,741,824"):
        extend_gguf(source, LinearScaling(factor=2.0), out, target_length=(1 << 30) + 1)
    assert not out.exists()
