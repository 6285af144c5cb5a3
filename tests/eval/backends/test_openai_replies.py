"""``--engine openai`` against scripted servers in this process (no engine, no weights): the served model is chosen
(``served_model``, required where several are listed) and every reply must name it; a reply cut short, a JSON list
or a server that drips one byte at a time are one-line errors within the whole-request deadline; prompt
log-probabilities must be aligned with the prompt (the first is null), so a list shifted by one is refused rather
than scored; the CLI takes a transformers folder as ``--model`` and ``--served-model``."""

from __future__ import annotations

import time

import pytest
import torch

pytest.importorskip("transformers")

from helpers.fake_openai import FakeServer, tokenizer_folder
from ropekit.eval.backends.openai import OpenAIEvalModel
from ropekit.eval.backends.openai_client import OpenAIClient, ServerError

#: the prompt's text, one token per character (the byte tokenizer has no merges)
TEXT = "Hi! T"


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tokenizer_folder(tmp_path_factory.mktemp("served") / "model")


@pytest.fixture(scope="module")
def prompt(folder) -> list[int]:
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(folder)(TEXT, add_special_tokens=False)["input_ids"]
    assert len(ids) == len(TEXT)
    return ids


def served(folder, server, **options):
    client = OpenAIClient(server.url, retries=0, backoff=0.01, timeout=options.pop("timeout", 30))
    return OpenAIEvalModel(folder, server.url, client=client, **options)


def completions(reply):
    return lambda path, body: reply(body) if path.endswith("/completions") else None


def test_a_server_listing_several_models_needs_served_model(folder, prompt) -> None:
    from ropekit.eval.backends.openai_served import ServedModelError

    with FakeServer(models=("small", "large")) as server:
        with pytest.raises(ServedModelError, match=r"serves 2 models \('small', 'large'\); name the one to evaluate"):
            served(folder, server)
        with pytest.raises(ServedModelError, match="does not serve 'medium'"):
            served(folder, server, served_model="medium")
        model = served(folder, server, served_model="large")
        model.answer(prompt, 4)
    assert model.server_model == "large" and server.asked[0]["model"] == "large"


def test_a_reply_from_another_model_is_refused(folder, prompt) -> None:
    with FakeServer(models=("small", "large")) as server:
        model = served(folder, server, served_model="large")
        server.script = completions(lambda body: (200, server.reply("/v1/completions", {**body, "model": "small"})[1]))
        with pytest.raises(ServerError, match="answered as model 'small', not the model evaluated \\('large'\\)"):
            model.answer(prompt, 4)


@pytest.mark.parametrize(
    ("reply", "fragment"),
    [
        ((200, b'{"choices": [{"text": "A'), "something other than JSON"),
        ((200, b'{"choices": [{"text": "A"}]}', 4096), "cut its reply short"),
        ((200, [1, 2]), "JSON that is not an object (a list)"),
        ((200, b"<html>busy</html>"), "something other than JSON"),
        ((200, {"choices": [{"text": "A"}], "usage": {"prompt_tokens": "five"}}), "counted 'five' prompt tokens"),
    ],
    ids=["truncated-json", "short-of-content-length", "a-list", "html", "a-string-count"],
)
def test_a_broken_reply_is_one_line(folder, prompt, reply, fragment) -> None:
    with FakeServer(script=completions(lambda body: reply)) as server, pytest.raises(ServerError) as caught:
        served(folder, server).answer(prompt, 4)
    assert fragment in str(caught.value) and "\n" not in str(caught.value)


