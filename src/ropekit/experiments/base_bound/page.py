"""The base-bound experiment's page: retrieval against distance with B_m per model, the table, the conclusion."""

from __future__ import annotations

import html
import math
from pathlib import Path
from typing import Any

import numpy as np

from ropekit._plotting import pyplot, save_figure
from ropekit.eval.page import html_page
from ropekit.theory.decay import tolerance


def write_page(payload: dict[str, Any], out: Path) -> Path:
    """``index.html`` with the per-model figure, the summary figure and the table."""
    plt = pyplot()
    models = payload["models"]
    settings = payload["settings"]
    cols = 3
    rows_n = math.ceil(len(models) / cols)
    fig, axes = plt.subplots(rows_n, cols, figsize=(4.6 * cols, 3.4 * rows_n), squeeze=False)
    for ax, r in zip(axes.flat, models, strict=False):
        centres = [(b["low_distance"] + b["high_distance"]) / 2 for b in r["retrieval"]]
        accs = [b["accuracy"] for b in r["retrieval"]]
        errs = [
            [a - b["ci95"][0] for a, b in zip(accs, r["retrieval"], strict=True)],
            [b["ci95"][1] - a for a, b in zip(accs, r["retrieval"], strict=True)],
        ]
        ax.errorbar(centres, accs, yerr=errs, fmt="o-", color="tab:blue", capsize=3, label="retrieval accuracy")
        ax.set_ylim(-0.05, 1.05)
        ax.set_xlabel("needle distance (tokens)")
        ax.set_ylabel("accuracy", color="tab:blue")
        title = r["label"] if r["base"] is None else f"{r['label']} (b={r['base']:.3g})"
        ax.set_title(f"{title}\nppl {r['heldout']['perplexity']:.2f}", fontsize=9)
        if r.get("b_m"):
            twin = ax.twinx()
            values = np.asarray(r["b_m"]) / (settings["d_model"] // settings["n_heads"] // 2)
            twin.plot(np.arange(len(values)), values, color="tab:red", linewidth=0.8)
            twin.axhline(0, color="tab:red", linestyle=":", linewidth=0.8)
            # shade where B_m is negative beyond rounding (the bound's bases sit exactly on zeros of some B_m)
            below = np.asarray(r["b_m"]) < -tolerance(
                np.arange(len(values)), settings["d_model"] // settings["n_heads"]
            )
            twin.fill_between(np.arange(len(values)), -1, 1, where=below, color="tab:red", alpha=0.08)
            twin.set_ylim(-1.05, 1.05)
            twin.set_ylabel("B_m / (d/2)", color="tab:red")
    for ax in list(axes.flat)[len(models) :]:
        ax.axis("off")
    save_figure(fig, out / "retrieval_vs_distance.png")

    table_rows = []
    for r in models:
        h, a = r["heldout"], r["retrieval_overall"]
        base = "—" if r["base"] is None else f"{r['base']:.4g}"
        first = r.get("first_negative_m")
        table_rows.append(
            f"<tr><td>{html.escape(r['label'])}</td><td>{base}</td><td>{'—' if first is None else first}</td>"
            f"<td>{h['perplexity']:.3f} [{h['low']:.3f}, {h['high']:.3f}]</td>"
            f"<td>{a['accuracy']:.1%} [{a['low']:.1%}, {a['high']:.1%}]</td><td>{r['wall_time_s']:.0f}</td></tr>"
        )
    body = f"""<h1>Does a base below the bound give "superficial" long context?</h1>
<p>Men et al. (arXiv 2405.14591): a RoPE base below the lower bound for the context keeps perplexity low while
retrieval fails. Tiny models (d_model {settings["d_model"]}, {settings["n_layers"]} layers, head_dim
{settings["d_model"] // settings["n_heads"]}) trained at context {settings["context"]} for {settings["steps"]} steps
(batch {settings["batch_size"]}, {settings["task_fraction"]:.0%} passkey episodes, seed {settings["seed"]}),
{"from random weights" if not settings.get("init") else f"each starting from the weights of {html.escape(str(settings['init']))}"},
identical except the position encoding. Bound for ({settings["context"]}, {settings["d_model"] // settings["n_heads"]}):
smallest feasible base {models[0]["smallest_base"]:.4g}, robust bound {models[0]["robust_base"]:.4g}.</p>
<h2>Conclusion</h2><ul>{"".join(f"<li>{html.escape(line)}</li>" for line in payload["conclusion"])}</ul>
<h2>Table</h2><table><tr><th>model</th><th>base</th><th>first m with B_m&lt;0</th>
<th>held-out perplexity at {settings["context"]} [95% CI]</th><th>retrieval accuracy [95% Wilson CI]</th><th>train s</th></tr>
{"".join(table_rows)}</table>
<h2>Retrieval against needle distance, with B_m</h2>
<p>Blue: accuracy per distance bin with 95% intervals ({settings["trials"]} episodes per model). Red: B_m/(d/2);
shaded where B_m &lt; 0.</p><img src="retrieval_vs_distance.png" alt="retrieval vs distance">
<p>Raw data: <a href="results.json">results.json</a>.</p>"""
    index = out / "index.html"
    index.write_text(html_page("base-bound experiment", body))
    return index
