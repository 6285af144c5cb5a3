"""GPU speed of the one-launch q+k Triton kernel against two launches, Liger's and flash-attn's rotary.

Everything is timed on the same tensors in interleaved rounds (each round runs every method once, in a rotated
order) and reported as the median, with ratios to the one-launch kernel and to the ``copy_`` floor (reading q
and k once and writing them once) measured in the same rounds. Peers that do not import are left out with a
line saying so. Shapes and peers' adapters are those of ``bench_apply.py`` (one place for both).

Usage::

    python benchmarks/bench_triton_qk.py                  # on a CUDA machine
    python benchmarks/bench_triton_qk.py --interpret      # smoke run on CPU through Triton's interpreter
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))


def qk_tensors(case, device: str):
    """q, k, two output buffers for each, the tables and the positions of a benchmark case."""
    from bench_apply import BASE
    from ropekit.functional import cos_sin

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(case.batch, case.seq, case.q_heads, case.head_dim, generator=gen).to(device, case.dtype)
    k = torch.randn(case.batch, case.seq, case.k_heads, case.head_dim, generator=gen).to(device, case.dtype)
    qo, ko, qb, kb = (torch.empty_like(t) for t in (q, k, q, k))
    rd = case.rotary_dim
    inv = BASE ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)
    if case.seq == 1:  # decode: each batch row at its own position
        positions = torch.arange(case.start, case.start + case.batch, device=device)[:, None]
    else:
        positions = torch.arange(case.start, case.start + case.seq, device=device)
    cos, sin = cos_sin(positions, inv)
    return q, k, qo, ko, qb, kb, cos, sin, positions


def methods_for(case, device: str) -> dict:
    from bench_apply import add_gpu_peers
    from ropekit.functional import apply_rope_qk
    from ropekit.kernels import _triton

    q, k, qo, ko, qb, kb, cos, sin, positions = qk_tensors(case, device)
    rd = case.rotary_dim
    methods = {
        "copy_ floor": lambda: (qb.copy_(q), kb.copy_(k)),
        "ropekit q+k one launch": lambda: _triton.rope_qk_into(q, k, cos, sin, qo, ko, rd, False, 1),
        "ropekit two launches": lambda: (
            _triton.rope_into(q, cos, sin, qo, rd, False, 1, False),
            _triton.rope_into(k, cos, sin, ko, rd, False, 1, False),
        ),
        "ropekit apply_rope_qk (public)": lambda: apply_rope_qk(q, k, cos, sin),
    }
    if device == "cuda":
        before = set(methods)
        add_gpu_peers(methods, case, q, k, cos, sin, positions[:, :1] if case.seq == 1 else positions)
        for peer in ("flash-attn rotary (in place)", "liger-kernel rope (in place)"):
            if peer not in methods and peer not in before:
                print(f"{peer}: not importable here, left out", flush=True)
    return methods


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--interpret", action="store_true", help="CPU smoke run through TRITON_INTERPRET=1")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--sample-s", type=float, default=0.05)
    args = parser.parse_args(argv)
    if args.interpret:
        os.environ["TRITON_INTERPRET"] = "1"  # read when the kernels are defined, i.e. at import
    elif not torch.cuda.is_available():
        print("bench_triton_qk: needs a CUDA device (or --interpret for a CPU smoke run)", file=sys.stderr)
        return 2
    from bench_apply import Case, Result, cases, timer

    device = "cpu" if args.interpret else "cuda"
    if args.interpret:
        todo = [Case("tiny", 1, 8, 4, 2, 32, 0, torch.float32, head_dim=32)]
        args.rounds, args.sample_s = 1, 0.0
    else:
        todo = cases(device)
    run = timer(device)
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (Triton interpreter)'}")
    if device == "cuda":
        import triton

        from bench_apply import gpu_peer_versions

        print(f"torch {torch.__version__}, Triton {triton.__version__}; {gpu_peer_versions()}")
    for case in todo:
        methods = methods_for(case, device)
        reps = {}
        for name, fn in methods.items():
            run(fn, 1)  # warm-up: Triton compiles here
            reps[name] = max(1, min(10_000, int(args.sample_s / max(run(fn, 1), 1e-7))))
        results = {name: Result(case, name) for name in methods}
        names = list(methods)
        for r in range(args.rounds):
            shift = r % len(names)
            for name in names[shift:] + names[:shift]:
                results[name].samples.append(run(methods[name], reps[name]))
        one = results["ropekit q+k one launch"].median
        floor = results["copy_ floor"].median
        print(f"\n{case.label}: q {case.q_heads} heads, k {case.k_heads}, seq {case.seq}, batch {case.batch}")
        print(f"{'method':34} {'median µs':>10} {'spread':>7} {'/ one launch':>13} {'/ copy floor':>13}")
        for name, res in results.items():
            med = res.median
            print(f"{name:34} {med * 1e6:10.2f} {res.spread:7.1%} {med / one:13.2f} {med / floor:13.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
