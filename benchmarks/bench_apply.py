"""Speed of applying RoPE to q and k: ropekit against its peers and the copy floor, as ratios from one run.

RoPE is memory-bound: the floor is reading q and k once and writing them once, i.e. ``copy_`` into
preallocated buffers. Every method is timed on the same tensors in interleaved rounds (each round runs every
method once, in a rotated order), so background load hits all of them alike; the table reports the median
over rounds, the spread (interquartile range / median), the ratio to the floor measured in the same rounds,
and the effective bandwidth ``2 · (bytes of q + bytes of k) / time``. A peer slower than five sample lengths
a call (half a second by default) runs in the first 3 rounds only: its ratio is large and needs no more.
The garbage collector is off inside each timed sample, as in ``timeit``, so a collection's pause (milliseconds
with transformers imported) never lands inside one method's sample.

Peers: transformers' ``apply_rotary_pos_emb`` (with cos/sin prebuilt, and with ``LlamaRotaryEmbedding``
building them), Meta's complex-number ``apply_rotary_emb`` (written below, as in meta-llama/llama
``model.py``), rotary-embedding-torch, and on CUDA liger-kernel and flash-attn where importable.

Usage::

    python benchmarks/bench_apply.py            # full run (make bench)
    python benchmarks/bench_apply.py --quick    # fewer rounds, shorter samples
    python benchmarks/bench_apply.py --only prefill --markdown results.md
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from ropekit.functional import apply_rope, apply_rope_qk, cos_sin
from ropekit.kernels import apply_rope_into, backend_for
from ropekit.kernels.reference import rope_reference

BASE = 10000.0


@dataclass(frozen=True)
class Case:
    """One benchmark shape: q is (batch, seq, q_heads, head_dim), k has k_heads (GQA when fewer)."""

    name: str
    batch: int
    seq: int
    q_heads: int
    k_heads: int
    rotary_dim: int
    start: int  # first position; decode rows sit at start + batch index (per-row positions)
    dtype: torch.dtype
    head_dim: int = 128

    @property
    def label(self) -> str:
        return f"{self.name} {str(self.dtype).removeprefix('torch.')}"


def cases(device: str) -> list[Case]:
    out = []
    for dtype in (torch.float32, torch.bfloat16):
        out += [
            Case("prefill", 1, 4096, 32, 32, 128, 0, dtype),
            Case("decode", 8, 1, 32, 32, 128, 3996, dtype),
            Case("partial", 1, 4096, 32, 32, 64, 0, dtype),
            Case("gqa", 1, 4096, 32, 8, 128, 0, dtype),
        ]
    return out


@dataclass
class Result:
    case: Case
    method: str
    samples: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    @property
    def spread(self) -> float:
        if len(self.samples) < 2:
            return 0.0
        q1, _, q3 = statistics.quantiles(self.samples, n=4, method="inclusive")
        return (q3 - q1) / self.median


# ---------------------------------------------------------------------------------------------- peers


def meta_apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor):
    """meta-llama/llama model.py: pairs (2i, 2i+1) as complex numbers times e^{i m θ}; x is (b, s, h, d)."""
    xq_ = torch.view_as_complex(xq.float().reshape(*xq.shape[:-1], -1, 2))
    xk_ = torch.view_as_complex(xk.float().reshape(*xk.shape[:-1], -1, 2))
    xq_out = torch.view_as_real(xq_ * freqs_cis).flatten(3)
    xk_out = torch.view_as_real(xk_ * freqs_cis).flatten(3)
    return xq_out.type_as(xq), xk_out.type_as(xk)


def with_partial(fn: Callable, q: torch.Tensor, k: torch.Tensor, rotary_dim: int):
    """How partial-rotary models (GPT-NeoX, Phi, GLM) wrap a full-rotation function: slice, rotate, concatenate."""
    if rotary_dim == q.shape[-1]:
        return fn(q, k)
    q_rot, k_rot = fn(q[..., :rotary_dim], k[..., :rotary_dim])
    return torch.cat((q_rot, q[..., rotary_dim:]), -1), torch.cat((k_rot, k[..., rotary_dim:]), -1)


def build_methods(case: Case, device: str, inductor: bool) -> tuple[dict[str, Callable[[], object]], int]:
    """Closures that each rotate q and k once; and the bytes moved by the floor (read + write of q and k)."""
    gen = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(case.batch, case.seq, case.q_heads, case.head_dim, generator=gen).to(device, case.dtype)
    k = torch.randn(case.batch, case.seq, case.k_heads, case.head_dim, generator=gen).to(device, case.dtype)
    qb, kb = torch.empty_like(q), torch.empty_like(k)
    rd = case.rotary_dim
    if case.seq == 1:  # decode: each batch row at its own position (KV caches of different lengths)
        positions = (case.start + torch.arange(case.batch, device=device)).unsqueeze(1)  # (batch, 1)
    else:
        positions = case.start + torch.arange(case.seq, device=device)  # (seq,)
    inv = BASE ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)
    cos, sin = cos_sin(positions, inv)  # fp32 tables, (seq | batch, seq, rd/2)
    methods: dict[str, Callable[[], object]] = {}

    methods["copy_ floor"] = lambda: (qb.copy_(q), kb.copy_(k))
    methods["ropekit in place"] = lambda: (apply_rope(q, cos, sin, inplace=True), apply_rope(k, cos, sin, inplace=True))
    methods["ropekit out="] = lambda: (apply_rope(q, cos, sin, out=qb), apply_rope(k, cos, sin, out=kb))
    methods["ropekit new tensor"] = lambda: (apply_rope(q, cos, sin), apply_rope(k, cos, sin))
    methods["ropekit qk in place"] = lambda: apply_rope_qk(q, k, cos, sin, inplace=True)
    methods["ropekit qk new tensors"] = lambda: apply_rope_qk(q, k, cos, sin)
    kw = {"rotary_dim": rd, "interleaved": False, "seq_dim": 1}
    # The backend alone, without apply_rope's argument checks: at decode sizes the checks cost about as much as
    # the kernel itself.
    methods["ropekit kernel, no checks"] = lambda: (
        apply_rope_into(q, cos, sin, q, **kw),
        apply_rope_into(k, cos, sin, k, **kw),
    )
    methods["ropekit eager, out="] = lambda: (
        rope_reference(q, cos, sin, out=qb, interleaved=False, seq_dim=1),
        rope_reference(k, cos, sin, out=kb, interleaved=False, seq_dim=1),
    )
    if inductor:
        compiled = torch.compile(
            lambda x, c, s: rope_reference(x, c, s, out=torch.empty_like(x)), dynamic=False, fullgraph=True
        )
        methods["torch.compile eager"] = lambda: (compiled(q, cos, sin), compiled(k, cos, sin))

    try:
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding, apply_rotary_pos_emb
    except ImportError:
        pass
    else:
        config = LlamaConfig(
            hidden_size=case.q_heads * rd,
            num_attention_heads=case.q_heads,
            head_dim=rd,
            max_position_embeddings=8192,
            rope_parameters={"rope_type": "default", "rope_theta": BASE},
        )
        hf_rotary = LlamaRotaryEmbedding(config).to(device)
        position_ids = positions if positions.dim() == 2 else positions.unsqueeze(0)  # (batch | 1, seq)
        hf_cos, hf_sin = hf_rotary(q, position_ids)  # (batch | 1, seq, rd), in q's dtype as HF returns them

        def hf_apply(a, b, c=hf_cos, s=hf_sin):
            return apply_rotary_pos_emb(a, b, c, s, unsqueeze_dim=2)  # (b, s, h, d) layout

        def hf_build_apply():
            c, s = hf_rotary(q, position_ids)
            return with_partial(lambda a, b: apply_rotary_pos_emb(a, b, c, s, unsqueeze_dim=2), q, k, rd)

        methods["HF apply_rotary_pos_emb"] = lambda: with_partial(hf_apply, q, k, rd)
        methods["HF rotary + apply"] = hf_build_apply

    freqs = positions.to(torch.float64).unsqueeze(-1) * inv.to(device)  # (seq | batch, seq, rd/2)
    freqs_cis = torch.polar(torch.ones_like(freqs), freqs).to(torch.complex64)
    freqs_cis = freqs_cis.unsqueeze(-2) if freqs_cis.dim() == 3 else freqs_cis[None, :, None]  # (b|1, s, 1, rd/2)
    methods["Meta complex freqs_cis"] = lambda: with_partial(
        lambda a, b: meta_apply_rotary_emb(a, b, freqs_cis), q, k, rd
    )

    try:
        from rotary_embedding_torch import RotaryEmbedding as RetRotary
    except ImportError:
        pass
    else:
        ret = RetRotary(dim=rd).to(device)
        offset = case.start  # one offset for the whole batch: the library has no per-row positions

        methods["rotary-embedding-torch"] = lambda: (
            ret.rotate_queries_or_keys(q, seq_dim=-3, offset=offset),
            ret.rotate_queries_or_keys(k, seq_dim=-3, offset=offset),
        )

    if device == "cuda":
        add_gpu_peers(methods, case, q, k, cos, sin, positions)
    return methods, 2 * (q.nbytes + k.nbytes)


def gpu_peer_versions() -> str:
    """What the GPU peers are, said in every GPU run: versions, and whether flash-attn has its CUDA extension
    (its rotary kernel is Triton code that runs without it)."""
    from importlib import metadata

    parts = []
    try:
        parts.append(f"liger-kernel {metadata.version('liger-kernel')}")
    except metadata.PackageNotFoundError:
        parts.append("liger-kernel not installed")
    try:
        import flash_attn
    except ImportError:
        parts.append("flash-attn not importable")
    else:
        has_cuda_ext = importlib.util.find_spec("flash_attn_2_cuda") is not None
        extension = "" if has_cuda_ext else ", Triton rotary only (no CUDA extension)"
        parts.append(f"flash-attn {getattr(flash_attn, '__version__', '?')}{extension}")
    return "GPU peers: " + "; ".join(parts)


def add_gpu_peers(methods, case, q, k, cos, sin, positions) -> None:
    """liger-kernel and flash-attn rotary kernels, where importable (both rotate in place)."""
    rd = case.rotary_dim
    try:
        from flash_attn.layers.rotary import apply_rotary_emb as fa_apply
    except ImportError:
        pass
    else:
        if case.seq == 1:  # per-row positions: the full table and one offset per row
            inv = BASE ** (-torch.arange(0, rd, 2, dtype=torch.float64) / rd)
            full_cos, full_sin = cos_sin(torch.arange(case.start + case.batch, device=q.device), inv)
            offsets = positions[:, 0].to(torch.int32)
        else:
            full_cos, full_sin, offsets = cos, sin, 0
        methods["flash-attn rotary (in place)"] = lambda: (
            fa_apply(q, full_cos, full_sin, inplace=True, seqlen_offsets=offsets),
            fa_apply(k, full_cos, full_sin, inplace=True, seqlen_offsets=offsets),
        )
    try:
        from liger_kernel.transformers.rope import liger_rotary_pos_emb
    except ImportError:
        pass
    else:
        c_full = torch.cat((cos, cos), -1)  # HF layout: (seq | batch, seq, rd)
        s_full = torch.cat((sin, sin), -1)
        if c_full.dim() == 2:
            c_full, s_full = c_full.unsqueeze(0), s_full.unsqueeze(0)  # (1, seq, rd)
        # liger takes (batch, heads, seq, head_dim): a transposed view of our contiguous (batch, seq, heads,
        # head_dim), which it transposes back and rotates in place; it reads rotary_dim from the table width.
        methods["liger-kernel rope (in place)"] = lambda: liger_rotary_pos_emb(
            q.transpose(1, 2), k.transpose(1, 2), c_full, s_full
        )


# ---------------------------------------------------------------------------------------------- timing


def timer(device: str) -> Callable[[Callable[[], object], int], float]:
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)

    def run(fn: Callable[[], object], n: int) -> float:
        enabled = gc.isenabled()
        gc.disable()  # collections run between samples, never inside one
        try:
            sync()
            start = time.perf_counter()
            for _ in range(n):
                fn()
            sync()
            return (time.perf_counter() - start) / n
        finally:
            if enabled:
                gc.enable()

    return run


def bench_case(case: Case, device: str, rounds: int, sample_s: float, inductor: bool) -> list[Result]:
    methods, _ = build_methods(case, device, inductor)
    run = timer(device)
    reps, slow = {}, set()
    for name, fn in methods.items():
        run(fn, 1)  # warm-up: compilation (Triton, torch.compile), first-touch of fresh memory
        once = run(fn, 1)
        reps[name] = max(1, min(10_000, int(sample_s / max(once, 1e-7))))
        if once > 5 * sample_s:
            slow.add(name)  # seconds a call at prefill on a loaded CPU: its ratio needs no more than 3 rounds
    results = {name: Result(case, name) for name in methods}
    names = list(methods)
    for r in range(rounds):
        shift = r % len(names)
        for name in names[shift:] + names[:shift]:  # rotate the order so no method always follows another
            if r < 3 or name not in slow:
                results[name].samples.append(run(methods[name], reps[name]))
    return list(results.values())


# ---------------------------------------------------------------------------------------------- report


def fmt_time(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def rows(results: list[Result]) -> list[tuple[str, str, str, str, str, str]]:
    out = []
    floor = next(r for r in results if r.method == "copy_ floor")
    case = results[0].case
    q_bytes = case.batch * case.seq * case.q_heads * case.head_dim * case.dtype.itemsize
    k_bytes = case.batch * case.seq * case.k_heads * case.head_dim * case.dtype.itemsize
    nbytes = 2 * (q_bytes + k_bytes)
    for r in results:
        out.append(
            (
                case.label,
                r.method,
                fmt_time(r.median),
                f"±{100 * r.spread / 2:.0f}%",
                f"{r.median / floor.median:.2f}",
                f"{nbytes / r.median / 1e9:.1f}",
            )
        )
    return out


@dataclass
class Target:
    label: str
    value: float
    limit: float
    at_most: bool

    @property
    def met(self) -> bool:
        return self.value <= self.limit if self.at_most else self.value >= self.limit


def targets(all_results: dict[str, list[Result]], device: str) -> list[Target]:
    """The issue's targets for this device, from the ratios measured in this run."""

    def get(label: str, method: str) -> Result | None:
        return next((r for r in all_results.get(label, []) if r.method == method), None)

    out = []
    # at least 80% of copy bandwidth at prefill, and faster than liger-kernel (which rotates q and k in one call, like
    # apply_rope_qk; "in place" and "out=" are two apply_rope calls)
    if device == "cuda":
        for label in ("prefill float32", "prefill bfloat16"):
            floor, liger = get(label, "copy_ floor"), get(label, "liger-kernel rope (in place)")
            for method in ("ropekit in place", "ropekit out=", "ropekit qk in place"):
                mine = get(label, method)
                if floor and mine:
                    share = floor.median / mine.median
                    out.append(Target(f"{label}: {method}, share of copy bandwidth", share, 0.8, False))
                if mine and liger:
                    out.append(Target(f"{label}: liger / {method}", liger.median / mine.median, 1.0, False))
        return out
    for label, limit, methods in (
        ("prefill float32", 1.5, ("ropekit in place", "ropekit out=")),
        ("prefill bfloat16", 2.0, ("ropekit in place", "ropekit out=")),
        ("decode float32", 2.0, ("ropekit in place", "ropekit out=", "ropekit qk in place")),
        ("decode bfloat16", 3.0, ("ropekit in place", "ropekit qk in place")),  # target: bf16 decode <= 3x
    ):
        floor = get(label, "copy_ floor")
        if floor is None:
            continue
        for method in methods:
            r = get(label, method)
            if r is not None:
                out.append(Target(f"{label}: {method} × floor", r.median / floor.median, limit, True))
    mine, hf = get("prefill float32", "ropekit in place"), get("prefill float32", "HF apply_rotary_pos_emb")
    if mine and hf:
        out.append(Target("prefill float32: HF apply / ropekit in place", hf.median / mine.median, 10.0, False))
    return out


