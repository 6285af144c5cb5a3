"""Where a q+k RoPE call's time goes on CUDA: device time, host time and launch settings, against the peers.

For each case of ``bench_apply.py`` (one place for shapes and peers' adapters) and each method:

* device time per call: the sum of its kernels' durations from ``torch.profiler`` (CUDA activity), per call;
* host time per call: calls queued back to back without waiting for the GPU, wall time / calls (what Python,
  the argument checks and the launcher cost);
* wall time per call: the same loop, waiting for the GPU at the end (what ``bench_apply.py`` measures);

then a sweep of the launch settings of ropekit's one-launch q+k kernel (device time only). The kernel's result
is checked against the eager reference first. Usage (CUDA only)::

    PYTHONPATH=src python benchmarks/profile_triton_qk.py [--json results.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

SWEEP = [{"max_tile": t, "num_warps": w} for t in (1024, 2048, 4096) for w in (2, 4, 8)]
SWEPT = ("prefill float32", "prefill bfloat16", "gqa bfloat16", "decode bfloat16")


def device_us(fn, calls: int = 30) -> tuple[float, dict[str, float]]:
    """Device time per call (µs): every CUDA kernel the calls ran, summed, over the calls; and per kernel name."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    per_kernel: dict[str, float] = {}
    for evt in prof.key_averages():
        if evt.device_type != DeviceType.CUDA:
            continue
        t = getattr(evt, "self_device_time_total", None)
        t = evt.self_cuda_time_total if t is None else t
        per_kernel[evt.key[:60]] = per_kernel.get(evt.key[:60], 0.0) + t / calls
    return sum(per_kernel.values()), per_kernel


def host_and_wall_us(fn, calls: int = 200, repeats: int = 5) -> tuple[float, float]:
    """Median over repeats of (host µs per call, wall µs per call) for ``calls`` calls queued back to back."""
    hosts, walls = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        queued = time.perf_counter()
        torch.cuda.synchronize()
        done = time.perf_counter()
        hosts.append((queued - start) / calls * 1e6)
        walls.append((done - start) / calls * 1e6)
    return statistics.median(hosts), statistics.median(walls)


def variants(case):
    """ropekit's launch variants and the peers on one case's tensors; and a check of each ropekit variant."""
    from bench_apply import add_gpu_peers
    from bench_triton_qk import qk_tensors
    from ropekit.kernels import _triton
    from ropekit.kernels.reference import rope_reference

    q, k, qo, ko, qb, kb, cos, sin, positions = qk_tensors(case, "cuda")
    rd = case.rotary_dim

    def ropekit(tune):
        return lambda: _triton.rope_qk_into(q, k, cos, sin, qo, ko, rd, False, 1, tune=tune)

    def check(tune) -> float:
        qo.fill_(7.0), ko.fill_(7.0)
        ropekit(tune)()
        want_q = rope_reference(q, cos, sin, interleaved=False, seq_dim=1, out=torch.empty_like(q))
        want_k = rope_reference(k, cos, sin, interleaved=False, seq_dim=1, out=torch.empty_like(k))
        return max((qo.float() - want_q.float()).abs().max().item(), (ko.float() - want_k.float()).abs().max().item())

    methods = {
        "copy_ floor": lambda: (qb.copy_(q), kb.copy_(k)),
        "ropekit q+k one launch": ropekit(None),
        "ropekit two launches": lambda: (
            _triton.rope_into(q, cos, sin, qo, rd, False, 1, False),
            _triton.rope_into(k, cos, sin, ko, rd, False, 1, False),
        ),
    }
    add_gpu_peers(methods, case, q, k, cos, sin, positions[:, :1] if case.seq == 1 else positions)
    return methods, ropekit, check


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", default=None, help="also write every number to this file")
    parser.add_argument("--only", default="", help="cases whose label contains this text")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("profile_triton_qk: needs a CUDA device", file=sys.stderr)
        return 2
    import triton

    from bench_apply import cases, gpu_peer_versions

    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, Triton {triton.__version__}")
    print(gpu_peer_versions())
    report: dict = {"device": torch.cuda.get_device_name(), "cases": {}}
    for case in [c for c in cases("cuda") if args.only in c.label]:
        methods, ropekit, check = variants(case)
        errors = check(None)
        print(f"\n{case.label} (q {case.q_heads} heads, k {case.k_heads}, seq {case.seq}, batch {case.batch}, "
              f"rotary {case.rotary_dim}); max |error| vs eager: {errors:.3g}")  # fmt: skip
        print(f"{'method':38} {'device µs':>10} {'host µs':>9} {'wall µs':>9}  kernels")
        rows = {}
        for name, fn in methods.items():
            dev, kernels = device_us(fn)
            host, wall = host_and_wall_us(fn)
            rows[name] = {"device_us": dev, "host_us": host, "wall_us": wall, "kernels": kernels}
            names = ", ".join(f"{k} {v:.1f}" for k, v in kernels.items())
            print(f"{name:38} {dev:10.1f} {host:9.1f} {wall:9.1f}  {names}")
        sweep = []
        if case.label in SWEPT:
            for tune in SWEEP:
                dev, _ = device_us(ropekit(tune), calls=20)
                sweep.append({**tune, "device_us": dev})
            fastest = min(sweep, key=lambda r: r["device_us"])
            print(
                "sweep (max_tile/num_warps = device µs): "
                + " ".join(f"{r['max_tile']}/{r['num_warps']}w={r['device_us']:.1f}" for r in sweep)
                + f"; fastest {fastest['max_tile']}/{fastest['num_warps']}w"
            )
        report["cases"][case.label] = {"errors": errors, "methods": rows, "sweep": sweep}
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
