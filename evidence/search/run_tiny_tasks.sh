#!/bin/sh
# The 11 tasks at 4x on the tiny model: the search against the formulas, 20 samples per (task, method), so 220 per
# method's mean over the tasks. Run from the repository root after run_tiny.sh made tiny_4x/search.json:
#   nice -n 10 sh evidence/search/run_tiny_tasks.sh
set -e
export PYTHONPATH=src OMP_NUM_THREADS=1
R="/work/main/.venv/bin/ropekit"
P=/work/main/.venv/bin/python
$P evidence/search/seed_file.py evidence/search/tiny_4x theory
$R eval tasks --model tiny --tasks ruler --multiples 4 --samples 20 --seed 0 \
  --methods none,yarn,llama3,ntk,self_extend,searched --param factors=evidence/search/tiny_4x/search.json \
  --out evidence/search/tasks_4x --force --json > evidence/search/tasks_4x.stdout.json
$R eval tasks --model tiny --tasks ruler --multiples 4 --samples 20 --seed 0 \
  --methods searched --param factors=evidence/search/tiny_4x/seed_theory/search.json \
  --out evidence/search/tasks_4x_theory_seed --force --json > evidence/search/tasks_4x_theory_seed.stdout.json
