"""Write one seed formula of a search.json as a search.json of its own (the keys ``ropekit eval``'s ``searched``
method reads), so that ``longrope`` with that formula's lists is evaluated beside the search.

Usage: python evidence/search/seed_file.py evidence/search/tiny_4x theory
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

folder, name = Path(sys.argv[1]), sys.argv[2]
data = json.loads((folder / "search.json").read_text())
factors = data["seeds"][name]["factors"]
seed = {key: data[key] for key in ("format", "model", "rope", "original_length", "target_length", "factor")}
seed |= {"long_factor": factors, "short_factor": factors, "seed_of": name}
(folder / f"seed_{name}").mkdir(exist_ok=True)
(folder / f"seed_{name}" / "search.json").write_text(json.dumps(seed, indent=2) + "\n")