def machine(device: str) -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            cpu = next((line.split(":", 1)[1].strip() for line in f if line.startswith("model name")), cpu)
    except OSError:
        pass
    load = " ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "n/a"
    gpu = f"{torch.cuda.get_device_name()}, " if device == "cuda" else ""
    return (
        f"{gpu}{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"Python {platform.python_version()}, load average {load}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 rounds of short samples (about a minute)")
    parser.add_argument("--rounds", type=int, default=None, help="rounds per case (default 5, quick 3)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", default="", help="run only cases whose label contains this text")
    parser.add_argument("--inductor", action="store_true", help="also time torch.compile of the eager formula")
    parser.add_argument("--markdown", default=None, help="also write the table as markdown to this file")
    args = parser.parse_args(argv)
    rounds = args.rounds or (3 if args.quick else 5)
    sample_s = 0.02 if args.quick else 0.1

    from rich.console import Console
    from rich.table import Table

    console = Console(width=max(Console().width, 112))  # wide enough for the table when piped to a file
    probe = torch.empty(1, device=args.device)
    start = time.perf_counter()
    backend = backend_for(probe)  # builds the CPU kernel now (cached), so no compile lands inside a timing
    header = f"{machine(args.device)}\nropekit backend on {args.device}: {backend} (ready in {time.perf_counter() - start:.1f} s)"
    if args.device == "cuda":
        header += "\n" + gpu_peer_versions()
    console.print(header)

    table = Table(title=f"apply RoPE to q and k: median of {rounds} interleaved rounds", show_lines=False)
    for col, justify in (("case", "left"), ("method", "left"), ("median", "right"), ("spread", "right")):
        table.add_column(col, justify=justify)
    table.add_column("× floor", justify="right")
    table.add_column("GB/s", justify="right")
    all_results: dict[str, list[Result]] = {}
    md = ["| case | method | median | spread | × floor | GB/s |", "|---|---|---:|---:|---:|---:|"]
    selected = [c for c in cases(args.device) if args.only in c.label]
    for i, case in enumerate(selected):
        with console.status(f"{case.label} ({i + 1}/{len(selected)})"):
            results = bench_case(case, args.device, rounds, sample_s, args.inductor)
        all_results[case.label] = results
        for row in rows(results):
            style = "bold" if row[1].startswith("ropekit") and "eager" not in row[1] else None
            table.add_row(*row, style=style)
            md.append("| " + " | ".join(row) + " |")
        table.add_section()
    console.print(table)

    checks = targets(all_results, args.device)
    if checks:
        t = Table(title=f"{'GPU' if args.device == 'cuda' else 'CPU'} targets (issues 7 and 15)")
        t.add_column("target")
        t.add_column("measured", justify="right")
        t.add_column("limit", justify="right")
        t.add_column("", justify="center")
        for c in checks:
            t.add_row(
                c.label, f"{c.value:.2f}", f"{'≤' if c.at_most else '≥'} {c.limit:g}", "met" if c.met else "MISSED"
            )
        console.print(t)
    console.print(f"load average at the end: {' '.join(f'{v:.1f}' for v in os.getloadavg())}")
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as f:
            f.write(header.replace("\n", "  \n") + "\n\n" + "\n".join(md) + "\n")
            if checks:
                f.write("\n| target | measured | limit | |\n|---|---:|---:|---|\n")
                for c in checks:
                    sign = "≤" if c.at_most else "≥"
                    f.write(f"| {c.label} | {c.value:.2f} | {sign} {c.limit:g} | {'met' if c.met else 'missed'} |\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
