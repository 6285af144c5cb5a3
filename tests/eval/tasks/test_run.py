"""The whole evaluation with two stand-in models: an oracle that reads each answer out of its input (100% on every
task and length) and one that always answers the same string (chance: no reference ever matches)."""

from __future__ import annotations

import re
from collections import Counter

import pytest
import torch

from ropekit.config import RopeConfig
from ropekit.eval.protocol import EvalModel
from ropekit.eval.tasks.run import TaskSettings, run_tasks
from ropekit.model.tokenizer import byte_ids, byte_text
from ropekit.synthetic.suite import suite_tasks

TASKS = suite_tasks("ruler")  # what TaskSettings evaluates by default

PROMPT_END = re.compile(r"\?( The \w+ for \S+ is| They are)")


def oracle_answer(context: str, question: str) -> str:
    """The answer, found by reading the context (independently of the generators' own bookkeeping)."""
    if m := re.match(r" \nWhat is the magic (\w+) for (\S+)\?", question):
        return " " + re.search(rf"The magic {m[1]} for {re.escape(m[2])} is ([^\s.]+)\.", context)[1]
    if m := re.match(r" \nWhat are all the magic (\w+)s for (\S+)\?", question):
        return " " + ", ".join(re.findall(rf"The magic {m[1]} for {re.escape(m[2])} is ([^\s.]+)\.", context))
    if m := re.match(r" \nWhat are the magic (\w+)s for ([^?]+)\?", question):
        keys = m[2].split(", ")
        return " " + ", ".join(
            re.search(rf"The magic {m[1]} for {re.escape(k)} is ([^\s.]+)\.", context)[1] for k in keys
        )
    if m := re.match(r" \nWhich variables are assigned the value (\d+)\?", question):
        chain = [re.search(rf"VAR (\w+) = {m[1]}\.", context)[1]]
        while nxt := re.search(rf"VAR (\w+) = VAR {chain[-1]}\.", context):
            chain.append(nxt[1])
        return " " + " ".join(chain)
    if m := re.match(r" \nWhich (\d+) words appear most often in the list\?", question):
        words = context.split("List:")[-1].split()
        top = {w for w, _ in Counter(words).most_common(int(m[1]))}
        return " " + " ".join(dict.fromkeys(w for w in words if w in top))
    raise AssertionError(f"unknown question {question!r}")


class _Decoder:
    def __init__(self, predict):
        self.predict, self.ids = predict, []

    @property
    def length(self):
        return len(self.ids)

    def extend(self, ids, keep):
        self.ids += [int(i) for i in ids]
        logits = torch.zeros(keep, 260)
        for row, end in enumerate(range(len(self.ids) - keep, len(self.ids))):
            logits[row, self.predict(bytes(self.ids[: end + 1]).decode())] = 1.0
        return logits

    def crop(self, length):
        del self.ids[length:]


class StandIn(EvalModel):
    """What run_tasks needs from a model, with a decoder that predicts by ``predict(text so far) -> next byte``."""

    name = "stand-in"
    train_length = 256
    native_scaling = None
    rope = RopeConfig(32)
    stop_tokens: frozenset[int] = frozenset()
    byte_level = True

    def __init__(self, predict):
        self.predict = predict
        self.separator = [10, 10]

    def set_scaling(self, scaling):
        pass

    def encode(self, text: bytes):
        return torch.from_numpy(byte_ids(text))

    def detokenize(self, tokens):
        return byte_text(tokens)

    def describe(self):
        return {"kind": "stand-in"}

    def decoder(self):
        return _Decoder(self.predict)


def oracle_next(text: str) -> int:
    starts = [text.rfind(" \nWhat "), text.rfind(" \nWhich ")]
    start = max(starts)
    match = PROMPT_END.search(text, start) if start >= 0 else None
    if match is None:
        return 0
    answer = oracle_answer(text[:start], text[start : match.end()])
    done = text[match.end() :]
    return ord(answer[len(done)]) if answer.startswith(done) and len(done) < len(answer) else 10


SETTINGS = TaskSettings(methods=("none", "yarn"), multiples=(1, 2), samples=3)


def test_oracle_scores_everything():
    result = run_tasks(StandIn(oracle_next), SETTINGS)
    assert len(result.rows) == 2 * 2 * len(TASKS)
    assert all(row["score"] == 1.0 for row in result.rows), [r for r in result.rows if r["score"] < 1]
    assert all(row["shortcut"] == row["samples"] for row in result.rows)  # one pass per question
    # the recorded factor is the one the scaling uses: yarn's length ratio, plain RoPE's 1
    assert {(r["method"], r["length"], r["factor"]) for r in result.rows} == {
        ("none", 256, 1.0),
        ("none", 512, 1.0),
        ("yarn", 256, 1.0),
        ("yarn", 512, 2.0),
    }
    summary = result.summary()
    assert summary["not_learned"] == []
    assert {e["effective_length"] for e in summary["effective"]} == {512}


def test_oracle_without_the_shortcut_decodes_the_same():
    # answers one token later than the canonical form: the shortcut never applies, greedy decoding finds them all
    def late(text: str) -> int:
        start = max(text.rfind(" \nWhat "), text.rfind(" \nWhich "))
        match = PROMPT_END.search(text, start) if start >= 0 else None
        if match is None:
            return 0
        done = text[match.end() :]
        if done == "":
            return ord("=")
        return oracle_next(text[: match.end()] + done[1:])

    settings = TaskSettings(methods=("none",), multiples=(1,), samples=2)
    result = run_tasks(StandIn(late), settings)
    assert all(row["score"] == 1.0 and row["shortcut"] == 0 for row in result.rows)


def test_constant_answer_scores_at_chance():
    constant = " 1234567, ABCDE bako"

    def predict(text: str) -> int:
        start = max(text.rfind(" \nWhat "), text.rfind(" \nWhich "))
        match = PROMPT_END.search(text, start) if start >= 0 else None
        if match is None:
            return 0
        done = text[match.end() :]
        return ord(constant[len(done)]) if len(done) < len(constant) else 32

    result = run_tasks(StandIn(predict), SETTINGS)
    assert max(row["score"] for row in result.rows) == 0.0
    summary = result.summary()
    assert sorted(summary["not_learned"]) == sorted(TASKS)
    assert {e["effective_length"] for e in summary["effective"]} == {None}


def test_settings_are_checked():
    with pytest.raises(ValueError, match="unknown task"):
        TaskSettings(methods=("none",), tasks=("qa_1",))
    with pytest.raises(ValueError, match="threshold"):
        TaskSettings(methods=("none",), threshold=150.0)


class Served(StandIn):
    """A model that answers whole samples (as a server does): the oracle's texts, and no decoder."""

    def answer_all(self, samples, on_sample=None):
        out = {}
        for sample in samples:
            context = bytes(sample.context.tolist()).decode()
            texts = [oracle_answer(context, bytes(q.ids.tolist()).decode()) for q in sample.questions]
            out[id(sample)] = (texts, 1)
            if on_sample is not None:
                on_sample(sample)
        return out

    def resume_from(self, journal, *, fresh=False):
        raise AssertionError("not asked to resume")

    def decoder(self):
        raise AssertionError("a model answering whole samples is never decoded token by token")


def test_a_model_answering_whole_samples_is_asked_for_them():
    result = run_tasks(Served(oracle_next), TaskSettings(methods=("none",), multiples=(1,), samples=2))
    assert len(result.rows) == len(TASKS) and all(row["score"] == 1.0 for row in result.rows)
    assert all(row["forward_tokens"] == row["samples"] for row in result.rows)  # the served counts, not the grid's
