"""The answer journal of ``--engine openai`` against scripted servers in this process (no engine, no weights): a run
resumed against another server, or the same server restarted with another context, reuses none of the first
server's answers (it is refused, naming what changed, or starts again); a reply that is not an answer is never
journalled; the journal is never written through a symbolic link. The oracle is what each server was asked and the
text each one answers (it names the server)."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("transformers")

from helpers.fake_openai import FakeServer, fixed_prompt, tokenizer_folder
from ropekit.eval.backends.openai import JournalMismatch, OpenAIEvalModel
from ropekit.eval.backends.openai_client import OpenAIClient, ServerError

PROMPTS = [[72, 105, 33], [84, 119, 111, 32], [84, 104, 114, 101, 101]]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tokenizer_folder(tmp_path_factory.mktemp("served") / "model")


def served(folder, server, **options):
    client = OpenAIClient(server.url, retries=0, backoff=0.01, timeout=30)
    return OpenAIEvalModel(folder, server.url, client=client, **options)


def dies_after(answered: int):
    """A script that answers ``answered`` questions (and the fixed prompt), then fails every request as a dead server
    would."""
    count = {"n": 0}

    def script(path, body):
        if path.endswith("/completions") and not fixed_prompt(body["prompt"]):
            count["n"] += 1
            if count["n"] > answered:
                return 503, {"error": {"message": "the server is shutting down"}}
        return None

    return script


def test_a_run_resumed_against_another_server_reuses_none_of_its_answers(folder, tmp_path) -> None:
    journal = tmp_path / "answers.jsonl"
    with FakeServer(tag="A", script=dies_after(1)) as first:
        model = served(folder, first, journal=journal)
        assert model.answer(PROMPTS[0], 4)[0] == "A3"
        with pytest.raises(ServerError, match="503"):
            model.answer(PROMPTS[1], 4)
    with FakeServer(tag="B") as second:  # the same model id, another server
        with pytest.raises(JournalMismatch, match=f"url: {first.url} → {second.url}") as caught:
            served(folder, second, journal=journal)
        assert "\n" not in str(caught.value) and "start the journal again" in str(caught.value)
        model = served(folder, second)
        model.resume_from(journal, fresh=True)  # --force: the journal starts again
        answers = [model.answer(ids, 4)[0] for ids in PROMPTS]
    assert answers == ["B3", "B4", "B5"] and len(second.asked) == 3
    rows = [json.loads(line) for line in journal.read_text().splitlines()]
    assert rows[0]["run"]["url"] == second.url and [r["text"] for r in rows[1:]] == answers


def test_the_same_server_restarted_with_another_context_is_refused_by_name(folder, tmp_path) -> None:
    journal = tmp_path / "answers.jsonl"
    with FakeServer(tag="A", n_ctx=2048) as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        server.n_ctx, server.rope_freq_base = 8192, 40000.0  # llama-server restarted with -c 8192 --rope-freq-base
        with pytest.raises(JournalMismatch) as caught:
            served(folder, server, journal=journal)
    assert "props.n_ctx: 2048 → 8192" in str(caught.value)
    assert "rope_freq_base: 10000.0 → 40000.0" in str(caught.value)


def test_a_resumed_run_against_the_same_server_asks_only_what_is_unanswered(folder, tmp_path) -> None:
    journal = tmp_path / "answers.jsonl"
    with FakeServer(tag="A") as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        again = served(folder, server, journal=journal)
        assert [again.answer(ids, 4)[0] for ids in PROMPTS] == ["A3", "A4", "A5"]
        assert [len(body["prompt"]) for body in server.asked] == [3, 4, 5]
        assert again.describe()["prompts"] == "token ids"


def test_answers_all_from_the_journal_are_described_as_sent(folder, tmp_path) -> None:
    """Every answer read back from the journal: the run records how those were sent (ids), not "text"."""
    journal = tmp_path / "answers.jsonl"
    with FakeServer() as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        again = served(folder, server, journal=journal)
        again.answer(PROMPTS[0], 4)
        assert len(server.asked) == 1
    assert again.describe()["prompts"] == "token ids"


def test_another_tokenizer_is_refused(folder, tmp_path) -> None:
    from helpers.hf_models import byte_tokenizer

    other = tokenizer_folder(tmp_path / "other")
    tokenizer = byte_tokenizer()
    tokenizer.add_special_tokens({"additional_special_tokens": ["<|fim|>"]})  # one more token, the same model id
    tokenizer.save_pretrained(other)
    journal = tmp_path / "answers.jsonl"
    with FakeServer() as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        with pytest.raises(JournalMismatch, match="tokenizer_sha256"):
            served(other, server, journal=journal)


@pytest.mark.parametrize(
    "reply",
    [
        {"choices": [{"text": None}], "model": "fake-model"},
        {"choices": [], "model": "fake-model"},
        {"model": "fake-model"},
        ["not", "an", "object"],
    ],
    ids=["null-text", "empty-choices", "no-choices", "a-list"],
)
def test_a_reply_that_is_not_an_answer_is_one_line_and_never_journalled(folder, tmp_path, reply) -> None:
    journal = tmp_path / "answers.jsonl"

    def script(path, body):
        return (200, reply) if path.endswith("/completions") and not fixed_prompt(body["prompt"]) else None

    with FakeServer(script=script) as server:
        model = served(folder, server, journal=journal)
        with pytest.raises(ServerError) as caught:
            model.answer(PROMPTS[0], 4)
    assert "\n" not in str(caught.value)
    assert len(journal.read_text().splitlines()) == 1  # the run's record only
    with FakeServer() as server:  # a resume is not stuck on a bad line
        assert served(folder, server).answer(PROMPTS[0], 4)[0] == "A3"


def test_a_journal_that_is_a_symbolic_link_is_not_written_through(folder, tmp_path) -> None:
    outside = tmp_path / "elsewhere.txt"
    outside.write_text("the user's file\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "answers.jsonl").symlink_to(outside)
    with FakeServer() as server:
        with pytest.raises(JournalMismatch, match="symbolic link"):
            served(folder, server, journal=out / "answers.jsonl")
        model = served(folder, server)
        model.resume_from(out / "answers.jsonl", fresh=True)  # --force: the link goes, not its target
        model.answer(PROMPTS[0], 4)
    assert outside.read_text() == "the user's file\n"
    assert not (out / "answers.jsonl").is_symlink() and "A3" in (out / "answers.jsonl").read_text()


def test_a_server_restarted_with_another_rope_that_reports_nothing_new_is_refused(folder, tmp_path) -> None:
    """llama-cpp-python's server restarted with ``--rope_freq_scale 0.125``: no ``/props``, the same ``/models``
    entry; what it computes for the fixed prompt past L0 names the change, and no question is asked again."""
    journal = tmp_path / "answers.jsonl"
    with FakeServer(props=False) as server:
        model = served(folder, server, journal=journal)
        assert model.answer(PROMPTS[0], 4)[0] == "A3"
        fixed = model.computes["prompt_tokens"]
        server.rope_freq_scale = 0.125
        with pytest.raises(JournalMismatch) as caught:
            served(folder, server, journal=journal)
        assert len(server.asked) == 1
    line = str(caught.value)
    assert "the greedy continuation of the fixed prompt: ' rope scale 1' → ' rope scale 0.125'" in line
    assert "\n" not in line and "start the journal again" in line
    assert fixed == 64 + 64  # L0 (the byte Llama's 64 positions) + the margin past it


def test_log_probabilities_within_the_tolerance_resume_and_beyond_it_are_refused(folder, tmp_path) -> None:
    """The same greedy text: log-probabilities 0.01 apart (a GPU server's batch nondeterminism) resume the run;
    0.5 apart (another computation) are refused, naming the token and both numbers."""
    from ropekit.eval.backends.openai_fingerprint import TOLERANCE

    journal = tmp_path / "answers.jsonl"
    with FakeServer(props=False) as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        server.logprob_shift = 0.01
        again = served(folder, server, journal=journal)
        assert [again.answer(ids, 4)[0] for ids in PROMPTS] == ["A3", "A4", "A5"] and len(server.asked) == 3
        server.logprob_shift = 0.5
        with pytest.raises(JournalMismatch) as caught:
            served(folder, server, journal=journal)
    assert 0.01 < TOLERANCE < 0.5
    assert "the log-probability of greedy token 1 of the fixed prompt's continuation: -0.1 → 0.4" in str(caught.value)


def test_a_server_that_reports_no_context_gets_the_longest_fixed_prompt_it_takes(folder, tmp_path) -> None:
    """No /props, a context of 100: the fixed prompt (128 tokens) is refused with HTTP 400 and shortened by a quarter
    until one fits (72 + 8 tokens); the same server restarted with a context of 4096 is named by that length."""
    journal = tmp_path / "answers.jsonl"
    with FakeServer(props=False, n_ctx=100) as server:
        model = served(folder, server, journal=journal)
        assert model.computes["prompt_tokens"] == 72 and len(server.computed) == 2  # the text, its log-probabilities
        model.answer(PROMPTS[0], 4)
        server.n_ctx = 4096
        with pytest.raises(JournalMismatch, match=r"computes\.prompt_tokens: 72 → 128"):
            served(folder, server, journal=journal)
    header = json.loads(journal.read_text().splitlines()[0])
    assert header["computes"]["prompt_tokens"] == 72 and len(header["computes"]["logprobs"]) == 8


def test_a_journal_without_a_record_of_the_computation_is_refused(folder, tmp_path) -> None:
    journal = tmp_path / "answers.jsonl"
    with FakeServer() as server:
        served(folder, server, journal=journal).answer(PROMPTS[0], 4)
        rows = journal.read_text().splitlines()
        header = json.loads(rows[0])
        journal.write_text("\n".join([json.dumps({"run": header["run"]}), *rows[1:]]) + "\n")
        with pytest.raises(JournalMismatch, match="what the server computes: not recorded"):
            served(folder, server, journal=journal)
