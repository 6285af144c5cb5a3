"""The markdown tables of docs/search.md from the committed outputs: the search's scores beside the formulas
(search.json, heldout_ci.json) and the tasks (tasks.json files).

Usage: python evidence/search/tables.py search evidence/search/tiny_4x
       python evidence/search/tables.py tasks evidence/search/tasks_4x evidence/search/tasks_4x_theory_seed
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def search_table(folder: Path) -> None:
    data = json.loads((folder / "search.json").read_text())
    intervals = (
        json.loads((folder / "heldout_ci.json").read_text())["rows"] if (folder / "heldout_ci.json").is_file() else {}
    )
    print(
        f"critical pair: found {data['critical_pair']['found']}, theory {data['critical_pair']['theory']}; "
        f"{data['evaluations']} candidates in {data['seconds'] / 60:.1f} min"
    )
    print("searched factors: " + ", ".join(f"{f:.3g}" for f in data["long_factor"]))
    print()
    print("| method | search loss | held-out loss | held-out 95% bootstrap |")
    print("| --- | ---: | ---: | --- |")
    rows = {"searched": data["scores"]}
    rows |= {f"longrope[{k}]": v for k, v in data["seeds"].items()}
    rows |= {k: v for k, v in data["formulas"].items() if "skipped" not in v}
    for name, row in sorted(rows.items(), key=lambda item: item[1]["heldout"]):
        ci = intervals.get(name, {}).get("ci95")
        cell = f"[{ci[0]:.3g}, {ci[1]:.3g}]" if ci else ""
        print(f"| {name} | {row['search']:.3g} | {row['heldout']:.3g} | {cell} |")


def tasks_table(folders: list[Path]) -> None:
    rows, means = {}, []
    for folder in folders:
        data = json.loads((folder / "tasks.json").read_text())
        tag = " (theory seed)" if "theory" in folder.name else ""
        for row in data["rows"]:
            rows.setdefault(row["task"], {})[row["method"] + tag] = row
        means += [{**m, "method": m["method"] + tag} for m in data["summary"]["means"] if m["subset"] == "all"]
    methods = [m["method"] for m in means]
    print("| task | " + " | ".join(methods) + " |")
    print("| --- |" + " ---: |" * len(methods))
    for task, cells in rows.items():
        print(
            f"| {task} | " + " | ".join(f"{100 * cells[m]['score']:.0f}" if m in cells else "" for m in methods) + " |"
        )
    print(
        "| **mean [95% Wilson]** | "
        + " | ".join(
            f"**{100 * m['score']:.1f}** [{100 * m['ci95'][0]:.1f}, {100 * m['ci95'][1]:.1f}] (n={m['samples']})"
            for m in means
        )
        + " |"
    )


if __name__ == "__main__":
    if sys.argv[1] == "search":
        search_table(Path(sys.argv[2]))
    else:
        tasks_table([Path(p) for p in sys.argv[2:]])
