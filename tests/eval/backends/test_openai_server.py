"""``--engine openai`` against llama.cpp's own server (``llama-cpp-python[server]``), started here on 127.0.0.1 with
SmolLM2's GGUF file and stopped afterwards; only loopback traffic.

That server takes prompts only as text. A sample's ids (its pieces tokenized one by one, joined where SmolLM2's
byte-level BPE splits text on its own) are the ids of its text tokenized whole, so the engine sends the text and
gets the same answers (tested); a prompt whose text would re-tokenise otherwise ("again." + " " + "The" against
"again." + " The") is refused (tested). The other tests start it through ``helpers/ids_server.py``, which lets it take the
prompt as token ids, as llama.cpp's C++ server, vLLM and SGLang do.

The oracle is ``--engine llamacpp`` on the same file: the same scores on the same samples, the server's greedy text
starting with the engine's answer (the engine stops once the canonical answer is out), the same perplexity.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from helpers.llama_server import N_CTX, SERVER_PACKAGES, Server

for _package in SERVER_PACKAGES:
    pytest.importorskip(_package)

#: slow: a server start and 1024-token prompts take minutes on a loaded 2-core machine
pytestmark = [pytest.mark.llamacpp, pytest.mark.real, pytest.mark.slow]

LENGTH = 1024


@pytest.fixture(scope="module")
def server(smollm2_path, tmp_path_factory):
    running = Server(smollm2_path, tmp_path_factory.mktemp("server") / "server.log")
    running.start()
    yield running
    running.stop()


@pytest.fixture(scope="module")
def engine(smollm2_path):
    from ropekit.eval.backends.llamacpp import LlamaCppEvalModel

    model = LlamaCppEvalModel(smollm2_path, threads=1)
    yield model
    model.close()


def served(path, server, **options):
    from ropekit.eval.backends.openai import OpenAIEvalModel
    from ropekit.eval.backends.openai_client import OpenAIClient

    client = OpenAIClient(server.url, retries=1, backoff=0.1, timeout=600)
    return OpenAIEvalModel(path, server.url, client=client, **options)


@pytest.fixture(scope="module")
def samples(engine):
    from ropekit.eval.tasks.run import TaskSettings, make_samples

    settings = TaskSettings(methods=("none",), tasks=("niah_single_1", "vt"), lengths=(LENGTH,), samples=2)
    return settings, make_samples(engine, settings)


def test_answers_equal_the_llamacpp_engine(smollm2_path, server, engine, samples, tmp_path) -> None:
    """Per question: the server's greedy text starts with the engine's answer (which stops once the canonical answer
    is out) and scores the same; per task, the same rows through ``run_tasks``."""
    from ropekit.eval.tasks.decode import greedy_answer
    from ropekit.eval.tasks.run import run_tasks
    from ropekit.eval.tasks.scoring import score

    settings, made = samples
    model = served(smollm2_path, server, concurrency=2, journal=tmp_path / "answers.jsonl")
    group = [s for key in sorted(made) for s in made[key]]
    texts = model.answer_all(group)
    for sample in group:
        decoder = engine.decoder()
        decoder.extend(torch.from_numpy(sample.context), keep=0)
        for question, text in zip(sample.questions, texts[id(sample)][0], strict=True):
            answer = greedy_answer(decoder, question.ids, question.target, question.budget, engine.stop_tokens)
            ours = engine.detokenize(answer.tokens)
            assert text.startswith(ours)
            assert score(text, question.answers, question.metric) == score(ours, question.answers, question.metric)
    theirs = run_tasks(model, settings, samples=made)  # from the journal: asks the server nothing more
    ours = run_tasks(engine, settings, samples=made)
    assert [(r["task"], r["score"]) for r in theirs.rows] == [(r["task"], r["score"]) for r in ours.rows]
    described = theirs.context["model"]
    assert described["kind"] == "openai" and described["server_model"]
    assert model.ids_accepted is True


def test_a_server_taking_only_text_gets_the_samples_as_text_and_refuses_a_mismatch(
    smollm2_path, engine, samples, tmp_path
) -> None:
    """ropekit's samples go as text (it re-tokenises to their ids) and are answered as the engine answers them; a
    prompt made of pieces the tokenizer would merge ("again." + " " + "The") is refused in one line."""
    from ropekit.eval.backends.openai_client import ServerError
    from ropekit.eval.tasks.decode import greedy_answer
    from ropekit.eval.tasks.scoring import score
    from ropekit.synthetic.base import Sample

    _, made = samples
    sample = made[LENGTH, "niah_single_1"][0]
    pieces = [engine.encode(text).numpy() for text in (b" There and back again.", b" ", b"The grass is green.")]
    split = Sample(
        "niah_single_1", np.concatenate([*pieces, sample.context[: -sum(map(len, pieces))]]), sample.questions
    )
    text_only = Server(smollm2_path, tmp_path / "server.log", ids=False)
    text_only.start()
    try:
        model = served(smollm2_path, text_only)
        texts = model.answer_all([sample])
        assert model.ids_accepted is False  # the server took the prompt as text
        decoder = engine.decoder()
        decoder.extend(torch.from_numpy(sample.context), keep=0)
        for question, text in zip(sample.questions, texts[id(sample)][0], strict=True):
            ours = engine.detokenize(
                greedy_answer(decoder, question.ids, question.target, question.budget, engine.stop_tokens).tokens
            )
            assert text.startswith(ours) and score(text, question.answers) == score(ours, question.answers)
        with pytest.raises(ServerError, match="re-tokenises to different ids") as caught:
            model.answer_all([split])
        assert "\n" not in str(caught.value)
    finally:
        text_only.stop()


def test_a_server_that_dies_keeps_its_answers_and_the_rerun_resumes(smollm2_path, server, samples, tmp_path) -> None:
    from ropekit.eval.backends.openai_client import ServerError

    _, made = samples
    group = [s for key in sorted(made) for s in made[key]]
    journal = tmp_path / "answers.jsonl"
    model = served(smollm2_path, server, journal=journal)
    first = model.answer_all(group[:2])
    server.stop()  # the server dies with the rest of the samples unanswered
    try:
        with pytest.raises(ServerError, match="unreachable") as caught:
            model.answer_all(group)
        assert "\n" not in str(caught.value)
    finally:
        server.start()
    again = served(smollm2_path, server, journal=journal)
    posts = []
    post = again.client.post
    again.client.post = lambda path, body: posts.append(path) or post(path, body)
    result = again.answer_all(group)
    asked = sum(len(s.questions) for s in group[2:])
    assert len(posts) == asked
    assert [result[id(s)] for s in group[:2]] == [first[id(s)] for s in group[:2]]


def test_the_same_server_restarted_with_another_rope_is_refused(smollm2_path, samples, tmp_path) -> None:
    """The same URL, model and context, restarted with ``--rope_freq_scale 0.125``: llama-cpp-python reports nothing
    that changed (no ``/props``, the same ``/models`` entry), and its greedy continuation of the fixed prompt names the
    change; the oracle is the plain server's own continuation, asked again after a plain restart and found equal."""
    from ropekit.eval.backends.openai import JournalMismatch

    _, made = samples
    journal = tmp_path / "answers.jsonl"
    server = Server(smollm2_path, tmp_path / "server.log")
    server.start()
    try:
        model = served(smollm2_path, server, journal=journal)
        model.answer_all(made[LENGTH, "niah_single_1"][:1])
        server.stop()
        server.start()  # plain again: the same computation, the run resumes
        assert served(smollm2_path, server, journal=journal).computes == model.computes
        server.stop()
        server.options = ("--rope_freq_scale", "0.125")
        server.start()
        with pytest.raises(JournalMismatch) as caught:
            served(smollm2_path, server, journal=journal)
    finally:
        server.stop()
    line = str(caught.value)
    assert "the greedy continuation of the fixed prompt" in line and "models_entry" not in line and "\n" not in line
    assert model.computes["prompt_tokens"] < N_CTX and model.computes["logprobs"] is None  # no --logits_all


