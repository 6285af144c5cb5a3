#!/usr/bin/env bash
# The cost of one SmolLM2-135M task sample (niah_single_1, method none) through llama.cpp (Q4_1 file, flash attention
# on, n_batch 2048) and through the torch path (dequantised, float32, SDPA), in one process on the same samples and
# one thread each, at 8k then 16k; then llama.cpp's flash attention against the parity tolerances at 1x.
# CPU, 2 shared cores. Run from the repository root: nice -n 19 bash evidence/smollm2/engine_speed/run.sh
set -euo pipefail
PY=${PY:-.venv/bin/python}
OUT=evidence/smollm2/engine_speed
OMP_NUM_THREADS=1 $PY benchmarks/bench_engines.py --lengths 8192,16384 --samples 1 --threads 1 \
  --llamacpp flash_attn=on,batch=2048 > $OUT/bench.jsonl
OMP_NUM_THREADS=1 $PY evidence/smollm2/engine_speed/flash_parity.py > $OUT/flash_parity.txt
# Run C (bench_16k_2threads.jsonl), 8k and 16k in one run, two threads per engine, not niced; started 20:32 UTC at
# load average 0.4, which rose to 6-11 once other jobs started (the 16k rows ran at load 6-11):
# PYTHONPATH=src OMP_NUM_THREADS=2 python benchmarks/bench_engines.py --lengths 8192,16384 --samples 1 --threads 2 --llamacpp flash_attn=on,batch=2048
