"""The "source (as shipped)" row of a `ropekit finetune` before/after table, for runs made before the table had it.

Run: ``python evidence/smollm2/finetune_shipped_row.py MODEL TEXT TARGET [ORIGINAL] [TRIALS]`` (lengths in tokens). It packs
TEXT exactly as `ropekit finetune` does for TARGET, loads MODEL as shipped (no ropekit scaling) and prints
``ropekit.finetune.run.measure``'s perplexity at ORIGINAL and TARGET and passkey at TARGET on the held-out tail, as
JSON. docs/finetune.md's SmolLM2 8k -> 16k table used
``python evidence/smollm2/finetune_shipped_row.py $GGUF src/ropekit/data/heldout.txt 16384 8192 2``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from ropekit.eval.loader import load_eval_model
from ropekit.finetune.data import pack, tokenize_text
from ropekit.finetune.run import measure
from ropekit.integrations.hf.load import load_tokenizer


def main() -> None:
    model_path, text, target = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    original = int(sys.argv[4]) if len(sys.argv) > 4 else 8192
    trials = int(sys.argv[5]) if len(sys.argv) > 5 else 2
    packed = pack(tokenize_text(load_tokenizer(model_path), text), target)
    model = load_eval_model(model_path, dtype="float32")
    row = measure(model, packed.heldout, original, target, max(target, 16384), trials)
    print(json.dumps({"model": "source (as shipped)", **row}))


if __name__ == "__main__":
    main()
