#!/usr/bin/env bash
# STRING's two parameters on the bundled tiny model at its training length (256), 5 samples per task:
# shift S (0.25, 0.33, 0.5, 0.66 of 256) with local W = 8; W = 0, 32, 42, 64 at S = 84; W = 32 at S = 64 and 128.
# About 1 min per run on 2 cores.
set -euo pipefail
out=evidence/string
for params in shift=64,local=8 shift=84,local=8 shift=128,local=8 shift=170,local=8 shift=84,local=0 shift=84,local=32 \
    shift=84,local=42 shift=84,local=64 shift=64,local=32 shift=128,local=32; do
  name=${params//,/_}; name=${name//=/}
  OMP_NUM_THREADS=1 nice -n 10 python -m ropekit.cli eval tasks --model tiny --methods string --multiples 1 \
    --samples 5 --attention-param "$params" --json > "$out/sweep_1x_$name.json"
done
