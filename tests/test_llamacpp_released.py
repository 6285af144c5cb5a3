"""llama.cpp's column (evidence/llamacpp_matrix): each architecture of :data:`released.RELEASED`, built with the keys
and the tokenizer its release ships, is converted by llama.cpp's own converter and loaded by llama.cpp, which refused
or aborted on the config class's defaults. The oracle: llama.cpp's own load, prefill and decode (a child process), and
for the SentencePiece tokenizer, SentencePiece's own reading of the file."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from helpers.llamacpp_convert import SENTENCEPIECE_SPECIALS, convert, missing, sentencepiece_tokenizer

pytest.importorskip("transformers")
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "engines_matrix"))
sys.path.insert(0, str(Path(__file__).parents[1] / "evidence" / "llamacpp_matrix"))

import released

RUNNER = Path(released.__file__).with_name("run.py")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]

#: the architectures measured by default (each a different cause: key/value heads and MLP width,
#: a Llama 4 layer period, SentencePiece); the rest under ``-m slow``
FAST = ("phi", "llama4_text", "gemma3_text")


def _runner():
    """evidence/llamacpp_matrix/run.py as a module (its name is shared with the engines matrix's runner)."""
    spec = importlib.util.spec_from_file_location("llamacpp_run", RUNNER)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_sentencepiece_tokenizer_is_read_by_sentencepiece(tmp_path: Path) -> None:
    """Gemma's specials at ids 0-3, then one piece per byte (byte fallback), as SentencePiece itself reads them."""
    sentencepiece = pytest.importorskip("sentencepiece")
    sentencepiece_tokenizer(tmp_path)
    model = sentencepiece.SentencePieceProcessor(model_file=str(tmp_path / "tokenizer.model"))
    assert [model.id_to_piece(i) for i in range(4)] == list(SENTENCEPIECE_SPECIALS)
    assert (model.pad_id(), model.eos_id(), model.bos_id(), model.unk_id()) == (0, 1, 2, 3)
    text = "héllo"
    assert model.encode(text) == [4 + b for b in text.encode()]  # no merges: every byte its <0xNN> piece
    assert model.decode(model.encode(text)) == text


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """model type → its GGUF file and why there is none; each group (:data:`FAST`, the rest) built and converted in
    one child process (the converter's imports once) the first time one of its types is asked for."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    work, done, runner = tmp_path_factory.mktemp("released"), {}, _runner()

    def get(model_type: str) -> tuple[Path, str | None]:
        if model_type not in done:
            group = [t for t in released.RELEASED if (t in FAST) == (model_type in FAST)]
            pairs = [(runner.build(t, work / t), work / f"{t}.gguf") for t in group]
            results = convert(pairs)
            done.update({t: (gguf, results[gguf]) for t, (_, gguf) in zip(group, pairs, strict=True)})
        return done[model_type]

    return get


@pytest.mark.llamacpp
@pytest.mark.parametrize(
    "model_type", [t if t in FAST else pytest.param(t, marks=pytest.mark.slow) for t in sorted(released.RELEASED)]
)
def test_released_shape_converts_and_llamacpp_loads_it(converted, model_type: str) -> None:
    from ropekit.eval.backends.llamacpp_probe import probe

    gguf, why = converted(model_type)
    assert why is None
    assert probe(gguf) is None
