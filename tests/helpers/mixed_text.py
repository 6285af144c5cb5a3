"""A toy corpus for mixed-window tests: short and long documents alternating, one per line in a .jsonl."""

from __future__ import annotations

import json
import random
from pathlib import Path


def write_mixed_text(path: Path, seed: int = 0) -> Path:
    """160 documents of random digits: the odd ones 2–5 digits (≤ 10 bytes, short for the byte Llama's L0 of 64
    tokens), the even ones 25–44 digits (over 64 bytes, long)."""
    rng = random.Random(seed)
    lines = []
    for i in range(160):
        n = rng.randrange(2, 6) if i % 2 else rng.randrange(25, 45)
        lines.append(json.dumps({"text": " ".join(str(rng.randrange(10)) for _ in range(n))}))
    path.write_text("\n".join(lines) + "\n")
    return path
