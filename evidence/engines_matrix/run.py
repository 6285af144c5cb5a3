"""Write docs/engines_matrix.md: ``python evidence/engines_matrix/run.py [--only a,b] [--engines ...] [--out PATH]``
(the whole matrix takes hours on the shared 2 cores: run it niced in the background)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

from matrix import markdown, rope_architectures, run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated model types (default: every RoPE architecture)")
    parser.add_argument("--engines", help="comma-separated engines (default: all)")
    parser.add_argument("--out", default="docs/engines_matrix.md")
    args = parser.parse_args()
    import transformers

    transformers.logging.set_verbosity_error()
    types = args.only.split(",") if args.only else rope_architectures()
    rows = []
    for model_type in types:
        rows += run([model_type], args.engines)
        Path(args.out).write_text(markdown(rows, "python " + " ".join(sys.argv)))  # after each: a partial page
        print(model_type, rows[-1].built, len(rows[-1].cells), flush=True)


if __name__ == "__main__":
    main()
