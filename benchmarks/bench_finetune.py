"""Training throughput of ``ropekit finetune``'s loop against a plain transformers training loop, same settings.

Both train the same model (a random Llama built here, or ``--model DIR|FILE.gguf``) with YaRN at the same target
length, on the same windows, with AdamW, the same warm-up + cosine schedule, gradient checkpointing and sdpa
attention, batch ``--batch-size``, in fp32 (bf16 autocast on a GPU that supports it, for both):

* **ropekit**: :func:`ropekit.finetune.train.train` — accelerate, ropekit's patched RoPE (float64 angles), the
  chunked loss (no ``(seq × vocab)`` logits), loss log and step bookkeeping;
* **plain**: ``model(input_ids, labels=input_ids).loss.backward(); optimizer.step()`` on the model loaded natively
  from the config ``ropekit extend`` writes.

Rounds alternate the two (so background load hits both alike); each round runs ``--steps`` optimizer steps and the
first step of each is not timed (warm-up). Printed: median tokens/s per loop, spread, and ropekit / plain.

Usage::

    python benchmarks/bench_finetune.py                    # random Llama, 1k tokens, CPU
    python benchmarks/bench_finetune.py --model path/to/SmolLM2-135M-Instruct.Q4_1.gguf --length 2048 --rounds 2
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import tempfile
import time
from pathlib import Path

import torch


def random_llama(path: Path, length: int) -> Path:
    """A random 4-layer Llama (d_model 256, head_dim 64, vocab 8192) saved to ``path``; its original length is
    ``length // 2``."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=8192,
        hidden_size=256,
        intermediate_size=768,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=length // 2,
        rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).save_pretrained(path)
    return path


def plain_loop(model_dir: Path, windows: torch.Tensor, settings, device: torch.device) -> float:
    """tokens/s of a plain transformers loop (the natively configured model) over ``settings.steps`` steps."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.to(device).train()
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.config.use_cache = False
    optimizer = torch.optim.AdamW(model.parameters(), lr=settings.lr, betas=(0.9, 0.95))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, settings.learning_rate)
    bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
    timed, tokens = 0.0, 0
    for step in range(settings.steps):
        batch = windows[step * settings.batch_size : (step + 1) * settings.batch_size].to(device)
        _sync(device)
        start = time.perf_counter()
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
            loss = model(input_ids=batch, labels=batch).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), settings.max_grad_norm)
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()
        _sync(device)
        if step:  # the first step warms up
            timed += time.perf_counter() - start
            tokens += batch.numel()
    return tokens / timed


def ropekit_loop(source: Path, scaling, windows: torch.Tensor, heldout: torch.Tensor, settings, work: Path) -> float:
    """tokens/s of :func:`ropekit.finetune.train.train` over ``settings.steps`` steps (first step not timed)."""
    from ropekit.finetune.run import load_for_training
    from ropekit.finetune.train import train

    work.mkdir(parents=True, exist_ok=True)
    result = train(lambda: load_for_training(source, scaling, None), windows, heldout, settings, work, progress=False)
    log = [r for r in result.log if r.step > 0]
    per_step = settings.batch_size * settings.target_length
    return per_step * (len(log) - 1) / (log[-1].seconds - log[0].seconds)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="transformers folder or .gguf (default: a random Llama)")
    parser.add_argument("--length", type=int, default=1024, help="target length (tokens per window)")
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--steps", type=int, default=6, help="optimizer steps per round (the first is not timed)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    from ropekit.finetune.settings import FinetuneSettings
    from ropekit.integrations.hf.extend import extend
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import original_length_of, rope_of
    from ropekit.scaling import YarnScaling

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        source = args.model or random_llama(tmp / "model", args.length)
        config = load_config(source)
        original = original_length_of(config, rope_of(config))
        if args.model is not None:
            original = args.length // 2  # the target is what is timed; YaRN s = 2 from half of it
        scaling = YarnScaling(factor=args.length / original, original_max_position_embeddings=original)
        native = extend(source, scaling, tmp / "native", target_length=args.length).out
        vocab = int(config.get("vocab_size") or 32000)
        generator = torch.Generator().manual_seed(0)
        windows = torch.randint(0, vocab, (args.steps * args.batch_size, args.length), generator=generator)
        heldout = windows[:1]
        settings = FinetuneSettings(
            target_length=args.length, steps=args.steps, lr=1e-5, batch_size=args.batch_size, checkpoint_every=0,
            heldout_windows=1,
        )  # fmt: skip
        ours, plain = [], []
        for index in range(args.rounds):
            order = [("ropekit", ours), ("plain", plain)] if index % 2 == 0 else [("plain", plain), ("ropekit", ours)]
            for name, results in order:
                if name == "ropekit":
                    results.append(ropekit_loop(source, scaling, windows, heldout, settings, tmp / f"work{index}"))
                else:
                    results.append(plain_loop(native, windows, settings, device))
                print(f"round {index + 1}: {name:8s} {results[-1]:,.0f} tokens/s", flush=True)

    def spread(values: list[float]) -> float:
        return (max(values) - min(values)) / statistics.median(values)

    summary = {
        "device": torch.cuda.get_device_name() if device.type == "cuda" else platform.processor() or "cpu",
        "threads": torch.get_num_threads(),
        "model": str(args.model or "random Llama (4 layers, d_model 256, vocab 8192)"),
        "length": args.length,
        "batch_size": args.batch_size,
        "ropekit_tokens_per_s": statistics.median(ours),
        "plain_tokens_per_s": statistics.median(plain),
        "ropekit_spread": spread(ours),
        "plain_spread": spread(plain),
        "ratio_ropekit_over_plain": statistics.median(ours) / statistics.median(plain),
    }
    print(json.dumps(summary, indent=2))
    print(
        f"ropekit finetune loop: {summary['ropekit_tokens_per_s']:,.0f} tokens/s; plain transformers loop: "
        f"{summary['plain_tokens_per_s']:,.0f} tokens/s; ratio {summary['ratio_ropekit_over_plain']:.3f}"
    )


if __name__ == "__main__":
    main()
