#!/usr/bin/env bash
# Builds a folder of the GPU peers that bench_apply.py / bench_triton_qk.py / profile_triton_qk.py compare against,
# to put on PYTHONPATH on a CUDA machine (which may have no network: build it where pip works, then copy it):
#   liger-kernel 0.8.5: the PyPI wheel, unpacked (pure Python and Triton);
#   flash-attn 2.8.3.post2: PyPI has only its sdist, whose build needs the CUDA toolchain; its rotary kernel is
#   Triton, so flash_attn/ops/triton/rotary.py and flash_attn/layers/rotary.py are copied unchanged into a package
#   whose __init__ does not import the CUDA extension. The benchmarks print it as
#   "flash-attn 2.8.3.post2, Triton rotary only (no CUDA extension)".
# Usage: bash benchmarks/gpu_peers.sh DEST   then   PYTHONPATH=src:DEST python benchmarks/bench_triton_qk.py
set -euo pipefail
DEST=${1:?usage: gpu_peers.sh DEST}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mkdir -p "$DEST"
python -m pip download --quiet --no-deps --only-binary=:all: liger-kernel==0.8.5 -d "$TMP"
python -m zipfile -e "$TMP"/liger_kernel-0.8.5-py3-none-any.whl "$DEST"
# the sdist: pip prepares its metadata with the running environment's torch (no CUDA build for that)
FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE python -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation \
  flash-attn==2.8.3.post2 -d "$TMP"
tar xzf "$TMP"/flash_attn-2.8.3.post2.tar.gz -C "$TMP"
SRC="$TMP/flash_attn-2.8.3.post2"
mkdir -p "$DEST/flash_attn/ops/triton" "$DEST/flash_attn/layers"
cp "$SRC/flash_attn/ops/triton/rotary.py" "$DEST/flash_attn/ops/triton/"
cp "$SRC/flash_attn/layers/rotary.py" "$DEST/flash_attn/layers/"
cp "$SRC/LICENSE" "$DEST/flash_attn/"
touch "$DEST/flash_attn/ops/__init__.py" "$DEST/flash_attn/ops/triton/__init__.py" "$DEST/flash_attn/layers/__init__.py"
cat > "$DEST/flash_attn/__init__.py" <<'PY'
"""flash-attn 2.8.3.post2 Triton rotary (no CUDA extension): flash_attn/ops/triton/rotary.py and
flash_attn/layers/rotary.py copied unchanged from the PyPI sdist (BSD-3-Clause, LICENSE beside this file). This
__init__ replaces the package's own, which imports the CUDA extension."""

__version__ = "2.8.3.post2"
PY
echo "GPU peers in $DEST (flash_attn/layers/rotary.py also needs einops)"
