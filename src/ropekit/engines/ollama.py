"""Ollama: it runs llama.cpp on a GGUF file and reads RoPE only from the file's metadata; ``num_ctx`` sets the
context size. Its verdict is llama.cpp's on the same file; it is not run here."""

from __future__ import annotations

import shutil
import subprocess

from ropekit.engines.probe import Case, EngineRow

NAME = "Ollama"


def version() -> str | None:
    if shutil.which("ollama") is None:
        return None
    done = subprocess.run(["ollama", "--version"], capture_output=True, text=True, check=False)
    return done.stdout.strip().split()[-1] if done.stdout.strip() else "unknown"


def row(case: Case) -> EngineRow:
    from ropekit.engines.launch import launch_lines

    launch = launch_lines(case.config, case.probe.target_length, folder=case.folder, gguf=case.gguf)[NAME].text()
    found = version()
    why = "ollama is not installed here" if found is None else "not run by ropekit"
    return EngineRow(NAME, found, "cannot run here", f"{why}; it runs llama.cpp on the file (see llama.cpp)", launch)
