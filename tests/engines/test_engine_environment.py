"""Which interpreter ``engines`` runs for vLLM and SGLang: never one found through the working directory (a model
repository could carry ``.venv-vllm/bin/python`` and ``.venv-vllm/.ready``), only ``ROPEKIT_VLLM_PYTHON`` as an
absolute path or the environment beside ropekit's own source checkout; each row says which interpreter it used."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from ropekit.engines import vllm
from ropekit.engines.probe import Answer, Case, Probe


def _planted(folder: Path) -> tuple[Path, Path]:
    """A model folder carrying a vLLM environment of its own: its 'python' writes a marker file when run."""
    marker = folder / "ran"
    python = folder / ".venv-vllm" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f"#!/bin/sh\ntouch {marker}\n")
    python.chmod(python.stat().st_mode | stat.S_IEXEC)
    (folder / ".venv-vllm" / ".ready").write_text("")
    return python, marker


def test_an_environment_in_the_working_directory_is_never_chosen(tmp_path, monkeypatch) -> None:
    planted, _ = _planted(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROPEKIT_VLLM_PYTHON", raising=False)
    chosen, source = vllm.environment()
    assert chosen is None or chosen.resolve() != planted.resolve()
    root = vllm.checkout()
    assert root is not None and root.resolve() != tmp_path.resolve()  # tests run from the checkout
    if chosen is not None:
        assert chosen == root / ".venv-vllm" / "bin" / "python" and str(root) in source


def test_a_relative_variable_is_refused_since_it_would_follow_the_folder(tmp_path, monkeypatch) -> None:
    planted, _ = _planted(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("ROPEKIT_VLLM_PYTHON", ".venv-vllm/bin/python")
    chosen, source = vllm.environment()
    assert chosen is None and "not an absolute path" in source
    monkeypatch.setenv("ROPEKIT_VLLM_PYTHON", str(planted))  # named absolutely, it is the user's own choice
    assert vllm.environment()[0] == planted


def test_the_vllm_row_of_a_planted_folder_runs_nothing_from_it(tmp_path, monkeypatch) -> None:
    """Through ``vllm.row`` itself: with no environment of ropekit's own the row says so, and with one it runs that
    one; the folder's interpreter is never started either way."""
    _, marker = _planted(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("ROPEKIT_VLLM_PYTHON", raising=False)
    monkeypatch.setattr(vllm, "checkout", lambda: None)
    probe = Probe(4, 8, (0, 1, 3, 4, 5, 7), (4, 5, 8))
    config = {"architectures": ["LlamaForCausalLM"], "hidden_size": 8, "num_attention_heads": 1}
    case = Case(tmp_path, config, probe, Answer(tables={}), None, None)
    monkeypatch.setattr(vllm, "launch", lambda *args: "vllm serve .")
    row = vllm.row(case)
    assert row.verdict == "cannot run here" and "not run from its source checkout" in row.detail
    assert row.interpreter is None
    assert not marker.exists()


@pytest.mark.skipif(vllm.python() is None, reason="needs the vLLM environment (.venv-vllm or ROPEKIT_VLLM_PYTHON)")
def test_engines_says_which_interpreter_each_row_used(llama_dir) -> None:
    from ropekit.engines.compare import compare_folder, probe_for

    _, rows = compare_folder(llama_dir, probe_for(llama_dir), engines=("vLLM", "MLX-LM"))
    by_engine = {row.engine: row for row in rows}
    assert by_engine["vLLM"].interpreter == str(vllm.python())
    if by_engine["MLX-LM"].version is not None:
        assert by_engine["MLX-LM"].interpreter == sys.executable
    assert all(os.path.isabs(row.interpreter) for row in rows if row.interpreter)
