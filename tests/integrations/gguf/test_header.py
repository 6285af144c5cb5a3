"""The bounded GGUF header reader: what it reads equals gguf-py's reader, and a hostile size is refused in one line
before anything is allocated or looped over.

Oracles: gguf-py's own ``GGUFReader`` (values and tensor table) and the bytes each hostile case writes (the key and
the value the refusal must name). The cases that would exhaust memory or loop forever run in a child process with an
address-space limit and a timeout, so a regression fails the test instead of hanging or killing the suite.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers.gguf_bytes import ARRAY, STRING, UINT8, f32, gguf_bytes, llama_keys, raw_array, text, u32, write
from helpers.gguf_files import write_source
from ropekit.errors import InvalidArgument
from ropekit.integrations.gguf.file import check_gguf
from ropekit.integrations.gguf.header import MAX_DECODED_ITEMS, SkippedArray

#: the child's address-space limit: far above what reading a header needs, far below what a 2^31-dim RoPE allocates
CHILD_MEMORY = 3 << 30
#: the child's wall-clock limit: generous on a loaded machine; a reader that loops over 2^61 items never returns
CHILD_SECONDS = 120


def _contents(field) -> object:
    value = field.contents()
    return [v for v in value] if isinstance(value, list) else value


def _same_as_gguf_py(path: Path) -> None:
    import gguf

    header = check_gguf(path)
    reader = gguf.GGUFReader(str(path))
    fields = {name: field for name, field in reader.fields.items() if not name.startswith("GGUF.")}
    assert list(header.values) == list(fields)
    for name, field in fields.items():
        ours = header.values[name]
        if isinstance(ours, SkippedArray):
            assert len(field.data) == ours.count > MAX_DECODED_ITEMS, name
        else:
            assert ours == _contents(field), name
    theirs = [
        (t.name, tuple(int(x) for x in t.shape), int(t.tensor_type), int(t.data_offset) - reader.data_offset, t.n_bytes)
        for t in reader.tensors
    ]
    assert [(t.name, t.shape, t.ggml_type, t.offset, t.nbytes) for t in header.tensors] == theirs
    assert header.data_start == reader.data_offset


def test_the_header_equals_gguf_py_and_long_arrays_are_skipped(tmp_path: Path) -> None:
    """A vocabulary longer than the decoding limit is skipped by its lengths, and the keys after it still read."""
    import gguf

    path = tmp_path / "m.gguf"
    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_array("tokenizer.ggml.tokens", [f"tok{i}" * (i % 3 + 1) for i in range(3000)])
    writer.add_array("tokenizer.ggml.scores", [float(i) for i in range(3000)])
    writer.add_array("llama.small", [1, 2, 3])
    writer.add_uint32("llama.context_length", 4096)
    writer.add_float32("llama.rope.freq_base", 500000.0)
    writer.add_string("general.name", "after the vocabulary")
    writer.add_tensor("output_norm.weight", np.arange(64, dtype=np.float32))
    writer.add_tensor("blk.0.attn_q.weight", np.ones((2, 32), dtype=np.float16))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    _same_as_gguf_py(path)
    assert check_gguf(path).values["tokenizer.ggml.tokens"] == SkippedArray(STRING, 3000)


def test_the_synthetic_files_read_as_gguf_py_reads_them(tmp_path: Path) -> None:
    _same_as_gguf_py(write_source(tmp_path / "m.gguf", rope_freqs=np.linspace(1, 4, 32)))


@pytest.mark.real
def test_the_smollm2_header_equals_gguf_py(smollm2_path: Path) -> None:
    _same_as_gguf_py(smollm2_path)


def _refusal_in_a_child(path: Path, code: str) -> str:
    """Run ``code`` (with ``path`` bound) in a child under a memory and time limit; its one-line error."""
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))\n"
        f"path = {str(path)!r}\n"
        "try:\n" + "".join(f"    {line}\n" for line in code.splitlines()) + "except ValueError as error:\n"
        "    print('refused:', error)\n"
        "    sys.exit(0)\n"
        "print('accepted')\n"
        "sys.exit(3)\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script], capture_output=True, text=True, timeout=CHILD_SECONDS, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {path.name} did not finish in {CHILD_SECONDS} s (an unbounded loop)")
    assert done.returncode == 0, done.stdout + done.stderr[-2000:]
    lines = done.stdout.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("refused:"), done.stdout
    return lines[0]


HOSTILE = {
    # an array stating 2^61 items in a file of a few hundred bytes (gguf-py loops over them)
    "array-2^61": (
        gguf_bytes({**llama_keys(), "tokenizer.ggml.tokens": raw_array(STRING, 2**61)}),
        ("'tokenizer.ggml.tokens'", "2,305,843,009,213,693,952"),
    ),
    # one-byte items up to the file's end, then 2^61 empty reads: gguf-py never returns
    "bytes-2^61": (
        gguf_bytes({**llama_keys(), "tokenizer.ggml.token_type": raw_array(UINT8, 2**61)}),
        ("'tokenizer.ggml.token_type'", "2,305,843,009,213,693,952"),
    ),
    "string-2^62": (gguf_bytes({**llama_keys(), "general.name": (STRING, (2**62).to_bytes(8, "little"))}), ("name",)),
    "tensor-count-2^40": (gguf_bytes(llama_keys(), tensor_count=2**40), ("tensor count", "1,099,511,627,776")),
    "key-count-2^60": (
        b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + (2**60).to_bytes(8, "little"),
        ("key/value count",),
    ),
    "tensor-beyond-the-file": (
        gguf_bytes(llama_keys(), {"t.weight": ((1 << 40,), b"\0" * 32)}),
        ("'t.weight'", "needs"),
    ),
}


@pytest.mark.parametrize("case", list(HOSTILE), ids=list(HOSTILE))
def test_a_hostile_size_is_refused_before_it_is_used(tmp_path: Path, case: str) -> None:
    content, fragments = HOSTILE[case]
    path = write(tmp_path / "hostile.gguf", content)
    assert len(content) < 1024  # the whole file is a few hundred bytes
    line = _refusal_in_a_child(path, "from ropekit.integrations.gguf.file import check_gguf\ncheck_gguf(path)")
    for fragment in fragments:
        assert fragment in line, (fragment, line)


def test_a_rotary_dim_of_2_to_the_31_is_refused_by_name_before_any_allocation(tmp_path: Path) -> None:
    """The 21 GB case: read through every reader a command uses (the RoPE and the config), under a 3 GiB limit."""
    path = write(tmp_path / "big.gguf", gguf_bytes(llama_keys(rope__dimension_count=u32(2**31))))
    code = (
        "from ropekit.integrations.gguf.read_rope import read_file_rope\n"
        "from ropekit.integrations.hf.load import load_config\n"
        "errors = []\n"
        "for read in (read_file_rope, load_config):\n"
        "    try:\n"
        "        read(path)\n"
        "    except ValueError as error:\n"
        "        errors.append(str(error))\n"
        "assert len(errors) == 2 and errors[0] == errors[1], errors\n"
        "raise ValueError(errors[0])"
    )
    line = _refusal_in_a_child(path, code)
    assert "'llama.rope.dimension_count' = 2147483648" in line


def test_inspect_refuses_a_rotary_dim_of_2_to_the_31_in_one_line(tmp_path: Path) -> None:
    """``ropekit inspect --model`` on the 448-byte file: exit 2 and one line naming the key, under a 3 GiB limit."""
    path = write(tmp_path / "big.gguf", gguf_bytes(llama_keys(rope__dimension_count=u32(2**31))))
    script = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({CHILD_MEMORY}, {CHILD_MEMORY}))\n"
        "sys.argv = ['ropekit', 'inspect', '--model', sys.argv[1]]\n"
        "from ropekit.cli.app import main\n"
        "main()\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "COLUMNS": "200"}
    try:
        done = subprocess.run(
            [sys.executable, "-c", script, str(path)], capture_output=True, text=True, timeout=CHILD_SECONDS, env=env
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"inspect did not finish in {CHILD_SECONDS} s")
    assert done.returncode == 2, done.stdout + done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "'llama.rope.dimension_count' = 2147483648" in errors[0], done.stderr


def test_keys_that_are_not_utf8_are_refused_by_name(tmp_path: Path) -> None:
    path = write(tmp_path / "m.gguf", gguf_bytes({**llama_keys(), b"llama.\xff\xfe": u32(1)}))
    with pytest.raises(InvalidArgument, match=r"\(b'llama\.\\xff\\xfe'\) is not UTF-8"):
        check_gguf(path)
    path = write(tmp_path / "n.gguf", gguf_bytes(llama_keys(**{"general.name": text(b"caf\xe9")})))
    with pytest.raises(InvalidArgument, match=r"key 'general.name' = b'caf\\xe9' is not UTF-8"):
        check_gguf(path)


def test_the_tensor_and_key_names_spelled_here_are_gguf_pys() -> None:
    """ropekit spells a name only where gguf is optional at import (tensor names) or gguf-py lacks it (a key)."""
    import gguf

    from ropekit.integrations.gguf import read_rope
    from ropekit.integrations.gguf.fields import LOCAL_KEYS

    names = gguf.TENSOR_NAMES
    assert names[gguf.MODEL_TENSOR.ROPE_FREQS] + ".weight" == read_rope.ROPE_FREQS
    assert (
        tuple(names[t] + ".weight" for t in (gguf.MODEL_TENSOR.ROPE_FACTORS_LONG, gguf.MODEL_TENSOR.ROPE_FACTORS_SHORT))
        == read_rope._UNMODELLED_TENSORS
    )
    spelled = {value for group in (gguf.Keys.LLM, gguf.Keys.Rope) for value in vars(group).values()}
    assert not set(LOCAL_KEYS.values()) & spelled  # gguf-py does not name them (else use its name)


def test_a_key_or_tensor_given_twice_is_refused_by_name(tmp_path: Path) -> None:
    """llama.cpp refuses a file that names a key twice; ropekit read the second value (bytes: the key's oracle)."""
    twice = {**llama_keys(), b"llama.rope.freq_base": f32(500000.0)}  # str and bytes: the same name, two entries
    path = write(tmp_path / "twice.gguf", gguf_bytes(twice))
    with pytest.raises(InvalidArgument, match=r"key 'llama.rope.freq_base' is given twice"):
        check_gguf(path)
    content = gguf_bytes(llama_keys(), {"t.weight": ((8,), b"\0" * 32)})
    at = content.index(b"t.weight")  # a second tensor entry: the first one's bytes again, at offset 32
    entry = content[at - 8 : at + 8 + 4 + 8 + 4 + 8]
    doubled = content[: at - 8] + entry + entry[:-8] + struct.pack("<Q", 32) + content[at + 32 :]
    doubled = doubled.replace(struct.pack("<QQ", 1, len(llama_keys())), struct.pack("<QQ", 2, len(llama_keys())), 1)
    path = write(tmp_path / "tensor.gguf", doubled + b"\0" * 32)
    with pytest.raises(InvalidArgument, match=r"tensor 't.weight' is given twice"):
        check_gguf(path)


def test_extend_refuses_a_duplicated_key_in_one_line(tmp_path: Path) -> None:
    from helpers.cli import assert_error, run

    path = write(tmp_path / "twice.gguf", gguf_bytes({**llama_keys(), b"llama.rope.freq_base": f32(500000.0)}))
    result = run("extend", "--model", path, "--scaling", "linear", "--factor", "2", "--out", tmp_path / "out.gguf")
    assert_error(result, "'llama.rope.freq_base' is given twice")
    assert not (tmp_path / "out.gguf").exists()


def test_a_big_endian_file_is_named_big_endian(tmp_path: Path) -> None:
    content = gguf_bytes(llama_keys())
    swapped = content[:4] + content[4:8][::-1] + content[8:]  # the version as a big-endian writer puts it
    with pytest.raises(InvalidArgument, match=r"big-endian GGUF file \(version 3 byte-swapped\), which is not supp"):
        check_gguf(write(tmp_path / "be.gguf", swapped))
    with pytest.raises(InvalidArgument, match=r"GGUF version 7 is not supported"):
        check_gguf(write(tmp_path / "v7.gguf", content[:4] + struct.pack("<I", 7) + content[8:]))


def _nested(count: int, inner: int, item: int = UINT8) -> tuple[int, bytes]:
    """An array of ``count`` arrays, each of ``inner`` one-byte items (or ``inner`` empty strings)."""
    one = struct.pack("<IQ", item, inner) + (b"\1" * inner if item == UINT8 else struct.pack("<Q", 0) * inner)
    return raw_array(ARRAY, count, one * count)


def test_nested_arrays_cost_memory_by_the_budget_not_by_their_items(tmp_path: Path) -> None:
    """16 MB of arrays of 1,000-item arrays (16 million items) and 100,000 strings, then the RoPE keys: read, the RoPE keys right, with a
    peak of Python memory (tracemalloc) far below the items' count (a decoded item costs >= 8 bytes: 128 MB)."""
    import tracemalloc

    from ropekit.integrations.gguf.read_rope import read_file_rope

    hostile = {f"junk.{i}": _nested(1000, 1000) for i in range(16)}
    hostile["junk.strings"] = _nested(100, 1000, STRING)
    path = write(tmp_path / "nested.gguf", gguf_bytes({**hostile, **llama_keys(rope__freq_base=f32(123456.0))}))
    assert path.stat().st_size > 16_000_000
    check_gguf(write(tmp_path / "small.gguf", gguf_bytes(llama_keys())))  # gguf's imports, before measuring
    tracemalloc.start()
    try:
        header = check_gguf(path)
        rope = read_file_rope(path, reader=header)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert header.values["junk.0"] == SkippedArray(ARRAY, 1000)
    assert rope.rope.freq_base == 123456.0 and rope.rope.n_rot == 64
    assert peak < 1_000_000, peak  # what the RoPE keys need: kilobytes


def test_the_walked_items_and_decoded_bytes_are_budgeted(tmp_path: Path, monkeypatch) -> None:
    """Past the walking budget a file is refused by the key; past the decoding budget a string is kept undecoded and
    a key ropekit reads from it is refused by name (oracle: the budgets set small here, and the bytes written)."""
    from ropekit.integrations.gguf import header as module
    from ropekit.integrations.gguf.read_rope import read_file_rope

    monkeypatch.setattr(module, "MAX_WALKED_ITEMS", 5000)
    path = write(tmp_path / "walk.gguf", gguf_bytes({**llama_keys(), "junk": _nested(10, 1000, STRING)}))
    with pytest.raises(InvalidArgument, match=r"array 'junk' takes the strings and arrays held in arrays past 5,000"):
        check_gguf(path)
    monkeypatch.setattr(module, "MAX_DECODED_BYTES", 1000)
    keys = llama_keys(**{"general.name": text("x" * 2000), "general.architecture": None})
    keys["general.architecture"] = text("y" * 1200)
    header = check_gguf(write(tmp_path / "long.gguf", gguf_bytes(keys)))
    assert header.values["general.name"] == module.SkippedString(2000)
    with pytest.raises(InvalidArgument, match=r"'general.architecture' = a string of 1,200 bytes \(not decoded"):
        read_file_rope(header.path, reader=header)