def test_a_context_shorter_than_the_samples_is_one_line(smollm2_path, server) -> None:
    from ropekit.eval.backends.openai_client import ServerError

    model = served(smollm2_path, server)
    with pytest.raises(ServerError, match="shorter than the samples") as caught:
        model.answer(list(range(1000, 1000 + N_CTX + 10)), 8)
    assert "\n" not in str(caught.value)


def test_perplexity_without_prompt_logprobs_is_refused_by_name(smollm2_path, server, engine) -> None:
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.eval.sweep import evaluation_text

    ids, _ = evaluation_text(engine)
    model = served(smollm2_path, server)
    with pytest.raises(ValueError, match="needs the log-probabilities of the prompt's tokens") as caught:
        perplexity_at(model, ids, 256, engine.train_length, max_tokens=256)
    assert model.server_model in str(caught.value) and "\n" not in str(caught.value)


@pytest.mark.slow
def test_perplexity_from_misaligned_prompt_logprobs_is_refused(smollm2_path, engine, tmp_path) -> None:
    """llama-cpp-python 0.3.36's server reads each prompt token's log-probability from the row after the token
    (86,287 against llama.cpp's own 12.1 on these 512 tokens); its own generation shows it, and perplexity is
    refused, by name, rather than reported."""
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.eval.sweep import evaluation_text

    ids, _ = evaluation_text(engine)
    server = Server(smollm2_path, tmp_path / "server.log", logits_all=True)
    server.start()
    try:
        model = served(smollm2_path, server)
        with pytest.raises(ValueError, match="from another position than the one that predicts each token") as caught:
            perplexity_at(model, ids, 512, engine.train_length, max_tokens=512)
    finally:
        server.stop()
    assert "\n" not in str(caught.value) and model.server_model in str(caught.value)
