"""Every extend method on the byte-level random Llama of the MLX-LM tests (L0 = 64, factor 4, target 256): MLX-LM
against transformers on 128 random ids, on the folder `extend` writes. Prints the markdown rows of docs/engines.md.

Run from the repository root: ``PYTHONPATH=src:tests python evidence/engines/mlx_methods.py`` (needs mlx-lm).
"""

import sys
import tempfile
from pathlib import Path

sys.path.insert(0, "tests")
sys.path.insert(0, "tests/engines")

from test_mlx_lm import CANNOT, L0, SAME

from conftest import save_llama
from ropekit.engines.compare import compare_folder, probe_for
from ropekit.integrations.hf.extend import extend

work = Path(tempfile.mkdtemp())
llama = save_llama(work / "llama")
for name, scaling in {**SAME, **{key: value[0] for key, value in CANNOT.items()}}.items():
    folder = extend(llama, scaling, work / name, target_length=4 * L0).out
    _, rows = compare_folder(folder, probe_for(folder, logit_tokens=128), engines=("MLX-LM",))
    row, numbers = rows[0], rows[0].numbers
    logits = f"{numbers.get('logits_max_diff', float('nan')):.2g}, {100 * numbers.get('argmax_agreement', float('nan')):.0f}%"
    print(f"| {name} | {row.verdict} | {logits} | {row.detail if row.verdict != 'same' else ''} |", flush=True)
