"""``ropekit eval`` and ``ropekit report`` end to end on save_pretrained directories and a tiny checkpoint, and
the clear errors (nonzero exit, a message naming the problem, no traceback) for the ways a run can go wrong.

Oracles: the files and JSON the commands write (checked against the settings given on the command line), and
for errors the cause each one names.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from helpers.hf_models import byte_llama, random_hf_folder
from ropekit.cli.app import app

transformers = pytest.importorskip("transformers")

pytestmark = [pytest.mark.hf, pytest.mark.usefixtures("quiet_transformers")]  # tests/conftest.py

TRAIN_LENGTH = 64  # max_position_embeddings of the saved Llama below
SMALL = ["--multiples", "1,2", "--max-tokens", "256"]
REPORT_SMALL = ["--perplexity-multiples", "1,2", "--max-tokens", "256", "--task-samples", "1"]


def run(*args: str):
    return CliRunner().invoke(app, list(args), env={"COLUMNS": "200"})


def flat(text: str) -> str:
    """Output with rich's line wrapping undone."""
    return " ".join(text.split())


def assert_clean_failure(result, *fragments: str) -> None:
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Traceback" not in result.output
    message = flat(result.output)
    assert "error:" in message
    for fragment in fragments:
        assert fragment in message, (fragment, message)


