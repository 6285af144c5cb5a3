"""torch.compile on CPU: compile time, graph count and recompiles, compiled vs eager decode step, and what a
``torch.library`` custom op around the C++ kernel would cost per call.

Measured in one run, as ratios:

* the tiny model (``ropekit.model.tiny``) with a KV cache: prefill, then ``--steps`` decode steps of growing
  length, eager and ``torch.compile(fullgraph=True, dynamic=True)`` (inductor); graphs counted by a backend
  wrapper (one for prefill, one for decode means no break and no recompilation);
* ``RotaryEmbedding`` alone at a decode shape, eager and compiled;
* the custom-op question: ``apply_rope_qk`` called directly (the C++ entry) and through a ``torch.library``
  custom op wrapping it (dispatcher + Python boundary), at a decode shape; the difference is the per-call cost
  an opaque op would add, set against the tiny model's eager decode step.

Timings interleave the methods in rounds and report medians (background load hits all alike).

Usage::

    python benchmarks/bench_compile.py            # about a minute of compiling on a small CPU
    python benchmarks/bench_compile.py --quick
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch

from ropekit import RopeConfig, RotaryEmbedding, apply_rope_qk, cos_sin
from ropekit.kernels import backend_for
from ropekit.model.kv_cache import KVCache
from ropekit.model.tiny import TinyConfig, TinyLM
from ropekit.scaling import inv_freq


def interleaved(methods: dict[str, Callable[[], object]], rounds: int, reps: int) -> dict[str, float]:
    """Median seconds per call of each method, over rounds that run every method once in a rotated order."""
    samples: dict[str, list[float]] = {name: [] for name in methods}
    names = list(methods)
    for fn in methods.values():
        fn()  # warm-up
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:
            fn = methods[name]
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            samples[name].append((time.perf_counter() - start) / reps)
    return {name: statistics.median(values) for name, values in samples.items()}


class Counting:
    """Compile backend: counts graphs, compiles each with inductor."""

    def __init__(self) -> None:
        self.graphs = 0

    def __call__(self, gm, inputs):
        from torch._inductor.compile_fx import compile_fx

        self.graphs += 1
        return compile_fx(gm, inputs)


def bench_decode(steps: int, rounds: int) -> float:
    torch.manual_seed(0)
    config = TinyConfig(d_model=128, n_layers=4, n_heads=4, n_kv_heads=2, ffn_dim=384)
    model = TinyLM(config).eval()
    backend = Counting()
    compiled = torch.compile(model, fullgraph=True, dynamic=True, backend=backend)
    prefill = 37
    ids = torch.randint(0, 256, (1, prefill + steps))
    with torch.no_grad():
        start = time.perf_counter()
        cache = KVCache()
        compiled(ids[:, :prefill].clone(), cache=cache)
        prefill_compile = time.perf_counter() - start
        start = time.perf_counter()
        compiled(ids[:, prefill : prefill + 1].clone(), cache=cache)
        decode_compile = time.perf_counter() - start
        graphs_after_first_step = backend.graphs
        for t in range(prefill + 1, prefill + steps):
            compiled(ids[:, t : t + 1].clone(), cache=cache)
        print(f"tiny model ({model.num_parameters():,} parameters), prefill {prefill} tokens, {steps} decode steps:")
        print(f"  compile time: prefill {prefill_compile:.1f} s, first decode step {decode_compile:.1f} s")
        print(
            f"  graphs: {backend.graphs} ({graphs_after_first_step} after the first decode step; "
            f"recompilations over the {steps} steps: {backend.graphs - graphs_after_first_step})"
        )

        def fresh_cache() -> KVCache:
            cache = KVCache()
            model(ids[:, :prefill], cache=cache)  # eager prefill, not timed
            return cache

        tokens = [ids[:, t : t + 1].clone() for t in range(prefill, prefill + steps)]
        samples: dict[str, list[float]] = {"eager": [], "compiled": []}
        for r in range(rounds):
            for name in ("eager", "compiled") if r % 2 else ("compiled", "eager"):
                fn, cache = (model if name == "eager" else compiled), fresh_cache()
                start = time.perf_counter()
                for token in tokens:
                    fn(token, cache=cache)
                samples[name].append((time.perf_counter() - start) / steps)
        times = {name: statistics.median(values) for name, values in samples.items()}
    print(
        f"  decode step ({prefill} to {prefill + steps} cached tokens, mean of {steps} steps, median of {rounds} "
        f"rounds): eager {times['eager'] * 1e6:.0f} µs, compiled {times['compiled'] * 1e6:.0f} µs, "
        f"compiled / eager = {times['compiled'] / times['eager']:.2f}"
    )
    print(
        f"  recompilations during the timing: {backend.graphs - graphs_after_first_step} "
        f"(dynamo's unique graphs: {torch._dynamo.utils.counters['stats']['unique_graphs']})"
    )
    return times["eager"]


def bench_rotary(rounds: int) -> None:
    rotary = RotaryEmbedding(RopeConfig(32))
    compiled = torch.compile(rotary, fullgraph=True, dynamic=True)
    q, k = torch.randn(8, 1, 4, 32), torch.randn(8, 1, 2, 32)
    positions = torch.arange(1000, 1008)[:, None]
    start = time.perf_counter()
    compiled(q, k, positions)
    print(f"\nRotaryEmbedding, decode shape q {tuple(q.shape)}: compile {time.perf_counter() - start:.1f} s")
    times = interleaved(
        {"eager": lambda: rotary(q, k, positions), "compiled": lambda: compiled(q, k, positions)}, rounds, 200
    )
    print(
        f"  eager {times['eager'] * 1e6:.1f} µs, compiled {times['compiled'] * 1e6:.1f} µs, "
        f"compiled / eager = {times['compiled'] / times['eager']:.2f}"
    )


def bench_custom_op(rounds: int, decode_step_s: float) -> None:
    @torch.library.custom_op("ropekit_bench::rope_qk", mutates_args=())
    def rope_qk_op(
        q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return apply_rope_qk(q, k, cos, sin)

    @rope_qk_op.register_fake
    def _(q, k, cos, sin):
        return torch.empty_like(q), torch.empty_like(k)

    q, k = torch.randn(1, 1, 32, 128), torch.randn(1, 1, 8, 128)
    cos, sin = cos_sin(torch.tensor([4000]), inv_freq(128, 10000.0))
    with torch.no_grad():
        times = interleaved(
            {"direct": lambda: apply_rope_qk(q, k, cos, sin), "custom op": lambda: rope_qk_op(q, k, cos, sin)},
            rounds,
            500,
        )
        compiled_ref = torch.compile(lambda q, k, c, s: apply_rope_qk(q, k, c, s), fullgraph=True)
        compiled_op = torch.compile(lambda q, k, c, s: rope_qk_op(q, k, c, s), fullgraph=True)
        compiled_ref(q, k, cos, sin)
        compiled_op(q, k, cos, sin)
        inside = interleaved(
            {
                "inductor (eager ops fused)": lambda: compiled_ref(q, k, cos, sin),
                "inductor calling the op": lambda: compiled_op(q, k, cos, sin),
            },
            rounds,
            200,
        )
    overhead = times["custom op"] - times["direct"]
    print(f"\ncustom op question (Llama-8B decode shape, one token, backend {backend_for(q)}):")
    print(
        f"  apply_rope_qk direct {times['direct'] * 1e6:.1f} µs, through a torch.library custom op "
        f"{times['custom op'] * 1e6:.1f} µs: +{overhead * 1e6:.1f} µs a call "
        f"({overhead / decode_step_s:.1%} of the tiny model's eager decode step per layer call)"
    )
    ref, op = inside["inductor (eager ops fused)"], inside["inductor calling the op"]
    print(
        f"  compiled: eager ops fused by inductor {ref * 1e6:.1f} µs, calling the op {op * 1e6:.1f} µs (ratio {op / ref:.2f})"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="torch threads for eager and compiled alike (default 1: on a shared CPU, inductor's OpenMP regions "
        "wait milliseconds for a descheduled thread at decode shapes; 0 keeps torch's default)",
    )
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    rounds = 5 if args.quick else 15
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads")
    decode_s = bench_decode(args.steps, rounds)
    bench_rotary(rounds)
    bench_custom_op(rounds, decode_s)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
