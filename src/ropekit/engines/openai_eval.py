"""Evaluation through an OpenAI-compatible completions server: the model as it is served.

:class:`OpenAIEvalModel` tokenizes with the model's own GGUF file (llama.cpp's tokenizer, no weights loaded), so the
samples are the same token ids as on the other engines, and sends them to the server:

- as token ids where the server accepts them (vLLM, SGLang, llama.cpp's own server), else as text that re-tokenises
  to exactly those ids (checked here with special tokens parsed, as servers tokenize prompts; a mismatch is
  refused), and the server's count of prompt tokens must equal the sample's;
- greedily: ``temperature 0``, ``max_tokens`` = the question's budget, no repetition penalty; up to ``concurrency``
  requests in flight (:meth:`OpenAIEvalModel.answer_all`);
- every answer is appended to a journal (``journal``, JSON lines keyed by the served model, the prompt's ids and the
  budget), so a run cut short (the server died) resumes without asking again what was answered;
- perplexity from prompt log-probabilities (``echo`` with ``logprobs``) where the server returns them, else refused.

The server runs the RoPE it was started with: only the file's own scaling (``native``; ``none`` on a plain file)
can be evaluated, and no attention method.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ropekit.engines.llamacpp_eval import LlamaCppEvalModel
from ropekit.engines.openai_client import OpenAIClient, ServerError

__all__ = ["OpenAIEvalModel", "ServerError"]


class OpenAIEvalModel:
    """A model behind an OpenAI-compatible server; the :class:`~ropekit.eval.models.EvalModel` protocol plus
    :meth:`answer_all`.

    Args:
        tokenizer: the served model's GGUF file (its tokenizer, RoPE and training length).
        url: the server's base URL (``.../v1``).
        concurrency: requests in flight at once.
        journal: a JSON-lines file of finished answers (read to resume, appended to).

    Raises:
        ServerError: the server is unreachable or lists no model.
    """

    def __init__(
        self,
        tokenizer: str | Path,
        url: str,
        *,
        concurrency: int = 4,
        journal: Path | None = None,
        client: OpenAIClient | None = None,
    ) -> None:
        self.vocab = LlamaCppEvalModel(tokenizer)
        self.name, self.url, self.concurrency = str(tokenizer), url, concurrency
        self.train_length, self.rope = self.vocab.train_length, self.vocab.rope
        self.native_scaling = self.vocab.native_scaling
        self.separator, self.stop_tokens, self.byte_level = self.vocab.separator, self.vocab.stop_tokens, False
        self.client = client or OpenAIClient(url)
        models = self.client.get("/models").get("data") or []
        if not models:
            raise ServerError(f"{url}/models lists no model")
        self.server_model = str(models[0].get("id"))
        self.max_context = _max_context(models[0])
        self.ids_accepted: bool | None = None
        self.journal = journal
        self.done = _read_journal(journal)
        self._lock = threading.Lock()

    def resume_from(self, journal: Path, *, fresh: bool = False) -> None:
        """Keep answers in ``journal`` and reuse those it holds (``fresh``: forget them, start it again)."""
        if fresh and journal.is_file():
            journal.unlink()
        self.journal, self.done = journal, _read_journal(journal)

    def set_scaling(self, scaling: Any) -> None:
        """Raises ``LookupError`` for anything but the served model's own RoPE (the server was started with it)."""
        if scaling != self.native_scaling:
            raise LookupError("a server runs the RoPE it was started with: only method native (none on a plain file)")

    def set_attention(self, method: Any) -> list[str] | None:
        if method is not None:
            raise LookupError("a server runs no attention method of ropekit's")
        return None

    def encode(self, text: bytes) -> torch.Tensor:
        return self.vocab.encode(text)

    def detokenize(self, tokens: list[int]) -> str:
        return self.vocab.detokenize(tokens)

    def prompt(self, ids: list[int]) -> list[int] | str:
        """``ids`` as the server takes them: the ids themselves, or text that re-tokenises to them.

        Raises:
            ServerError: the server takes only text and the text re-tokenises to other ids.
        """
        if self.ids_accepted is not False:
            return ids
        text = self.vocab.vocab.detokenize(ids, special=True)
        if self.vocab.vocab.tokenize(text, add_bos=False, special=True) != ids:
            raise ServerError(
                f"{self.url} takes prompts only as text, and this prompt's text re-tokenises to different ids; "
                "refusing to evaluate other samples than the other engines'"
            )
        return text.decode("utf-8", errors="strict")

    def complete(self, ids: list[int], budget: int, **extra: Any) -> dict[str, Any]:
        """One greedy completion of ``ids`` (``budget`` tokens at most); the server's first choice and usage."""
        body = {
            "model": self.server_model,
            "temperature": 0.0,
            "max_tokens": budget,
            "repeat_penalty": 1.0,
            "top_k": 1,
            **extra,
        }
        prompt = self.prompt(ids)
        try:
            reply = self.client.post("/completions", {**body, "prompt": prompt})
            self.ids_accepted = True if self.ids_accepted is None else self.ids_accepted
        except ServerError as error:
            # a prompt sent as ids before any was accepted may be refused for being ids (llama.cpp's Python server:
            # HTTP 500); with --concurrency, several are in flight when the first refusal comes, and each goes again
            # as text (whichever thread learnt it first)
            wrapped = _context_error(error, len(ids) + budget)
            as_ids = not isinstance(prompt, str)
            if wrapped is not error or not as_ids or self.ids_accepted or "answered HTTP" not in str(error):
                raise wrapped from None
            self.ids_accepted = False
            try:
                reply = self.client.post("/completions", {**body, "prompt": self.prompt(ids)})
            except ServerError as again:
                raise _context_error(again, len(ids) + budget) from None
        counted = (reply.get("usage") or {}).get("prompt_tokens")
        if counted is not None and int(counted) != len(ids):
            raise ServerError(
                f"{self.url} counted {counted} prompt tokens for a prompt of {len(ids)}: it tokenizes differently "
                "(another model or tokenizer?)"
            )
        return {**reply["choices"][0], "usage": reply.get("usage") or {}}

    def answer(self, ids: list[int], budget: int) -> tuple[str, int]:
        """The greedy answer's text to the prompt ``ids`` and the forward tokens it took (journalled)."""
        salt = f"{self.server_model}|{budget}".encode()
        key = hashlib.sha256(np.asarray(ids, np.int64).tobytes() + salt).hexdigest()
        if key in self.done:
            return self.done[key]
        choice = self.complete(ids, budget)
        found = (choice["text"], len(ids) + int(choice["usage"].get("completion_tokens") or 0))
        with self._lock:
            self.done[key] = found
            if self.journal is not None:
                with self.journal.open("a") as handle:
                    handle.write(json.dumps({"key": key, "text": found[0], "forward": found[1]}) + "\n")
        return found

    def answer_all(self, samples: list[Any], on_sample: Callable[[Any], None] | None = None) -> dict[int, Any]:
        """Every question of ``samples``, ``concurrency`` requests in flight: ``{id(sample): ([text per
        question], forward tokens)}``; ``on_sample`` is called as each sample's questions are all answered.

        Raises:
            ServerError: the server's context is shorter than a prompt with its budget, or a request failed.
        """
        jobs = [(s, q) for s in samples for q in s.questions]
        longest = max((len(s.context) + len(q.ids) + q.budget for s, q in jobs), default=0)
        if self.max_context is not None and longest > self.max_context:
            raise ServerError(
                f"{self.url} serves a context of {self.max_context:,} tokens, shorter than the samples "
                f"({longest:,} with the answer budget)"
            )
        left = {id(s): len(s.questions) for s in samples}
        out: dict[int, Any] = {id(s): ([None] * len(s.questions), 0) for s in samples}

        def one(sample: Any, index: int) -> None:
            question = sample.questions[index]
            text, forward = self.answer(np.concatenate([sample.context, question.ids]).tolist(), question.budget)
            with self._lock:
                out[id(sample)][0][index] = text
                out[id(sample)] = (out[id(sample)][0], out[id(sample)][1] + forward)
                left[id(sample)] -= 1
                finished = left[id(sample)] == 0
            if finished and on_sample is not None:
                on_sample(sample)

        with ThreadPoolExecutor(self.concurrency) as pool:
            futures = [pool.submit(one, s, s.questions.index(q)) for s, q in jobs]
            for future in futures:
                future.result()  # the first failure, after the requests in flight finish
        return out

    def token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """Losses of ``ids[1:]`` from the server's prompt log-probabilities (``echo`` with ``logprobs``).

        Raises:
            ValueError: the server returns no prompt log-probabilities (perplexity is refused).
        """
        refusal = (
            f"perplexity through the server needs its prompt log-probabilities (echo with logprobs), and "
            f"{self.server_model!r} at {self.url} returned none (llama.cpp's Python server: --logits_all true)"
        )
        try:
            choice = self.complete(ids.tolist(), 1, echo=True, logprobs=1)
        except ServerError as error:
            if "context" in str(error):
                raise
            raise ValueError(f"{refusal}; it answered: {error}") from None
        found = (choice.get("logprobs") or {}).get("token_logprobs") or []
        values = found[1 : len(ids)]
        if len(values) != len(ids) - 1 or any(v is None for v in values):
            raise ValueError(refusal)
        return -torch.tensor(values, dtype=torch.float64)

    def predict_last(self, ids: torch.Tensor, count: int) -> torch.Tensor:
        """Greedy continuation of each row before its last ``count - 1`` tokens, as ids (text re-tokenised): equal
        to the teacher-forced predictions up to the first that departs from the row, which is all passkey reads."""
        rows = []
        for row in ids.tolist():
            text, _ = self.answer(row[: len(row) - count + 1], count)
            tokens = self.encode(text.encode()).tolist()[:count]
            rows.append(tokens + [-1] * (count - len(tokens)))
        return torch.tensor(rows, dtype=torch.int64)

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "name": self.name,
            "url": self.url,
            "server_model": self.server_model,
            "server_max_context": self.max_context,
            "prompts": "token ids" if self.ids_accepted else "text (re-tokenised, checked)",
            "concurrency": self.concurrency,
            "tokenizer": self.vocab.describe()["gguf"],
        }


def _max_context(card: dict[str, Any]) -> int | None:
    """The served context from a /models entry (vLLM's ``max_model_len``, llama.cpp's ``meta.n_ctx``...)."""
    for key in ("max_model_len", "context_length", "max_context_length", "n_ctx"):
        if isinstance(card.get(key), int):
            return card[key]
    meta = card.get("meta") or {}
    return meta.get("n_ctx") if isinstance(meta.get("n_ctx"), int) else None


def _context_error(error: ServerError, needed: int) -> ServerError:
    text = str(error).lower()
    if "context" in text and ("exceed" in text or "longer" in text or "maximum" in text):
        return ServerError(f"the server's context is shorter than the samples ({needed:,} tokens needed): {error}")
    return error


def _read_journal(path: Path | None) -> dict[str, tuple[str, int]]:
    if path is None or not path.is_file():
        return {}
    done = {}
    for line in path.read_text().splitlines():
        try:
            row = json.loads(line)
            done[row["key"]] = (row["text"], int(row["forward"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue  # a line cut short by the run that died
    return done
