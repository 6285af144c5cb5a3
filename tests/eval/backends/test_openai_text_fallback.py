"""``--engine openai`` against a server that refuses prompts as token ids (llama-cpp-python's Python server answers
HTTP 500) while several requests are in flight (``--concurrency``): every one of them is sent again as text, not
only the first to learn of the refusal. The server is a stand-in client that refuses every list prompt only once all
the requests are in flight, so each request is refused as ids; the oracle is the text the stand-in receives (the
prompt's ids detokenised by the tokenizer) and its count of answers."""

from __future__ import annotations

import threading

import pytest

pytest.importorskip("llama_cpp")
pytestmark = [
    pytest.mark.llamacpp,
    pytest.mark.real,
    pytest.mark.slow,
]  # reading the tokenizer: about 40 s on the loaded 2 cores

CONCURRENCY = 4


class IdsRefusingServer:
    """``get``/``post`` as :class:`~ropekit.eval.backends.openai_client.OpenAIClient`: prompts as ids are refused (after
    every request has arrived), prompts as text are answered with ``"ok"`` and their token count."""

    def __init__(self) -> None:
        self.tokenize, self.barrier = None, threading.Barrier(CONCURRENCY, timeout=30)
        self.texts: list[str] = []
        self.lock = threading.Lock()

    def get(self, path: str) -> dict:
        return {"data": [{"id": "stand-in", "meta": {"n_ctx": 2048}}]}

    def post(self, path: str, body: dict) -> dict:
        from ropekit.eval.backends.openai_client import ServerError

        prompt = body["prompt"]
        if not isinstance(prompt, str):
            self.barrier.wait()  # every request is in flight as ids before the first refusal
            raise ServerError(f"http://stand-in{path} answered HTTP 500: Input should be a valid string")
        with self.lock:
            self.texts.append(prompt)
        count = len(self.tokenize(prompt))
        return {"choices": [{"text": "ok"}], "usage": {"prompt_tokens": count, "completion_tokens": 1}}


def test_every_request_in_flight_goes_again_as_text(smollm2_path) -> None:
    from ropekit.eval.backends.openai import OpenAIEvalModel

    server = IdsRefusingServer()
    model = OpenAIEvalModel(smollm2_path, "http://stand-in/v1", concurrency=CONCURRENCY, client=server)
    vocab = model.vocab
    try:
        server.tokenize = lambda text: vocab.encode(text.encode()).tolist()
        texts = [f"The grass is green. The sky is blue. Question {i}: what colour is the grass?" for i in range(4)]
        prompts = [vocab.encode(text.encode()).tolist() for text in texts]
        answers = {}

        def ask(index: int) -> None:
            answers[index] = model.answer(prompts[index], 4)

        threads = [threading.Thread(target=ask, args=(i,)) for i in range(CONCURRENCY)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert answers == {i: ("ok", len(prompts[i]) + 1) for i in range(CONCURRENCY)}
        assert sorted(server.texts) == sorted(texts) and model.ids_accepted is False
    finally:
        vocab.close()
