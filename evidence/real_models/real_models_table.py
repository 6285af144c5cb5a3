"""What each RoPE scaling method buys on a real model at 1×, 2×, 4× (and 8×) its training length.

Measures, per (method, multiple): perplexity of the shipped held-out text (``src/ropekit/data/heldout.txt``, the
project's own Python source held out from training the tiny model) over one non-overlapping window of the full
length (the first ``length + 1`` tokens), split inside/beyond the training length, and passkey retrieval over
``--trials`` episodes at needle depth 0.5. At 1× every method with factor s = 1 is plain RoPE, so 1× is measured
once (as ``none``). Each finished row is appended to ``OUT/rows.jsonl`` at once, so a run cut short keeps what it
measured; ``docs/real_models.md`` is written from those rows.

    OMP_NUM_THREADS=2 python evidence/real_models/real_models_table.py --model path/to/SmolLM2-135M-Instruct.Q4_1.gguf \\
        --out runs/real_models --multiples 1,2,4 --methods none,linear,ntk,dynamic,yarn,llama3 --trials 2
"""

from __future__ import annotations

import argparse
import hashlib
import json
import platform
import time
from pathlib import Path

import torch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--methods", default="none,linear,ntk,dynamic,yarn,llama3")
    parser.add_argument("--multiples", default="1,2,4")
    parser.add_argument("--trials", type=int, default=2)
    parser.add_argument("--dtype", default="float32")
    parser.add_argument(
        "--runs",
        default=None,
        help="explicit order instead of the full grid: kind:multiple:method,... (kind perplexity or passkey), "
        "e.g. perplexity:2:none,perplexity:2:yarn,perplexity:4:yarn (for a slow machine: the most telling first)",
    )
    args = parser.parse_args()

    from ropekit.eval.loader import load_eval_model
    from ropekit.eval.methods import factor_for, scaling_for
    from ropekit.eval.passkey import passkey_grid
    from ropekit.eval.perplexity import perplexity_at
    from ropekit.model.corpus import heldout_bytes

    args.out.mkdir(parents=True, exist_ok=True)
    rows_path = args.out / "rows.jsonl"
    started = time.perf_counter()
    model = load_eval_model(args.model, dtype=args.dtype)
    text = heldout_bytes()
    ids = model.encode(text)
    train = model.train_length
    context = {
        "model": model.describe(),
        "text": "src/ropekit/data/heldout.txt",
        "text_sha256": hashlib.sha256(text).hexdigest(),
        "text_tokens": len(ids),
        "train_length": train,
        "threads": torch.get_num_threads(),
        "machine": f"{platform.machine()} {platform.processor() or ''} {torch.__version__}".strip(),
        "load_s": round(time.perf_counter() - started, 1),
    }
    (args.out / "context.json").write_text(json.dumps(context, indent=1) + "\n")
    print(json.dumps(context), flush=True)
    methods = [m for m in args.methods.split(",") if m]
    multiples = [float(m) for m in args.multiples.split(",") if m]
    plan = []
    for kind in ("perplexity", "passkey"):
        for multiple in multiples:
            for method in methods if multiple > 1 else ["none"]:
                plan.append((kind, multiple, method))
    if args.runs:
        plan = [(k, float(m), name) for k, m, name in (run.split(":") for run in args.runs.split(","))]
    filler = ids.numpy()
    encode = lambda t: model.encode(t).numpy()  # noqa: E731
    for kind, multiple, method in plan:
        length = int(multiple * train)
        factor = factor_for(length, train, "auto")
        try:
            scaling = scaling_for(method, factor=factor, train_length=train, native=model.native_scaling)
        except LookupError as error:
            print(f"skip {method}: {error}", flush=True)
            continue
        model.set_scaling(scaling)
        tick = time.perf_counter()
        row = {"kind": kind, "method": method, "multiple": multiple, "length": length, "factor": factor}
        if kind == "perplexity":
            point = perplexity_at(model, ids, length, train, max_tokens=length)
            row.update(point.to_dict())
        else:
            cells = passkey_grid(model, filler, [length], [0.5], trials=args.trials, batch_size=1, encode=encode)
            row.update(trials=cells[0].trials, correct=cells[0].correct)
        row["seconds"] = round(time.perf_counter() - tick, 1)
        with rows_path.open("a") as handle:
            handle.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
