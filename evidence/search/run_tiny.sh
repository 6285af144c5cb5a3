#!/bin/sh
# The tiny-model search evidence of docs/search.md: a search at 4x and at 8x, then the 11 tasks and the held-out
# needle loss of every compared method. Run from the repository root: nice -n 10 sh evidence/search/run_tiny.sh
set -e
export PYTHONPATH=src OMP_NUM_THREADS=1
R="/work/main/.venv/bin/ropekit"
$R search --model tiny --target-length 4x --out evidence/search/tiny_4x --evaluations 96 --samples 24 --heldout-samples 64 --seed 0 --force
$R search --model tiny --target-length 8x --out evidence/search/tiny_8x --evaluations 64 --samples 16 --heldout-samples 64 --seed 0 --force
