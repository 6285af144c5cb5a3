"""One long-lived probe process per script (``probe_worker``), against a stand-in script written here: every
request of a run reaches the same process, a request that raises is that request's reply, a process that dies
answers with the last line it wrote to stderr and is started again for the next request, and one that never answers
is stopped at the deadline."""

from __future__ import annotations

import sys
import textwrap
import time

import pytest

from ropekit.engines import probe_worker

SCRIPT = textwrap.dedent(
    f"""
    import json, os, sys
    for line in sys.stdin:
        request = json.loads(line)
        print("noise an engine prints", flush=True)
        if request.get("hang"):
            import time
            time.sleep(600)
        if request.get("die"):
            print("Fatal Python error: the engine crashed", file=sys.stderr, flush=True)
            os._exit(3)
        reply = {{"error": "ValueError: no", "error_type": "ValueError"}} if request.get("raise") else {{"pid": os.getpid(), **request}}
        print({probe_worker.MARK!r} + json.dumps(reply), flush=True)
    """
)


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "stand_in_probe.py"
    path.write_text(SCRIPT)
    yield path
    probe_worker.close()


def test_one_process_answers_every_request(script) -> None:
    first = probe_worker.ask(sys.executable, script, {"n": 1})
    second = probe_worker.ask(sys.executable, script, {"n": 2})
    assert first.data["n"] == 1 and second.data["n"] == 2
    assert first.data["pid"] == second.data["pid"]


def test_a_failed_request_is_its_reply_and_the_process_goes_on(script) -> None:
    before = probe_worker.ask(sys.executable, script, {})
    failed = probe_worker.ask(sys.executable, script, {"raise": True})
    after = probe_worker.ask(sys.executable, script, {})
    assert failed.data is None and failed.error == "ValueError: no" and failed.error_type == "ValueError"
    assert before.data["pid"] == after.data["pid"]


def test_a_process_that_dies_answers_with_its_last_words_and_is_started_again(script) -> None:
    before = probe_worker.ask(sys.executable, script, {})
    died = probe_worker.ask(sys.executable, script, {"die": True})
    after = probe_worker.ask(sys.executable, script, {})
    assert died.data is None and died.error == "Fatal Python error: the engine crashed"
    assert after.data is not None and after.data["pid"] != before.data["pid"]


def test_a_request_that_never_answers_ends_at_the_deadline(script) -> None:
    before = probe_worker.ask(sys.executable, script, {})
    started = time.monotonic()
    late = probe_worker.ask(sys.executable, script, {"hang": True}, timeout=1.0)
    assert time.monotonic() - started < 10
    assert late.data is None and late.late and late.error.startswith("no reply within 1 s")
    after = probe_worker.ask(sys.executable, script, {})  # a process that answered before is started again
    assert after.data is not None and after.data["pid"] != before.data["pid"]


def test_a_process_that_blocks_before_its_first_reply_is_not_started_again(tmp_path) -> None:
    blocked = tmp_path / "blocked_import.py"
    blocked.write_text("import time\ntime.sleep(600)\n")  # an engine import that never returns
    try:
        first = probe_worker.ask(sys.executable, blocked, {}, timeout=1.0)
        started = time.monotonic()
        second = probe_worker.ask(sys.executable, blocked, {}, timeout=1.0)
        assert time.monotonic() - started < 0.5
        assert first.late and second.late and second.error == first.error
    finally:
        probe_worker.close()


def test_the_deadline_comes_from_the_environment(monkeypatch) -> None:
    monkeypatch.setenv("ROPEKIT_PROBE_TIMEOUT", "7.5")
    assert probe_worker.timeout_s() == 7.5
    for bad in ("soon", "-1", "0"):
        monkeypatch.setenv("ROPEKIT_PROBE_TIMEOUT", bad)
        assert probe_worker.timeout_s() == probe_worker.TIMEOUT_S


def test_a_caught_error_carries_its_type_and_the_row_reads_the_type_not_the_text() -> None:
    """An engine's class refusing a configuration (a ValueError caught by the probe) is "cannot express"; another
    error whose message merely mentions ValueError is "cannot run here"."""
    from ropekit.engines import vllm

    engine = type("Engine", (), {"NAME": "vLLM", "version": staticmethod(lambda: "0")})
    refused = vllm.failed_row(engine, "ValueError: no", "", {}, "ValueError")
    other = vllm.failed_row(engine, "RuntimeError: a ValueError upstream", "", {}, "RuntimeError")
    died = vllm.failed_row(engine, "NotImplementedError: not on CPU", "", {})  # the last line of a traceback
    assert (refused.verdict, other.verdict, died.verdict) == ("cannot express", "cannot run here", "cannot express")
