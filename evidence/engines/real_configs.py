"""The public RoPE configs of real architectures (tests/helpers/real_configs.py) on tiny random models, through
MLX-LM, vLLM and llama.cpp against transformers: one verdict per engine and configuration (docs/engines.md).

Run from the repository root: ``ROPEKIT_VLLM_PYTHON=$PWD/.venv-vllm/bin/python PYTHONPATH=src:tests python
evidence/engines/real_configs.py [NAMES] [ENGINES]`` (comma-separated; default: every config, all three engines).
"""

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, "tests")

from helpers.real_configs import REAL, real_folder
from ropekit.engines.compare import compare_folder, probe_for

names = sys.argv[1].split(",") if len(sys.argv) > 1 else list(REAL)
engines = tuple(sys.argv[2].split(",")) if len(sys.argv) > 2 else ("MLX-LM", "vLLM", "llama.cpp")
for name in names:
    with tempfile.TemporaryDirectory() as work:
        start = time.time()
        folder = real_folder(name, Path(work) / name)
        probe = probe_for(folder, logit_tokens=64)
        reference, rows = compare_folder(folder, probe, engines=engines)
        took = time.time() - start
        print(f"== {name} ({took:.0f} s) L0 {probe.original_length}, target {probe.target_length}; {reference.detail}")
        for row in rows:
            print(f"  {row.engine}: {row.verdict}: {row.detail}")