def test_a_server_dripping_one_byte_at_a_time_times_out_as_a_whole() -> None:
    """Each byte comes well within a per-read timeout, so only a deadline on the whole request ends it (the
    server stops dripping after about 20 s, so a client without one fails this test rather than hanging)."""

    def drip(handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Length", "100")
        handler.end_headers()
        try:
            for _ in range(100):
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass  # the client gave up

    with FakeServer(script=lambda path, body: drip) as server:
        client = OpenAIClient(server.url, retries=0, timeout=1.0)
        with pytest.raises(ServerError, match=r"did not answer within the 1 s timeout after 1 attempts$"):
            client.get("/models")


def logprobs_server(folder, token_logprobs, tokens=None):
    """A server whose echo reply carries these prompt log-probabilities (and token strings)."""

    def reply(body):
        choice = {"text": "", "logprobs": {"token_logprobs": token_logprobs, "tokens": tokens}}
        return 200, {"model": body["model"], "choices": [choice], "usage": {"prompt_tokens": len(body["prompt"])}}

    return FakeServer(script=completions(reply))


LOSSES = [0.5, 1.25, 2.0, 0.75]  # of the prompt's tokens after the first


def test_aligned_prompt_logprobs_are_the_losses(folder, prompt) -> None:
    pieces = list(TEXT)
    with logprobs_server(folder, [None, *(-v for v in LOSSES), -3.0], [*pieces, "x"]) as server:
        losses = served(folder, server).token_losses(torch.tensor(prompt))
    assert losses.tolist() == LOSSES


def test_prompt_logprobs_without_the_leading_null_are_refused(folder, prompt) -> None:
    """Shifted by one: the first number is the second token's, and the last is the generated token's."""
    with logprobs_server(folder, [*(-v for v in LOSSES), -3.0]) as server:
        model = served(folder, server)
        with pytest.raises(ValueError, match="not aligned with the prompt's tokens") as caught:
            model.token_losses(torch.tensor(prompt))
    assert "\n" not in str(caught.value)


def test_prompt_logprobs_for_the_tokens_shifted_by_one_are_refused(folder, prompt) -> None:
    pieces = list(TEXT)
    with logprobs_server(folder, [None, *(-v for v in LOSSES), -3.0], [*pieces[1:], "x", "y"]) as server:
        model = served(folder, server)
        with pytest.raises(ValueError, match="shifted by one position"):
            model.token_losses(torch.tensor(prompt))


def test_no_prompt_logprobs_is_a_clear_sentence(folder, prompt) -> None:
    with logprobs_server(folder, None) as server, pytest.raises(ValueError) as caught:
        served(folder, server).token_losses(torch.tensor(prompt))
    message = str(caught.value)
    assert "needs the log-probabilities of the prompt's tokens" in message and "did not send them" in message
    assert "returned none" not in message


def position_server(folder, *, same_row: bool):
    """A server whose model gives, after reading ``n`` tokens, every token the log-probability ``-(0.5 + n / 10)``;
    its generation says so for the token after the prompt, and its echo says so for each prompt token, either
    aligned (token ``i`` gets the number after ``i`` tokens) or as llama-cpp-python 0.3.36's server does (after
    ``i + 1``: the row of the token itself), the first nulled either way."""

    def after(n: int) -> float:
        return -(0.5 + n / 10)

    def reply(body):
        prompt = body["prompt"]
        n = len(prompt)
        if body.get("echo"):
            values = [None] + [after(i + 1 if same_row else i) for i in range(1, n)] + [after(n)]
            choice = {"text": TEXT[0], "logprobs": {"token_logprobs": values}}
        else:
            choice = {"text": TEXT[0], "logprobs": {"token_logprobs": [after(n)]}}
        return 200, {"model": body["model"], "choices": [choice], "usage": {"prompt_tokens": n}}

    return FakeServer(script=completions(reply))


def test_prompt_logprobs_that_agree_with_generation_are_the_losses(folder, prompt) -> None:
    with position_server(folder, same_row=False) as server:
        losses = served(folder, server).token_losses(torch.tensor(prompt))
    assert losses.tolist() == pytest.approx([0.5 + i / 10 for i in range(1, len(prompt))])


def test_prompt_logprobs_read_from_the_tokens_own_row_are_refused(folder, prompt) -> None:
    """The reply's shape is right (a leading null, one number a token): only the server's own generation shows that
    each number comes from the row after its token."""
    with position_server(folder, same_row=True) as server:
        model = served(folder, server)
        with pytest.raises(ValueError, match="from another position than the one that predicts each token") as caught:
            model.token_losses(torch.tensor(prompt))
    assert "\n" not in str(caught.value)
