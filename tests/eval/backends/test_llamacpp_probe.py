"""llama.cpp runs in a child process first (:mod:`ropekit.eval.backends.llamacpp_probe`): a library that crashes on this
machine gives a one-line refusal and a clean skip, never a dead process.

The crashing library is a stand-in ``llama_cpp`` package, first on ``PYTHONPATH``, that kills its own process with
SIGILL when imported, as a llama.cpp built with instructions the kernel does not enable does at its first decode.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers.cli import assert_error, run
from helpers.gguf_files import write_source
from ropekit.eval.backends import llamacpp_probe

pytest.importorskip("gguf")


@pytest.fixture
def crashing_llama(tmp_path, monkeypatch) -> Path:
    """A ``llama_cpp`` that dies with SIGILL on import, first on the path of every child process."""
    package = tmp_path / "crashing" / "llama_cpp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    path = str(package.parent)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([path, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.syspath_prepend(path)
    yield package.parent
    llamacpp_probe._probe.cache_clear()


def test_the_probe_names_sigill_and_the_rebuild(crashing_llama, tmp_path):
    why = llamacpp_probe.probe(write_source(tmp_path / "model.gguf"))
    assert why is not None and "SIGILL" in why and "model.gguf" in why and "build_llama_cpp" in why
    assert "\n" not in why


def test_a_command_refuses_in_one_line_and_survives(crashing_llama, tmp_path):
    gguf = write_source(tmp_path / "model.gguf")
    result = run("eval", "tasks", "--engine", "llamacpp", "--model", gguf, "--tasks", "vt", "--lengths", "256")
    assert_error(result, "SIGILL", "model.gguf")
    assert "llama_cpp" not in sys.modules or "crashing" not in str(sys.modules["llama_cpp"].__file__)


@pytest.mark.real
def test_the_test_run_skips_llamacpp_tests_with_the_reason(crashing_llama, tmp_path, smollm2_path):
    """A pytest run whose llama.cpp crashes reports the ``llamacpp`` tests as skipped, with the reason, and exits 0
    (the suite's own conftest loaded as a plugin, so that it judges a test file written outside the tree)."""
    (tmp_path / "test_uses_llama.py").write_text(
        "import pytest\n\n@pytest.mark.llamacpp\ndef test_decode():\n    import llama_cpp\n"
    )
    tests = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "--rootdir", str(tests.parent),
         "-c", str(tests.parent / "pyproject.toml"), "-p", "conftest", str(tmp_path / "test_uses_llama.py")],
        capture_output=True, text=True, timeout=300, check=False, cwd=tests.parent,
        env={**os.environ, "PYTHONPATH": os.pathsep.join([str(crashing_llama), str(tests), os.environ.get("PYTHONPATH", "")])},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 skipped" in done.stdout and "SIGILL" in done.stdout


def test_a_file_replaced_with_the_same_size_and_time_is_probed_again(tmp_path, monkeypatch):
    """``cp -p`` over a file that ran: same path, size and modification time, another header. The stand-in
    ``llama_cpp`` refuses a file named "bad..." in its header, as llama.cpp refuses one it cannot load (the oracle)."""
    package = tmp_path / "stub" / "llama_cpp"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text(
        "class Llama:\n"
        "    def __init__(self, path, **options):\n"
        "        if b'bad' in open(path, 'rb').read(4096):\n"
        "            raise ValueError('stand-in: cannot load this file')\n"
        "    def n_vocab(self):\n"
        "        return 16\n"
        "    def eval(self, ids):\n"
        "        pass\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(package.parent), os.environ.get("PYTHONPATH", "")]))
    good = write_source(tmp_path / "good.gguf", metadata={"note": "good"})
    bad = write_source(tmp_path / "bad.gguf", metadata={"note": "bad!"})
    assert good.stat().st_size == bad.stat().st_size
    path = tmp_path / "model.gguf"
    path.write_bytes(good.read_bytes())
    try:
        assert llamacpp_probe.probe(path) is None
        stat = path.stat()
        path.write_bytes(bad.read_bytes())  # the replacement, with the first file's time (as cp -p keeps it)
        os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert path.stat().st_size == stat.st_size and path.stat().st_mtime_ns == stat.st_mtime_ns
        why = llamacpp_probe.probe(path)
        assert why is not None and "stand-in: cannot load this file" in why
    finally:
        llamacpp_probe._probe.cache_clear()