#: the CLI tests' smaller models (1 layer, 2 heads and 1 KV head of 16, trained at TRAIN_LENGTH); for the Llama, these
#: override the byte-level Llama of tests/conftest.py
SMALL_MODEL = {
    "vocab": 300,
    "hidden": 32,
    "intermediate": 64,
    "layers": 1,
    "heads": 2,
    "kv_heads": 1,
    "positions": TRAIN_LENGTH,
    "pad_token_id": 0,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


@pytest.fixture(scope="module")
def llama_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return random_hf_folder(tmp_path_factory.mktemp("hf") / "llama", "llama", **byte_llama(**SMALL_MODEL))


@pytest.fixture(scope="module")
def phi3_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    rope = {"rope_type": "longrope", "rope_theta": 10000.0, "short_factor": [1.0] * 8, "long_factor": [4.0] * 8}
    options = SMALL_MODEL | {"positions": 4 * TRAIN_LENGTH, "original_max_position_embeddings": TRAIN_LENGTH}
    return random_hf_folder(tmp_path_factory.mktemp("hf") / "phi3", "phi3", rope_parameters=rope, **options)


def test_eval_perplexity_end_to_end(llama_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    result = run(
        "eval", "perplexity", "--model", str(llama_dir), "--methods", "none,yarn,ntk,longrope", *SMALL,
        "--out", str(out), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # the progress bar goes to stderr, so stdout is exactly the JSON
    assert [(r["method"], r["length"]) for r in data["perplexity"]] == [
        (m, n) for m in ("none", "yarn", "ntk") for n in (TRAIN_LENGTH, 2 * TRAIN_LENGTH)
    ]
    assert data["passkey"] == []
    assert [s["method"] for s in data["skipped"]] == ["longrope"]
    assert data["context"]["model"]["architecture"] == "LlamaForCausalLM"
    assert data["context"]["model"]["tokenizer"] == "bytes"
    for row in data["perplexity"]:
        assert 1.0 < row["perplexity"] < 1e4
        assert row["tokens"] == 256 and row["beyond_tokens"] == (0 if row["length"] == TRAIN_LENGTH else 128)
    assert json.loads((out / "results.json").read_text()) == data
    assert (out / "perplexity.csv").read_text().count("\n") == 1 + 6


def test_eval_perplexity_sliding_mode_and_table_output(llama_dir: Path) -> None:
    result = run(
        "eval", "perplexity", "--model", str(llama_dir), "--methods", "none,linear", "--multiples", "2",
        "--mode", "sliding", "--stride", "32", "--max-tokens", "128",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "perplexity by length" in flat(result.stdout)
    assert re.search(r"\blinear\b", result.stdout) and re.search(r"\bnone\b", result.stdout)


def test_eval_perplexity_runs_longrope_on_a_phi3_model(phi3_dir: Path) -> None:
    result = run("eval", "perplexity", "--model", str(phi3_dir), "--methods", "native,longrope,none", *SMALL, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["skipped"] == []
    rows = {(r["method"], r["length"]): r for r in data["perplexity"]}
    assert rows[("longrope", 2 * TRAIN_LENGTH)]["scaling"]["factor"] == 2.0
    assert rows[("native", 2 * TRAIN_LENGTH)]["scaling"]["factor"] == 4.0  # Phi-3's own max/original
    # each row records the factor its scaling uses: native keeps its own 4 at 2x, plain RoPE is s = 1
    assert [rows[(m, 2 * TRAIN_LENGTH)]["factor"] for m in ("native", "longrope", "none")] == [4.0, 2.0, 1.0]
    # At the original length LongRoPE's short factors are all 1 here and its attention factor is 1 at s = 1.
    assert rows[("longrope", TRAIN_LENGTH)]["perplexity"] == pytest.approx(rows[("none", TRAIN_LENGTH)]["perplexity"])


def test_eval_passkey_end_to_end(llama_dir: Path, tmp_path: Path) -> None:
    result = run(
        "eval", "passkey", "--model", str(llama_dir), "--methods", "none,yarn", "--multiples", "2,3",
        "--depths", "0,0.5", "--trials", "2", "--out", str(tmp_path), "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [(r["method"], r["length"], r["depth"]) for r in data["passkey"]] == [
        (m, n, d) for m in ("none", "yarn") for n in (128, 192) for d in (0.0, 0.5)
    ]
    assert all(r["trials"] == 2 and 0 <= r["correct"] <= 2 for r in data["passkey"])
    assert data["perplexity"] == []
    # the record holds the settings this run used, not the perplexity ones it ignored
    assert not {"multiples", "mode", "stride", "max_tokens"} & set(data["context"]["settings"])
    assert data["context"]["settings"]["passkey_multiples"] == [2.0, 3.0]
    assert (tmp_path / "passkey.csv").is_file()


def test_eval_on_a_tiny_checkpoint(tmp_path: Path) -> None:
    from ropekit.model import TinyConfig, TinyLM, save

    torch.manual_seed(0)
    config = TinyConfig(d_model=32, n_layers=1, n_heads=2, n_kv_heads=1, ffn_dim=64, train_length=TRAIN_LENGTH)
    path = save(TinyLM(config), tmp_path / "m")
    result = run("eval", "perplexity", "--model", str(path), "--methods", "none,yarn", *SMALL, "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["context"]["model"]["kind"] == "ropekit-tiny"
    assert len(data["perplexity"]) == 4


def test_report_end_to_end(llama_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "report"
    result = run(
        "report", "--model", str(llama_dir), "--out", str(out), "--methods", "none,linear,yarn", *REPORT_SMALL,
        "--passkey-multiples", "2", "--depths", "0.5", "--trials", "2",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    html = (out / "index.html").read_text()
    for image in re.findall(r"<img src='([^']+)'", html):
        assert (out / image).stat().st_size > 1000, image
    assert {"wavelengths.png", "perplexity.png", "passkey.png"} <= {p.name for p in out.iterdir()}
    results = json.loads((out / "results.json").read_text())
    assert {r["method"] for r in results["passkey"]} == {"none", "linear", "yarn"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["findings"] and flat(summary["verdict"]) in flat(result.stdout)
    assert [row["method"] for row in summary["table"]["rows"]] == ["none", "linear", "yarn"]
    assert "report" in result.stdout and "index.html" in flat(result.stdout)


def test_report_out_that_is_a_file(llama_dir: Path, tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    target.write_text("not a folder")
    result = run("report", "--model", str(llama_dir), "--out", str(target), *REPORT_SMALL)
    assert_clean_failure(result, "exists and is not a folder")


def test_missing_model_path(tmp_path: Path) -> None:
    result = run("eval", "perplexity", "--model", str(tmp_path / "nowhere"), *SMALL)
    assert_clean_failure(result, "does not exist")


def test_directory_without_config(tmp_path: Path) -> None:
    assert_clean_failure(run("eval", "perplexity", "--model", str(tmp_path), *SMALL), "no config.json")


def test_directory_without_weights(tmp_path: Path, llama_config) -> None:
    llama_config(**SMALL_MODEL).save_pretrained(tmp_path)
    result = run("report", "--model", str(tmp_path), "--out", str(tmp_path / "r"), *REPORT_SMALL)
    assert_clean_failure(result, str(tmp_path))
    assert not (tmp_path / "r").exists()


def test_non_rope_model(tmp_path: Path) -> None:
    random_hf_folder(tmp_path, "gpt2", vocab=300, hidden=32, layers=1, heads=2, positions=128)
    for command, small in ((["eval", "perplexity"], SMALL), (["report", "--out", str(tmp_path / "r")], REPORT_SMALL)):
        result = run(*command, "--model", str(tmp_path), *small)
        assert_clean_failure(result, "GPT2LMHeadModel is not a RoPE model", "Llama")


def test_length_beyond_memory(llama_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from transformers import LlamaModel  # the body: evaluations run it, then the output head in chunks

    forward = LlamaModel.forward

    def limited(self, input_ids=None, **kwargs):
        if input_ids.shape[-1] > TRAIN_LENGTH:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(LlamaModel, "forward", limited)
    result = run("eval", "perplexity", "--model", str(llama_dir), "--methods", "none", *SMALL)
    assert_clean_failure(result, "out of memory at sequence length 128", "--device-map auto")


def test_passkey_length_too_short_for_an_episode(llama_dir: Path) -> None:
    result = run("eval", "passkey", "--model", str(llama_dir), "--methods", "none", "--multiples", "1", "--trials", "1")
    assert_clean_failure(result, "passkey episode", "64")


@pytest.mark.parametrize(
    ("options", "fragment"),
    [
        (["--methods", "none,rotary-magic"], "unknown rope_type 'rotary-magic'"),
        (["--factor", "0.5"], "--factor must be >= 1"),
        (["--factor", "big"], "--factor must be 'auto' or a number"),
        (["--multiples", "1,x"], "--multiples must be a comma-separated list"),
        (["--multiples", "0,1"], "multiples must be > 0"),
        (["--mode", "strided"], "--mode must be one of"),
        (["--max-tokens", "0"], "--max-tokens must be an integer >= 1"),
    ],
)
def test_bad_options_are_named(llama_dir: Path, options: list[str], fragment: str) -> None:
    assert_clean_failure(run("eval", "perplexity", "--model", str(llama_dir), *options), fragment)


def test_bad_passkey_options_are_named(llama_dir: Path) -> None:
    result = run("eval", "passkey", "--model", str(llama_dir), "--trials", "0")
    assert_clean_failure(result, "trials must be an integer >= 1")
    result = run("eval", "passkey", "--model", str(llama_dir), "--depths", "0.5,2")
    assert_clean_failure(result, "depths must be in [0, 1]")
