"""Evaluation through an OpenAI-compatible completions server: the model as it is served.

:class:`OpenAIEvalModel` tokenizes with the model's own tokenizer, read locally (its GGUF file or its transformers
folder, no weights loaded: :mod:`ropekit.eval.backends.openai_vocab`), so the samples are the same token ids as on the
other engines, and sends them to the server:

- as token ids where the server accepts them (vLLM, SGLang, llama.cpp's own server), else as text that re-tokenises
  to exactly those ids (checked here with special tokens parsed, as servers tokenize prompts; a mismatch is
  refused), and the server's count of prompt tokens must equal the sample's;
- to one served model (``served_model``, required where the server lists several), and every reply must name it;
- greedily: ``temperature 0``, ``max_tokens`` = the question's budget, no repetition penalty; up to ``concurrency``
  requests in flight (:meth:`OpenAIEvalModel.answer_all`);
- every answer is appended to a journal (:mod:`ropekit.eval.backends.openai_journal`), so a run cut short (the server
  died) resumes without asking again what was answered, and only from the same server, model, tokenizer and settings,
  and a server that computes the same continuation of one fixed prompt past L0
  (:mod:`ropekit.eval.backends.openai_fingerprint`: a server restarted with another RoPE reports the same);
- perplexity from prompt log-probabilities (``echo`` with ``logprobs``) where the server returns them, checked to be
  aligned with the prompt's ids, else refused.

A reply that is not a completion (no ``choices``, a ``text`` that is not a string) is a one-line
:class:`ServerError` and is never journalled. The server runs the RoPE it was started with: only the model's own
scaling (``native``; ``none`` on a plain model) can be evaluated, and no attention method.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ropekit.eval.backends.openai_client import OpenAIClient, ServerError
from ropekit.eval.backends.openai_journal import AnswerJournal, JournalMismatch, answer_key
from ropekit.eval.backends.openai_served import REQUEST, choose_model, max_context, server_identity, server_props
from ropekit.eval.backends.openai_vocab import served_vocab
from ropekit.eval.protocol import AnswersAll, EvalModel

__all__ = ["JournalMismatch", "OpenAIEvalModel", "ServerError"]


_UNCHECKED = object()


class OpenAIEvalModel(EvalModel, AnswersAll):
    """A model behind an OpenAI-compatible server; the :class:`~ropekit.eval.protocol.EvalModel` protocol plus
    :meth:`answer_all`.

    Args:
        tokenizer: the served model's GGUF file or transformers folder (its tokenizer, RoPE and training length).
        url: the server's base URL (``.../v1``).
        concurrency: requests in flight at once.
        journal: a JSON-lines file of finished answers (read to resume, appended to).
        served_model: the id of the model to evaluate among those the server lists (needed where it lists several).
        timeout: seconds a whole request may take (for the client made here).

    Raises:
        ServerError: the server is unreachable or lists no model; its ``served_model`` subclass where the choice of
            model is missing or wrong.
        JournalMismatch: ``journal`` holds answers from another server, model, tokenizer or settings.
    """

    def __init__(
        self,
        tokenizer: str | Path,
        url: str,
        *,
        concurrency: int = 4,
        journal: Path | None = None,
        client: OpenAIClient | None = None,
        served_model: str | None = None,
        timeout: float = 600.0,
    ) -> None:
        self.client = client or OpenAIClient(url, timeout=timeout)
        card = choose_model(url, self.client.get("/models").get("data"), served_model)
        self.vocab = served_vocab(tokenizer)
        self.name, self.url, self.concurrency = str(tokenizer), url, concurrency
        self.train_length, self.rope = self.vocab.train_length, self.vocab.rope
        self.native_scaling = self.vocab.native_scaling
        self.separator, self.stop_tokens, self.byte_level = self.vocab.separator, self.vocab.stop_tokens, False
        self.server_model = str(card["id"])
        props = server_props(self.client)
        self.max_context = max_context(card, props)
        self.identity = server_identity(url, card, props, self.vocab.fingerprint())
        self.ids_accepted: bool | None = None
        self.echo_error: object = _UNCHECKED  # why the prompt log-probabilities are misaligned (None: they are not)
        self.computes: dict[str, Any] | None = None  # what the server computes (asked where a journal is kept)
        self.journal = AnswerJournal(None, self.identity)
        if journal is not None:
            self.resume_from(journal)

    def resume_from(self, journal: Path, *, fresh: bool = False) -> None:
        """Keep answers in ``journal`` and reuse those it holds (``fresh``: forget them, start it again), once the
        server has computed the fixed prompt's continuation (:mod:`~ropekit.eval.backends.openai_fingerprint`).

        Raises:
            JournalMismatch: the journal holds answers from another server, model, tokenizer or settings, or from a
                server that computes another continuation of the fixed prompt (restarted with another RoPE).
            ServerError: the server does not answer the fixed prompt.
        """
        from ropekit.eval.backends.openai_fingerprint import server_computes

        if self.computes is None:
            self.computes = server_computes(self)
        self.journal = AnswerJournal(journal, self.identity, computes=self.computes, fresh=fresh)

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
        text = self.vocab.as_text(ids)
        if text is None:
            raise ServerError(
                f"{self.url} takes prompts only as text, and this prompt's text re-tokenises to different ids; "
                "refusing to evaluate other samples than the other engines'"
            )
        return text

    def complete(self, ids: list[int], budget: int, **extra: Any) -> dict[str, Any]:
        """One greedy completion of ``ids`` (``budget`` tokens at most): the server's first choice, its usage and
        how the prompt was sent (``sent``: ``"ids"`` or ``"text"``).

        Raises:
            ServerError: the request failed, or the reply is not a completion of this prompt by the served model.
        """
        body = {"model": self.server_model, **REQUEST, "max_tokens": budget, **extra}
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
            if wrapped is not error or not as_ids or self.ids_accepted or error.status is None:
                raise wrapped from None
            self.ids_accepted = False
            prompt = self.prompt(ids)
            try:
                reply = self.client.post("/completions", {**body, "prompt": prompt})
            except ServerError as again:
                raise _context_error(again, len(ids) + budget) from None
        choice = self._checked(reply, len(ids))
        return {**choice, "usage": reply.get("usage") or {}, "sent": "text" if isinstance(prompt, str) else "ids"}

    def _checked(self, reply: dict[str, Any], length: int) -> dict[str, Any]:
        """The reply's first choice, once the reply is shown to be a completion of a ``length``-token prompt by the
        served model."""
        where = f"{self.url}/completions"
        model = reply.get("model")
        if model is not None and str(model) != self.server_model:
            raise ServerError(
                f"{where} answered as model {str(model)!r}, not the model evaluated ({self.server_model!r})"
            )
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise ServerError(f"{where} answered without a completion (choices: {_shown(choices)})")
        if not isinstance(choices[0].get("text"), str):
            raise ServerError(f"{where} answered a completion whose text is {_shown(choices[0].get('text'))}")
        usage = reply.get("usage") or {}
        counted = usage.get("prompt_tokens") if isinstance(usage, dict) else None
        if counted is not None and counted != length:
            raise ServerError(
                f"{self.url} counted {_shown(counted)} prompt tokens for a prompt of {length}: it tokenizes "
                "differently (another model or tokenizer?)"
            )
        return choices[0]

    def answer(self, ids: list[int], budget: int) -> tuple[str, int]:
        """The greedy answer's text to the prompt ``ids`` and the forward tokens it took (journalled)."""
        key = answer_key(ids, budget, self.journal.digest)
        found = self.journal.get(key)
        if found is not None:
            return found["text"], found["forward"]
        choice = self.complete(ids, budget)
        completed = choice["usage"].get("completion_tokens")
        forward = len(ids) + (completed if isinstance(completed, int) and completed >= 0 else 0)
        self.journal.add(key, choice["text"], forward, choice["sent"])
        return choice["text"], forward

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
            with lock:
                out[id(sample)][0][index] = text
                out[id(sample)] = (out[id(sample)][0], out[id(sample)][1] + forward)
                left[id(sample)] -= 1
                finished = left[id(sample)] == 0
            if finished and on_sample is not None:
                on_sample(sample)

        lock = threading.Lock()
        with ThreadPoolExecutor(self.concurrency) as pool:
            futures = [pool.submit(one, s, s.questions.index(q)) for s, q in jobs]
            for future in futures:
                future.result()  # the first failure, after the requests in flight finish
        return out

    def token_losses(self, ids: torch.Tensor) -> torch.Tensor:
        """Losses of ``ids[1:]`` from the server's prompt log-probabilities (``echo`` with ``logprobs``).

        The log-probabilities must be aligned with ``ids``: the first token's is ``null`` (nothing predicts it), where
        the server names the tokens, they are the prompt's own rather than the prompt's shifted by one, and (checked
        once, :func:`~ropekit.eval.backends.openai_logprobs.echo_offset_error`) each comes from the position that
        predicts its token, as the server's own generation reads it.

        Raises:
            ValueError: the server returns no prompt log-probabilities, or ones not aligned with ``ids``
                (perplexity is refused).
        """
        asked = (
            f"perplexity through the server needs the log-probabilities of the prompt's tokens (a completion with "
            f"echo and logprobs), and {self.server_model!r} at {self.url}"
        )
        try:
            choice = self.complete(ids.tolist(), 1, echo=True, logprobs=1)
        except ServerError as error:
            if error.kind == "context":
                raise
            raise ValueError(f"{asked} refused the request: {error}") from None
        logprobs = choice.get("logprobs") if isinstance(choice.get("logprobs"), dict) else {}
        found = logprobs.get("token_logprobs")
        n = len(ids)
        if not isinstance(found, list) or len(found) < n:
            raise ValueError(
                f"{asked} did not send them (llama-cpp-python's server sends them when started with its logits_all option on)"
            )
        values = found[1:n]
        if found[0] is not None or any(isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
            raise ValueError(f"{asked} sent {_misaligned(found[0])}")
        if _shifted(logprobs.get("tokens"), ids.tolist(), self.vocab.detokenize):
            raise ValueError(f"{asked} sent them for the prompt's tokens shifted by one position")
        if self.echo_error is _UNCHECKED:
            from ropekit.eval.backends.openai_logprobs import echo_offset_error

            self.echo_error = echo_offset_error(self, ids.tolist())
        if self.echo_error is not None:
            raise ValueError(
                f"perplexity through the server needs aligned prompt log-probabilities, and {self.server_model!r} at {self.url} {self.echo_error}"
            )
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

    def ran_as(self) -> dict[str, Any]:
        """How the answers held were sent to the server (the journal's record of each): ``token ids``, ``text
        (re-tokenised, checked)``, both, or ``none`` before any answer."""
        sent = self.journal.sent_forms()
        prompts = {frozenset({"ids"}): "token ids", frozenset({"text"}): "text (re-tokenised, checked)"}
        return {
            "prompts": prompts.get(frozenset(sent), "token ids and text (re-tokenised, checked)" if sent else "none")
        }

    def describe(self) -> dict[str, Any]:
        return {
            "kind": "openai",
            "name": self.name,
            "url": self.url,
            "server_model": self.server_model,
            "server_max_context": self.max_context,
            "server_reports": {"models_entry": self.identity["models_entry"], "props": self.identity["props"]},
            **({"server_computes": self.computes} if self.computes is not None else {}),
            **self.ran_as(),
            "concurrency": self.concurrency,
            "tokenizer": {**self.vocab.describe(), "sha256": self.identity["tokenizer_sha256"]},
        }


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _misaligned(first: Any) -> str:
    if first is not None:
        return (
            f"log-probabilities whose first is {_shown(first)} rather than null (nothing predicts the first token): "
            "they are not aligned with the prompt's tokens"
        )
    return "log-probabilities that are not all numbers"


def _shifted(tokens: Any, ids: list[int], detokenize: Callable[[list[int]], str]) -> bool:
    """Whether the server's token strings match the prompt's tokens one position later better than in place."""
    if not isinstance(tokens, list) or len(tokens) < len(ids):
        return False
    pieces = [detokenize([token]) for token in ids]
    in_place = sum(tokens[i] == pieces[i] for i in range(len(ids)))
    shifted = sum(tokens[i] == pieces[i + 1] for i in range(len(ids) - 1))
    return shifted > in_place


def _context_error(error: ServerError, needed: int) -> ServerError:
    text = str(error).lower()
    if "context" in text and ("exceed" in text or "longer" in text or "maximum" in text):
        message = f"the server's context is shorter than the samples ({needed:,} tokens needed): {error}"
        return ServerError(message, status=error.status, kind="context")
    return error
