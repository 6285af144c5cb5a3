"""Tiny transformers models converted to GGUF by llama.cpp's own converter, for the tests and the evidence that
compare llama.cpp with transformers on the same weights.

The converter (``convert_hf_to_gguf.py`` with its ``conversion`` package and ``gguf-py``, from llama-cpp-python's
source distribution) is kept by ``tools/fetch_llama_cpp_converter.py`` in ``$ROPEKIT_CACHE_DIR/llama.cpp-<version>``,
or named by ``ROPEKIT_LLAMA_CPP_CONVERTER``; it runs as a child of this Python. A tiny model's tokenizer is 256 byte
tokens and one merge, which the converter's pre-tokenizer table does not know: the child answers that lookup with
``default`` (the tokenizer decides which ids a text becomes, never the logits of given ids, which is what is compared).
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
from pathlib import Path

#: seconds one conversion may take (a tiny model: about 5 s)
CONVERT_SECONDS = 300
#: the converter's own flags for a transformers folder of these architectures (``config.json``'s ``architectures``):
#: Qwen3.5's and Qwen3-Next's released checkpoints ship multi-token-prediction layers under ``mtp.*``, which
#: transformers' classes do not build; the converter asserts it finds them unless told ``--no-mtp`` (its flag for a
#: file without them)
CONVERTER_FLAGS = {
    "Qwen3_5ForCausalLM": ("--no-mtp",),
    "Qwen3_5ForConditionalGeneration": ("--no-mtp",),
    "Qwen3_5MoeForCausalLM": ("--no-mtp",),
    "Qwen3_5MoeForConditionalGeneration": ("--no-mtp",),
    "Qwen3NextForCausalLM": ("--no-mtp",),
}

_CHILD = """
import sys
from pathlib import Path
root = Path(sys.argv[1]).parent
sys.path[0:0] = [str(root), str(root / "gguf-py")]
import conversion.base
model = conversion.base.TextModel
model.get_vocab_base_pre = lambda self, tokenizer: "default"
sentencepiece = model._set_vocab_sentencepiece
model._set_vocab_sentencepiece = lambda self, add_to_gguf=True: (
    sentencepiece(self, add_to_gguf) if (self.dir_model / "tokenizer.model").is_file() else self._set_vocab_gpt2()
)
import json
import runpy
script, flags, pairs = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:]
for folder, out in zip(pairs[::2], pairs[1::2]):
    try:
        named = json.loads((Path(folder) / "config.json").read_text()).get("architectures") or [""]
        sys.argv = [script, folder, "--outfile", out, "--outtype", "f32", *flags.get(named[0], [])]
        runpy.run_path(script, run_name="__main__")
    except BaseException as error:
        print(f"{out}: {type(error).__name__}: {error}"[:300], file=sys.stderr, flush=True)
"""


def converter() -> Path | None:
    """llama.cpp's ``convert_hf_to_gguf.py`` for the installed llama-cpp-python, or ``None``."""
    named = os.environ.get("ROPEKIT_LLAMA_CPP_CONVERTER")
    if named:
        return Path(named) if Path(named).is_file() else None
    try:
        version = importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return None
    base = Path(os.environ.get("ROPEKIT_CACHE_DIR") or Path.home() / ".cache" / "ropekit")
    path = base / f"llama.cpp-{version}" / "convert_hf_to_gguf.py"
    return path if path.is_file() else None


def missing() -> str | None:
    """Why a conversion cannot run here (llama-cpp-python or its converter missing), or ``None``."""
    try:
        importlib.metadata.version("llama-cpp-python")
    except importlib.metadata.PackageNotFoundError:
        return "llama-cpp-python is not installed (make setup)"
    if converter() is None:
        return "llama.cpp's converter is not fetched: python tools/fetch_llama_cpp_converter.py"
    return None


def byte_tokenizer(folder: Path) -> None:
    """Save a tokenizer of the 256 bytes (ids 0-255) and one merge (``Ġt``, id 256: llama.cpp refuses a BPE
    vocabulary without merges) in ``folder``."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {token: i for i, token in enumerate(alphabet)} | {"Ġt": len(alphabet)}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("Ġ", "t")]))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token=alphabet[0]).save_pretrained(folder)


#: the special pieces of Gemma's SentencePiece model, in its order (google/gemma-3-1b-pt tokenizer.model: 0 <pad>,
#: 1 <eos>, 2 <bos>, 3 <unk>)
SENTENCEPIECE_SPECIALS = ("<pad>", "<eos>", "<bos>", "<unk>")


def sentencepiece_tokenizer(folder: Path) -> None:
    """Save a SentencePiece ``tokenizer.model`` in ``folder``: Gemma's four special pieces, then the 256 byte pieces
    (``<0x00>`` ... ``<0xFF>``, byte fallback) and ``▁``; no merges learned (a byte model), as a family that ships
    SentencePiece gives llama.cpp's converter (its vocabulary is padded to the config's ``vocab_size``, as a
    released checkpoint's is, where a ``tokenizer.json`` would be counted as it is)."""
    from sentencepiece import sentencepiece_model_pb2 as model_pb2

    proto = model_pb2.ModelProto()
    piece_type = model_pb2.ModelProto.SentencePiece
    specials = [(p, piece_type.UNKNOWN if p == "<unk>" else piece_type.CONTROL) for p in SENTENCEPIECE_SPECIALS]
    pieces = [*specials, *((f"<0x{b:02X}>", piece_type.BYTE) for b in range(256)), ("▁", piece_type.NORMAL)]
    for text, kind in pieces:
        proto.pieces.add(piece=text, score=0.0, type=kind)
    spec = proto.trainer_spec
    spec.model_type, spec.vocab_size, spec.byte_fallback = model_pb2.TrainerSpec.BPE, len(pieces), True
    spec.pad_id, spec.eos_id, spec.bos_id, spec.unk_id = range(4)
    spec.pad_piece, spec.eos_piece, spec.bos_piece, spec.unk_piece = SENTENCEPIECE_SPECIALS
    proto.normalizer_spec.name, proto.normalizer_spec.add_dummy_prefix = "identity", False
    (folder / "tokenizer.model").write_bytes(proto.SerializeToString())


