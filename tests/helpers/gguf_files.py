"""Small synthetic GGUF files written with the ``gguf`` package, and their fields read back with it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

#: the synthetic files' rotary dimension, base and context length
D, BASE, L0 = 64, 100000.0, 512


def write_source(path: Path, *, arch: str = "llama", metadata: dict | None = None, rope_freqs=None) -> Path:
    """A GGUF file with a llama.cpp header, a Q8_0 and an F32 tensor (and ``rope_freqs`` if given)."""
    import gguf

    rng = np.random.default_rng(0)
    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_context_length(L0)
    writer.add_embedding_length(128)
    writer.add_head_count(2)
    writer.add_rope_dimension_count(D)
    writer.add_rope_freq_base(BASE)
    writer.add_name("synthetic")
    for key, value in (metadata or {}).items():
        if isinstance(value, str):
            writer.add_string(f"{arch}.{key}", value)
        elif isinstance(value, list):
            writer.add_array(f"{arch}.{key}", value)
        elif isinstance(value, int):
            writer.add_uint32(f"{arch}.{key}", value)
        else:
            writer.add_float32(f"{arch}.{key}", value)
    quantised = gguf.quants.quantize(rng.standard_normal((8, 64)).astype(np.float32), gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("blk.0.attn_q.weight", quantised, raw_dtype=gguf.GGMLQuantizationType.Q8_0)
    writer.add_tensor("output_norm.weight", rng.standard_normal(128).astype(np.float32))
    if rope_freqs is not None:
        writer.add_tensor("rope_freqs.weight", np.asarray(rope_freqs, dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def fields(path: Path) -> dict:
    """Every metadata field of the file, by name."""
    import gguf

    reader = gguf.GGUFReader(str(path))
    return {name: field.contents() for name, field in reader.fields.items()}


def tensors(path: Path) -> dict:
    """Every tensor of the file: name → (quantisation type, raw bytes)."""
    import gguf

    return {t.name: (t.tensor_type, bytes(np.asarray(t.data).tobytes())) for t in gguf.GGUFReader(str(path)).tensors}
