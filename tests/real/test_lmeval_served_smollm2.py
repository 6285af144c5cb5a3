"""lm-eval's ``local-completions`` backend on ropekit's samples, against SmolLM2-135M's GGUF served by
llama-cpp-python's OpenAI-compatible server (started here on 127.0.0.1, stopped afterwards; only loopback traffic).

The task folder is written from the same GGUF (``eval tasks --write-lm-eval``); lm-eval sends each prompt to the
server either as text (``tokenizer_backend=None``: the server tokenizes it with llama.cpp's tokenizer) or as the ids
of lm-eval's own tokenizer (``tokenizer_backend=huggingface`` on the folder's tokenizer, ``tokenized_requests=True``:
the server started through ``helpers/ids_server.py``, which takes ids as vLLM and SGLang do; it takes text too).

Oracle: ``--engine llamacpp`` on the same file and the same samples (the same ids, the same greedy decoding in
llama.cpp): lm-eval's score per task and length, and ``effective-length`` of its output, equal ropekit's. Four tasks
of three families at one short length keep it to minutes (``evidence/smollm2/served_lmeval`` runs all eleven).
llama-cpp-python's server applies a repeat penalty of 1.1 unless a request says otherwise, even at temperature 0;
lm-eval's ``--gen_kwargs repeat_penalty=1.0`` makes its decoding greedy (without it, answers part: the evidence)."""

from __future__ import annotations

import json

import pytest

from helpers.lmeval_run import assert_same_as_ropekit, cli, run_lm_eval

pytest.importorskip("lm_eval")
for _package in ("aiohttp", "tenacity"):  # lm-eval's API backends (lm-eval[api])
    pytest.importorskip(_package)
from helpers.llama_server import N_CTX, SERVER_PACKAGES, Server  # noqa: E402

for _package in SERVER_PACKAGES:
    pytest.importorskip(_package)

pytestmark = [pytest.mark.llamacpp, pytest.mark.real, pytest.mark.slow]

TASKS = ("niah_single_1", "vt", "cwe", "fwe")
LENGTHS = (256,)
SAMPLES = 2


@pytest.fixture(scope="module")
def exported(smollm2_path, tmp_path_factory):
    folder = tmp_path_factory.mktemp("lmeval") / "tasks"
    written = cli("eval", "tasks", "--model", smollm2_path, "--tasks", ",".join(TASKS),
                  "--lengths", ",".join(map(str, LENGTHS)), "--samples", str(SAMPLES), "--write-lm-eval", folder)  # fmt: skip
    assert written.exit_code == 0, written.output
    return folder


@pytest.fixture(scope="module")
def server(smollm2_path, tmp_path_factory):
    with Server(smollm2_path, tmp_path_factory.mktemp("server") / "server.log") as running:
        yield running


@pytest.fixture(scope="module")
def own(smollm2_path):
    """ropekit's own run: ``eval tasks --engine llamacpp`` on the same file and samples."""
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel
    from ropekit.eval.tasks.run import TaskSettings, run_tasks

    engine = LlamaCppEvalModel(smollm2_path, threads=1)
    try:
        return run_tasks(engine, TaskSettings(methods=("none",), tasks=TASKS, lengths=LENGTHS, samples=SAMPLES))
    finally:
        engine.close()


def test_llamacpps_tokenizer_reads_the_prompts_as_ropekits_ids(smollm2_path, exported):
    """The text of every prompt is, to llama.cpp's tokenizer too, exactly the ids the export checked (transformers'
    reading of the file's tokenizer, as ropekit builds the samples): a server that tokenizes text sees ropekit's."""
    from llama_cpp import Llama
    from transformers import AutoTokenizer

    vocab = Llama(str(smollm2_path), vocab_only=True, verbose=False)
    tokenizer = AutoTokenizer.from_pretrained(exported / "tokenizer")
    docs = [json.loads(line) for line in (exported / "samples.jsonl").read_text().splitlines()]
    assert {(d["ropekit_task"], d["max_length"], d["sample"]) for d in docs} == {
        (task, length, sample) for task in TASKS for length in LENGTHS for sample in range(SAMPLES)
    }
    for doc in docs:
        ids = tokenizer(doc["input"], add_special_tokens=False)["input_ids"]
        assert len(ids) == doc["length"]
        assert vocab.tokenize(doc["input"].encode(), add_bos=False, special=True) == ids


@pytest.mark.parametrize("requests", ["text", "ids"])
def test_local_completions_scores_equal_the_llamacpp_engine(exported, server, own, requests, tmp_path):
    args = f"base_url={server.url}/completions,model=smollm2,max_length={N_CTX},max_retries=1"
    if requests == "text":
        args += ",tokenizer_backend=None"
    else:
        args += f",tokenizer_backend=huggingface,tokenizer={exported / 'tokenizer'},tokenized_requests=True"
    results = run_lm_eval(
        exported, exported, tmp_path / "out", ["ropekit"], backend="local-completions", args=args,
        gen_kwargs="repeat_penalty=1.0",
    )  # fmt: skip
    assert_same_as_ropekit(results, tmp_path / "out", own)