def byte_fallback_tokenizer(folder: Path) -> None:
    """Save a SentencePiece-style BPE tokenizer in ``folder`` as Gemma 4 ships one (``byte_fallback``, a decoder
    ``Sequence``: llama.cpp's converter reads Gemma 4's vocabulary only from such a file, and keeps as many rows of
    the embedding as the file has tokens): the 256 byte tokens ``<0x00>``-``<0xFF>`` (ids 0-255), ``▁``, ``t``, one
    merge (``▁t``, id 258), then ``<unusedN>`` tokens up to the ``vocab_size`` of the folder's ``config.json``."""
    from tokenizers import Tokenizer, decoders, models, normalizers
    from transformers import PreTrainedTokenizerFast

    config = json.loads((folder / "config.json").read_text())
    size = config.get("text_config", config)["vocab_size"]
    vocab = {f"<0x{i:02X}>": i for i in range(256)} | {"▁": 256, "t": 257, "▁t": 258}
    vocab |= {f"<unused{i}>": len(vocab) + i for i in range(size - len(vocab))}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[("▁", "t")], byte_fallback=True))
    tokenizer.normalizer = normalizers.Replace(" ", "▁")
    tokenizer.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<0x00>").save_pretrained(folder)


def llama_sentencepiece_tokenizer(folder: Path) -> None:
    """Save a SentencePiece tokenizer in ``folder`` (in place of :func:`byte_tokenizer`'s files): ``tokenizer.model``,
    a BPE model laid out as Llama 2's (which Phi-3 ships): ``<unk>``, ``<s>``, ``</s>`` (ids 0-2), then the 256 byte
    pieces ``<0x00>`` … ``<0xFF>`` (ids 3-258), byte fallback on; and transformers' own ``tokenizer.json`` made from
    it, so both files name one vocabulary. The converter reads ``tokenizer.model`` where a family ships SentencePiece
    (``phi.py``'s Phi-3); :func:`sentencepiece_tokenizer` is Gemma's layout."""
    import json

    from sentencepiece import sentencepiece_model_pb2 as pb
    from transformers import AutoTokenizer

    model = pb.ModelProto()
    piece = pb.ModelProto.SentencePiece
    for text, kind in (("<unk>", piece.UNKNOWN), ("<s>", piece.CONTROL), ("</s>", piece.CONTROL)):
        model.pieces.add(piece=text, score=0.0, type=kind)
    for byte in range(256):
        model.pieces.add(piece=f"<0x{byte:02X}>", score=0.0, type=piece.BYTE)
    spec = model.trainer_spec
    spec.model_type, spec.vocab_size, spec.byte_fallback = pb.TrainerSpec.BPE, len(model.pieces), True
    spec.unk_id, spec.bos_id, spec.eos_id, spec.pad_id = 0, 1, 2, -1
    model.normalizer_spec.name, model.normalizer_spec.add_dummy_prefix = "identity", True
    (folder / "tokenizer.json").unlink(missing_ok=True)
    (folder / "tokenizer.model").write_bytes(model.SerializeToString())
    special = {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"}
    (folder / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "LlamaTokenizer", **special}))
    AutoTokenizer.from_pretrained(folder).save_pretrained(folder)


def convert(pairs: list[tuple[Path, Path]], *, timeout: float = CONVERT_SECONDS) -> dict[Path, str | None]:
    """Convert each transformers folder to its F32 GGUF file (``(folder, out)`` pairs), in one child process (the
    converter's imports once); out → ``None``, or why it was not written (the converter's error line)."""
    script = converter()
    if script is None:
        return {out: missing() for _, out in pairs}
    args = [str(path) for pair in pairs for path in pair]
    env = {**os.environ, "PYTHONPATH": ""}
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, str(script), json.dumps(CONVERTER_FLAGS), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
        errors = done.stderr
    except subprocess.TimeoutExpired as error:
        errors = (error.stderr or b"").decode(errors="replace") + f"\nthe converter took over {timeout:.0f} s"
    result = {}
    for _, out in pairs:
        said = [line for line in errors.splitlines() if line.startswith(f"{out}: ")]
        result[out] = None if out.is_file() and not said else (said[-1][len(str(out)) + 2 :] if said else "not written")
    return result
