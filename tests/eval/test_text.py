"""Evaluation text from the user's files: oracles are the bytes written here (documents, their order, sha256
computed with hashlib), token streams assembled by hand, and the clear errors for bad files."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
import torch

from ropekit.eval.sweep import SweepSettings, SweepText, forward_tokens, perplexity_windows
from ropekit.eval.text import (
    SHIPPED,
    packed_windows,
    read_text,
    require_tokens,
    shipped_text,
    token_windows,
    tokenize,
)
from ropekit.model.corpus import heldout_bytes


def byte_encode(data: bytes) -> torch.Tensor:
    return torch.tensor(list(data), dtype=torch.int64)


def test_a_text_file_is_one_document_with_the_file_sha256(tmp_path: Path) -> None:
    data = "héllo wörld\n".encode()
    (tmp_path / "a.txt").write_bytes(data)
    text = read_text(tmp_path / "a.txt")
    assert text.documents == (data,)
    assert text.sha256 == hashlib.sha256(data).hexdigest()
    assert text.nbytes == len(data)


def test_jsonl_gives_one_document_per_line_and_skips_blank_ones(tmp_path: Path) -> None:
    lines = [json.dumps({"text": "first"}), "", json.dumps({"text": "  "}), json.dumps({"text": "second", "id": 2})]
    (tmp_path / "d.jsonl").write_text("\n".join(lines) + "\n")
    assert read_text(tmp_path / "d.jsonl").documents == (b"first", b"second")


def test_a_folder_reads_its_files_in_sorted_order_and_hashes_the_listing(tmp_path: Path) -> None:
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "z.txt").write_text("zed")
    (tmp_path / "a.jsonl").write_text(json.dumps({"text": "one"}) + "\n" + json.dumps({"text": "two"}) + "\n")
    (tmp_path / ".hidden").write_text("never read")
    text = read_text(tmp_path)
    assert text.documents == (b"one", b"two", b"zed")
    listing = "".join(
        f"{name}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n"
        for name, path in (("a.jsonl", tmp_path / "a.jsonl"), ("b/z.txt", tmp_path / "b" / "z.txt"))
    )
    assert text.sha256 == hashlib.sha256(listing.encode()).hexdigest()


def test_documents_are_joined_with_the_separator_and_never_across_without_it(tmp_path: Path) -> None:
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps({"text": t}) for t in ("ab", "c", "de")))
    tokens = tokenize(read_text(tmp_path / "d.jsonl"), byte_encode, [0])
    assert tokens.ids.tolist() == [97, 98, 0, 99, 0, 100, 101]
    assert tokens.tokens == 7
    assert tokens.describe() == {"source": str(tmp_path / "d.jsonl"), "sha256": tokens.sha256, "tokens": 7}


def test_shipped_text_keeps_the_digest_recorded_before() -> None:
    text = shipped_text()
    assert text.source == SHIPPED
    assert text.documents == (heldout_bytes(),)
    assert text.sha256 == hashlib.sha256(heldout_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("name", "content", "error", "match"),
    [
        (None, None, FileNotFoundError, "does not exist"),
        ("empty.txt", b"", ValueError, "is empty"),
        ("blank.txt", b"  \n\n", ValueError, "is empty"),
        ("model.bin", b"\x00\x01\x02abc", ValueError, "looks binary"),
        ("latin1.txt", "caf\xe9".encode("latin-1"), ValueError, "not UTF-8 text .*offset 3"),
        ("bad.jsonl", b'{"text": "ok"}\n{"oops"\n', ValueError, "line 2 is not JSON"),
        ("field.jsonl", b'{"body": "x"}\n', ValueError, 'line 1 needs a "text" string field'),
    ],
)
def test_bad_files_give_clear_errors(tmp_path: Path, name, content, error, match) -> None:
    path = tmp_path / (name or "missing.txt")
    if content is not None:
        path.write_bytes(content)
    with pytest.raises(error, match=match):
        read_text(path)


def test_an_empty_folder_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="folder without files"):
        read_text(tmp_path)


def test_packed_windows_are_consecutive_and_drop_the_remainder() -> None:
    ids = torch.arange(23)
    windows = packed_windows(ids, 5)
    assert windows.shape == (4, 5)
    assert windows.flatten().tolist() == list(range(20))
    assert packed_windows(ids, 10, stride=6)[:, 0].tolist() == [0, 6, 12]
    with pytest.raises(ValueError, match="at least length=30"):
        packed_windows(ids, 30)
    with pytest.raises(ValueError, match="length and stride must be >= 1"):
        packed_windows(ids, 0)


def test_token_windows_in_one_call(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_bytes(bytes(range(65, 91)))  # 26 letters
    windows = token_windows(tmp_path / "t.txt", byte_encode, [0], 8)
    assert windows.tolist() == [list(range(65 + 8 * k, 73 + 8 * k)) for k in range(3)]
    with pytest.raises(ValueError, match=r"has 26 tokens; .* needs at least 27"):
        token_windows(tmp_path / "t.txt", byte_encode, [0], 27)


def test_require_tokens_names_the_count() -> None:
    tokens = tokenize(shipped_text(), byte_encode)
    assert require_tokens(tokens, 10) is tokens


class FakeModel:
    train_length = 10
    separator = (0,)

    @staticmethod
    def encode(data: bytes) -> torch.Tensor:
        return byte_encode(data)


def test_sweep_text_refuses_a_short_text_before_tokenizing_and_after(tmp_path: Path) -> None:
    settings = SweepSettings(methods=("none",), multiples=(1, 4), passkey_multiples=(1,))
    (tmp_path / "short.txt").write_bytes(b"x" * 30)  # 40 + 1 tokens needed
    text = SweepText(tmp_path / "short.txt", settings, perplexity=True, passkey=True)
    with pytest.raises(ValueError, match="30 bytes, fewer than the 41 tokens"):
        text.check(FakeModel())
    (tmp_path / "enough.txt").write_bytes(b"x" * 41)
    text = SweepText(tmp_path / "enough.txt", settings, perplexity=True, passkey=True)
    text.check(FakeModel())
    assert text.tokenized(FakeModel()).tokens == 41


@pytest.mark.parametrize(
    ("mode", "stride", "max_tokens", "text_tokens", "windows"),
    [
        ("nonoverlap", 256, 15, 101, 1),  # max_tokens within the first window
        ("nonoverlap", 256, 30, 101, 2),
        ("nonoverlap", 256, 10_000, 101, 5),
        ("sliding", 5, 10_000, 101, 17),
        ("sliding", 15, 10_000, 101, 6),
        ("nonoverlap", 256, 10_000, 20, 0),
    ],
)
def test_perplexity_windows_count_the_forward_passes(mode, stride, max_tokens, text_tokens, windows) -> None:
    """Oracle: a recording model counts the windows perplexity_at actually runs."""
    from ropekit.eval.perplexity import perplexity_at

    settings = SweepSettings(methods=("none",), mode=mode, stride=stride, max_tokens=max_tokens)
    if windows:
        calls = []

        def recording(ids: torch.Tensor) -> torch.Tensor:
            calls.append(ids.shape)
            return torch.zeros(*ids.shape, 7)

        perplexity_at(recording, torch.arange(text_tokens) % 7, 20, 8, mode=mode, stride=stride, max_tokens=max_tokens)
        assert len(calls) == windows
    assert perplexity_windows(20, text_tokens, settings) == windows


def test_forward_tokens_adds_perplexity_windows_and_passkey_episodes() -> None:
    settings = SweepSettings(
        methods=("none", "yarn"), multiples=(1, 2), passkey_multiples=(2,), depths=(0.0, 1.0), trials=3, max_tokens=50
    )
    cost = forward_tokens(settings, 20, 101)
    # length 20: 3 windows of 20 tokens; length 40: 2 windows of 40 plus 2 depths x 3 trials x 39 input tokens
    assert cost == {20: 2 * 3 * 20, 40: 2 * (2 * 40 + 6 * 39)}
