"""``ropekit report``: a self-contained folder (index.html + PNG plots + raw JSON/CSV) for one model.

Sections: the theory view of the model's RoPE (wavelengths, critical dimension, the base against the
lower bound for each evaluated length), perplexity curves per method, passkey heatmaps per method, and a
plain-words summary of which method is best at which length and by how much.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from ropekit.eval.figures import passkey_figure, perplexity_figure
from ropekit.eval.methods import scaling_for
from ropekit.eval.page import html_page
from ropekit.eval.protocol import EvalModel
from ropekit.eval.summary import summary_table, verdict
from ropekit.eval.sweep import SweepResult, SweepSettings, best_by_length
from ropekit.scaling.registry import frequencies, ranked_scalings
from ropekit.theory.figures import wavelength_lines_figure


def theory_view(model: EvalModel, lengths: list[int]) -> dict[str, Any]:
    """Wavelengths, critical dimension and the base bound for each length (numpy only).

    Per length: the smallest feasible base (A) and, where :func:`ropekit._costs.robust_by_default` allows, the
    robust base (B) of Men et al. (arXiv 2405.14591); whether the model's base is feasible there (exact: B_m(base) >= 0 for every
    m < length, from the first negative m) and whether it clears (B) (``None`` where (B) was not computed).
    """
    from ropekit._costs import robust_by_default
    from ropekit.theory import (
        base_bound,
        critical_dimension,
        extrapolation_limit,
        max_context_length,
        smallest_feasible_base,
    )

    rope = model.rope
    wavelengths = frequencies(rope).wavelengths
    train = model.train_length
    d = rope.dim
    first_negative = max_context_length(rope.base, d)
    rows = []
    for length in lengths:
        if robust_by_default(length, d):
            bound = base_bound(length, d)
            smallest, robust = bound.smallest_base, bound.robust_base
        else:
            smallest, robust = smallest_feasible_base(length, d), None
        rows.append(
            {
                "length": length,
                "smallest_base": smallest,
                "robust_base": robust,
                "base_clears_bound": None if robust is None else rope.base >= robust,
                "base_feasible": first_negative is None or first_negative >= length,
            }
        )
    return {
        "head_dim": rope.head_dim,
        "rotary_dim": d,
        "base": rope.base,
        "train_length": train,
        "pairs_completing_a_period": int((wavelengths <= train).sum()),
        "critical_dimension": critical_dimension(d, rope.base, train),
        "extrapolation_limit": extrapolation_limit(d, rope.base, train),
        "max_context_length_for_base": first_negative,
        "bound_rows": rows,
        "wavelengths": wavelengths.tolist(),
    }


def summary_lines(result: SweepResult, train_length: int) -> list[str]:
    """Plain-words findings: best method per length and by how much; passkey per method."""
    lines = []
    rows = result.perplexity
    best = best_by_length(rows)
    by = {(r["method"], r["length"]): r["perplexity"] for r in rows}
    for length, (method, value) in sorted(best.items()):
        others = sorted(v for (m, n), v in by.items() if n == length and m != method and v is not None)
        runner = f"; next best {min(others):.2f} ({min(others) / value:.2f}× worse)" if others else ""
        plain = by.get(("none", length))
        vs_plain = f", {plain / value:.1f}× lower than no scaling ({plain:.2f})" if plain and method != "none" else ""
        lines.append(
            f"At {length} tokens ({length / train_length:g}× the training length) {method} is best with "
            f"perplexity {value:.2f}{vs_plain}{runner}."
        )
    methods = list(dict.fromkeys(r["method"] for r in result.passkey))
    for method in methods:
        cells = [r for r in result.passkey if r["method"] == method]
        per_length = {}
        for r in cells:
            per_length.setdefault(r["length"], []).append(r["accuracy"])
        text = ", ".join(f"{n}: {sum(v) / len(v):.0%}" for n, v in sorted(per_length.items()))
        lines.append(f"Passkey accuracy with {method} by length — {text}.")
    return lines


def _table(rows: list[dict[str, Any]], columns: list[str]) -> str:
    head = "".join(f"<th>{html.escape(c)}</th>" for c in columns)
    body = []
    for r in rows:
        cells = []
        for c in columns:
            v = r.get(c)
            cells.append(f"<td>{v:.4g}</td>" if isinstance(v, float) else f"<td>{html.escape(str(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def perplexity_matrix(rows: list[dict[str, Any]], key: str = "perplexity") -> tuple[list[str], list[dict[str, Any]]]:
    """Pivot: one row per method, one column per length."""
    lengths = sorted({r["length"] for r in rows})
    table = {}
    for r in rows:
        table.setdefault(r["method"], {"method": r["method"]})[str(r["length"])] = r[key]
    return ["method", *map(str, lengths)], list(table.values())


def model_line(describe: dict[str, Any]) -> str:
    """How the model ran, in words: dtype and attention, the GGUF file and its quantisation, the scaled layer types."""
    line = f"Ran in {describe.get('dtype', 'float32')} with {describe.get('attention', 'sdpa')} attention."
    gguf = describe.get("gguf")
    if gguf:
        line += f" Loaded from GGUF file {gguf['file']} ({gguf['quantisation']}, dequantised)."
    if describe.get("layer_types"):
        scaled = describe.get("scaled_layer_types") or ["full_attention"]
        line += (
            f" One RoPE per layer type ({', '.join(describe['layer_types'])}); methods were applied to the "
            f"{', '.join(scaled)} layers, each at its own base. Attention methods (self_extend, rerope, leaky_rerope, "
            "dual_chunk, sinks, string) run in the full-attention (global) layers only; the sliding-window layers keep "
            "their window and sdpa."
        )
    layout = describe.get("rope_layout")
    if layout:
        nope, rope = layout["nope_layers"], layout["rope_layers"]
        line += (
            f" {len(nope)} of {layout['layers']} layers take no RoPE (NoPE: layers {', '.join(map(str, nope))}): "
            f"scalings and attention methods were applied to the other {len(rope)} layers "
            f"({', '.join(map(str, rope)) or 'none'}); the NoPE layers kept the model's own attention."
        )
    if describe.get("gates"):  # Infini-attention: how much each head takes from its memory
        rows = "; ".join(f"layer {i}: " + ", ".join(f"{g:.3f}" for g in row) for i, row in enumerate(describe["gates"]))
        line += f" Infini-attention memory gates sigmoid(β) per head: {rows}."
    return line


def _write_figures(
    model: EvalModel, settings: SweepSettings, result: SweepResult, out: Path, lengths: list[int]
) -> None:
    """``wavelengths.png`` (plain and each evaluated static method at the longest length's factor), and
    ``perplexity.png`` and ``passkey.png`` when the sweep measured them."""
    train = model.train_length
    scaled = {"plain": frequencies(model.rope).wavelengths}
    for method in ranked_scalings("plan_order"):  # the static methods a plan compares, when evaluated
        if method in settings.methods:
            factor = max(lengths) / train
            spec = scaling_for(method, factor=factor, train_length=train)
            scaled[f"{method} (s={factor:g})"] = frequencies(model.rope.replace(scaling=spec)).wavelengths
    wavelength_lines_figure(out / "wavelengths.png", scaled, train)
    if result.perplexity:
        perplexity_figure(result.perplexity, train, out / "perplexity.png")
    if result.passkey:
        passkey_figure(result.passkey, out / "passkey.png")


def _theory_parts(theory: dict[str, Any]) -> list[str]:
    """The report's theory section: periods, critical dimension, the base's bound and the bound table."""
    return [
        "<h2>Theory view</h2>",
        f"<p>{theory['pairs_completing_a_period']} of {theory['rotary_dim'] // 2} pairs complete a full period within "
        f"the training length; critical dimension d_extra = {theory['critical_dimension']} "
        f"(Liu et al., arXiv 2310.05209), extrapolation limit T_extra ≈ {theory['extrapolation_limit']:.0f} tokens. "
        f"The base {theory['base']:g} keeps B_m ≥ 0 up to m = {theory['max_context_length_for_base']:,} "
        "(Men et al., arXiv 2405.14591).</p>",
        "<img src='wavelengths.png' alt='wavelengths per pair'>",
        _table(theory["bound_rows"], ["length", "smallest_base", "robust_base", "base_feasible", "base_clears_bound"]),
    ]


def write_sweep_report(
    model: EvalModel, settings: SweepSettings, result: SweepResult, out: Path, elapsed_s: float, tasks: Any = None
) -> Path:
    """Write ``index.html``, the figures and the raw results into ``out``; return the HTML path.

    ``tasks``: a :class:`ropekit.eval.tasks.run.TaskResult` for the RULER-style task section (none without it).
    """
    out.mkdir(parents=True, exist_ok=True)
    result.write(out)
    train = model.train_length
    lengths = sorted({r["length"] for r in result.perplexity} | {r["length"] for r in result.passkey})
    theory = theory_view(model, lengths)
    _write_figures(model, settings, result, out, lengths)
    findings = summary_lines(result, train)
    if tasks is not None:
        from ropekit.eval.tasks.section import task_findings

        findings += task_findings(tasks)
    task_summary = tasks.summary() if tasks is not None else None
    headline = verdict(result.perplexity, result.passkey, task_summary, train)
    table_columns, table_rows = summary_table(result.perplexity, result.passkey, task_summary)
    summary = {
        "verdict": headline,
        "table": {"columns": table_columns, "rows": table_rows},
        "findings": findings,
        "theory": theory,
    }
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    describe = model.describe()
    cols, matrix = perplexity_matrix(result.perplexity)
    parts = [
        f"<h1>ropekit report: {html.escape(str(describe.get('name')))}</h1>",
        f"<p>{html.escape(str(describe.get('kind')))}, {describe.get('parameters', '?'):,} parameters, trained at "
        f"{train} tokens, head_dim {theory['head_dim']}, rotary_dim {theory['rotary_dim']}, base {theory['base']:g}. "
        f"{html.escape(model_line(describe))} "
        f"Evaluation text: {html.escape(str(result.context.get('eval_text', 'shipped held-out text')))}, "
        f"{result.context.get('eval_text_tokens', 0):,} tokens, sha256 "
        f"<code>{result.context['eval_text_sha256'][:16]}…</code>; "
        f"ropekit {result.context['ropekit_version']}, run time {elapsed_s:.0f} s.</p>",
        f"<h2>Summary</h2><p><strong>{html.escape(headline)}</strong></p>",
        _table(table_rows, table_columns),
        "<details><summary>Every finding, one line each</summary><ul>"
        + "".join(f"<li>{html.escape(line)}</li>" for line in findings)
        + "</ul></details>",
    ]
    parts += _theory_parts(theory)
    if result.perplexity:
        parts += [
            f"<h2>Perplexity against length ({html.escape(settings.mode)})</h2>",
            "<img src='perplexity.png' alt='perplexity curves'>",
            _table(matrix, cols),
        ]
        bcols, bmatrix = perplexity_matrix([r for r in result.perplexity if r["beyond"] is not None], "beyond")
        parts += [f"<p>Perplexity on positions beyond {train} only:</p>", _table(bmatrix, bcols)]
    if result.passkey:
        parts += [
            f"<h2>Passkey retrieval ({settings.trials} trials per cell, seed {settings.seed})</h2>",
            "<img src='passkey.png' alt='passkey heatmaps'>",
        ]
    if tasks is not None:
        from ropekit.eval.tasks.section import task_section

        parts += task_section(tasks, out)
    if result.skipped:
        parts.append(
            "<p>Skipped: " + "; ".join(html.escape(f"{s['method']} ({s['reason']})") for s in result.skipped) + "</p>"
        )
    parts.append(
        "<p>Raw data: <a href='results.json'>results.json</a>, <a href='perplexity.csv'>perplexity.csv</a>, "
        "<a href='passkey.csv'>passkey.csv</a>, <a href='summary.json'>summary.json</a>.</p>"
    )
    index = out / "index.html"
    index.write_text(html_page("ropekit report", "\n".join(parts)))
    return index
