"""PoSE costs its window, not its target: step time and peak memory of ``ropekit finetune``'s loop.

Three loops on the same random Llama and the same ``--window`` W-token windows, in one run, alternating rounds:

* **pose**: :func:`ropekit.finetune.train.train` with ``window=W`` and ``target_length=T`` (PoSE position ids over
  ``[0, T)``, YaRN s = T / W);
* **full**: the same loop at ``target_length=W`` (today's full-length training at W, RoPE unscaled);
* **plain**: a plain transformers loop at W (``model(input_ids, labels=input_ids).loss.backward()``, AdamW, the same
  schedule, gradient checkpointing, sdpa; ``bench_finetune.plain_loop``).

Time: median tokens/s over rounds (each round ``--steps`` optimizer steps, the first not timed; the held-out loss
before and after, untimed, runs on one W-token window to keep the benchmark short). Memory: the peak of
one step of the loss wrapper (:class:`ropekit.finetune.loss.ChunkedCausalLM`, AdamW, gradient checkpointing) with
PoSE ids over T against ids ``0 … W−1``, from torch's profiler (every allocation and free; CUDA: the allocator),
weights and optimizer state included; beside it the plan's prediction (:mod:`ropekit.finetune.fit`).
Targets: pose/full ≤ 1.05 in time and memory; pose/plain ≥ 0.90 in tokens/s.

Usage::

    nice -n 15 python benchmarks/bench_pose.py                 # W = 2k, T = 32k, 2-layer d_model 128 Llama, CPU
    python benchmarks/bench_pose.py --window 4096 --target 65536 --layers 4 --hidden 256
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).parent))
from bench_finetune import plain_loop


def random_llama(path: Path, *, layers: int, hidden: int, vocab: int, length: int) -> Path:
    """A random Llama (head_dim 32, 2 KV heads) saved to ``path``, original length ``length``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=hidden * 3,
        num_hidden_layers=layers,
        num_attention_heads=hidden // 32,
        num_key_value_heads=2,
        max_position_embeddings=length,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def ropekit_rate(source: Path, scaling, windows, heldout, settings, work: Path) -> float:
    """tokens/s of :func:`ropekit.finetune.train.train` (the first step not timed)."""
    from ropekit.finetune.run import load_for_training
    from ropekit.finetune.train import train

    work.mkdir(parents=True, exist_ok=True)
    result = train(lambda: load_for_training(source, scaling, None), windows, heldout, settings, work, progress=False)
    log = [r for r in result.log if r.step > 0]
    per_step = settings.batch_size * (settings.window or settings.target_length)
    return per_step * (len(log) - 1) / (log[-1].seconds - log[0].seconds)


def step_peak(source: Path, scaling, ids: torch.Tensor, positions: torch.Tensor | None, device) -> int:
    """Peak bytes of one training step (weights and AdamW state included), after a warm-up step."""
    from ropekit.finetune.fit_measure import measure_step, resident_bytes
    from ropekit.finetune.loss import prepared_model
    from ropekit.finetune.run import load_for_training
    from ropekit.finetune.settings import FinetuneSettings

    settings = FinetuneSettings(target_length=ids.shape[1])  # gradient checkpointing, no LoRA: as the runs above
    wrapper = prepared_model(load_for_training(source, scaling, None), settings).to(device).train()
    optimizer = torch.optim.AdamW(wrapper.parameters(), lr=1e-12)
    args = (ids.to(device),) if positions is None else (ids.to(device), positions.to(device))

    def step() -> None:
        wrapper(*args).backward()
        optimizer.step()
        optimizer.zero_grad()

    step()
    return resident_bytes(wrapper, optimizer) + measure_step(step, device)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--window", type=int, default=2048)
    parser.add_argument("--target", type=int, default=32768)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--vocab", type=int, default=4096)
    parser.add_argument("--steps", type=int, default=4, help="optimizer steps per round (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from ropekit.finetune.fit import Shapes, plan_step
    from ropekit.finetune.pose import PoseSettings
    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.integrations.hf.load import load_config
    from ropekit.scaling import YarnScaling

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    window, target = args.window, args.target
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = random_llama(tmp / "model", layers=args.layers, hidden=args.hidden, vocab=args.vocab, length=window)
        yarn = YarnScaling(factor=target / window, original_max_position_embeddings=window)
        generator = torch.Generator().manual_seed(0)
        windows = torch.randint(0, args.vocab, (args.steps, window), generator=generator)
        common = {"steps": args.steps, "lr": 1e-5, "checkpoint_every": 0, "heldout_windows": 1}
        pose = FinetuneSettings(target_length=target, window=window, **common)
        full = FinetuneSettings(target_length=window, **common)
        rates: dict[str, list[float]] = {"pose": [], "full": [], "plain": []}
        for index in range(args.rounds):
            names = ["pose", "full", "plain"] if index % 2 == 0 else ["plain", "full", "pose"]
            for name in names:
                work = tmp / f"{name}{index}"
                if name == "pose":
                    rate = ropekit_rate(source, yarn, windows, windows[:1], pose, work)  # held-out loss: not timed
                elif name == "full":
                    rate = ropekit_rate(source, None, windows, windows[:1], full, work)
                else:
                    rate = plain_loop(source, windows, full, device)
                rates[name].append(rate)
                print(f"round {index + 1}: {name:5s} {rate:,.0f} tokens/s", flush=True)
        ids = windows[:1]
        positions = PoseSettings(window=window, target_length=target, seed=0).batch(torch.arange(1))
        peak_pose = step_peak(source, yarn, ids, positions, device)
        peak_full = step_peak(source, None, ids, None, device)
        shapes = Shapes.of_config(load_config(source))
    predicted = plan_step(shapes, window=window, target_length=target).peak
    median = {name: statistics.median(values) for name, values in rates.items()}
    summary = {
        "device": str(device),
        "threads": torch.get_num_threads(),
        "model": f"random Llama: {args.layers} layers, d_model {args.hidden}, vocab {args.vocab}",
        "window": window,
        "target": target,
        "tokens_per_s": median,
        "spread": {n: (max(v) - min(v)) / statistics.median(v) for n, v in rates.items()},
        "time_ratio_pose_over_full": median["full"] / median["pose"],
        "tokens_per_s_ratio_pose_over_plain": median["pose"] / median["plain"],
        "peak_bytes": {"pose": peak_pose, "full": peak_full, "predicted": predicted},
        "memory_ratio_pose_over_full": peak_pose / peak_full,
        "predicted_over_measured_pose": predicted / peak_pose,
    }
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main()
