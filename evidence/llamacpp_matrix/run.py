"""llama.cpp's column: ``python evidence/llamacpp_matrix/run.py [--only a,b] [--limit S]`` (about 30 minutes on 2
shared cores: run it niced in the background).

For every causal-LM architecture of transformers with RoPE (``evidence/engines_matrix``'s list and tiny models: its
config class's defaults, 2 layers, hidden size 64; where llama.cpp needs more of the model, the keys and the tokenizer
its release has, ``released.py``) whose HF class llama.cpp's own converter registers: the tiny model is converted
to an F32 GGUF file by the converter (``tests/helpers/llamacpp_convert.py``), then llama.cpp's logits
(llama-cpp-python) are compared with transformers' on the same ids, for the source and for each method (none, linear,
yarn; factor 4) written by ``ropekit extend`` twice: into a folder (transformers' side) and into a GGUF file
(llama.cpp's). A cell is ``same`` (max |Δlogit| within :data:`TOLERANCE`), ``differs`` (with the gap), ``extend
refused`` (its one line) or ``not run`` (why). Rows go to ``rows.json`` as each architecture is measured; the counts
and the command to ``summary.md``.
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
sys.path[0:0] = [str(HERE), str(HERE.parent / "engines_matrix"), str(HERE.parents[1] / "tests")]

from matrix import FACTOR, _invoke, rope_architectures, tiny_folder  # noqa: E402
from released import RELEASED, Released, dress, trained_routers  # noqa: E402

from helpers.llamacpp_convert import (  # noqa: E402
    _CHILD,
    byte_fallback_tokenizer,
    byte_tokenizer,
    convert,
    converter,
    llama_sentencepiece_tokenizer,
    missing,
    sentencepiece_tokenizer,
)

ROWS, SUMMARY = HERE / "rows.json", HERE / "summary.md"
#: ``Released.tokenizer`` → what saves it
TOKENIZERS = {
    "bytes": byte_tokenizer,
    "sentencepiece": sentencepiece_tokenizer,
    "llama_sentencepiece": llama_sentencepiece_tokenizer,
    "byte_fallback": byte_fallback_tokenizer,
}
METHODS = ("none", "linear", "yarn")
#: max |Δlogit| of float32 against float32 through two implementations (measured 1e-4 to 3e-4 where they agree)
TOLERANCE = 2e-3
#: ids past the tiny models' original length (256) and below the target (1024)
IDS = [(7 * i + 3) % 256 for i in range(320)]
#: seconds one architecture's comparisons may take; conversions run in batches of :data:`BATCH` per child
LIMIT, BATCH = 240, 8


def registered() -> set[str]:
    """The HF architecture names llama.cpp's converter registers for text models."""
    code = _CHILD.split("import runpy")[0] + (
        "from conversion import TEXT_MODEL_MAP\nprint('\\n'.join(TEXT_MODEL_MAP))\n"
    )
    script = str(converter())
    done = subprocess.run([sys.executable, "-c", code, script], capture_output=True, text=True, check=True)
    return set(done.stdout.split())


def hf_class(model_type: str) -> str:
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type]


def build(model_type: str, folder: Path) -> Path:
    """The tiny ``model_type`` model at ``folder`` as released (:data:`released.RELEASED`: the keys, their spelling
    in ``config.json``, the tokenizer, the trained router, the legacy keys, tensor names and special tokens that
    llama.cpp or its converter needs; the config class's defaults and byte-level BPE elsewhere)."""
    released = RELEASED.get(model_type, Released())
    tiny_folder(model_type, folder, released.keys or None)
    trained_routers(model_type, folder)
    TOKENIZERS[released.tokenizer](folder)
    dress(model_type, folder)
    return folder


class OverTime(BaseException):
    """An architecture past :data:`LIMIT`."""


def transformers_logits(folder: Path, model_type: str):
    import torch
    import transformers

    model = getattr(transformers, hf_class(model_type)).from_pretrained(folder, dtype=torch.float32)
    with torch.no_grad():
        return model(torch.tensor([IDS])).logits[0].double().numpy()


def llama_logits(path: Path):
    """llama.cpp's logits on :data:`IDS` (as :func:`ropekit.engines.llama_cpp.logits`, without its child-process
    probe: the architecture's source file has passed that probe, and an extended file differs only in metadata)."""
    import llama_cpp
    import numpy as np

    llm = llama_cpp.Llama(str(path), n_ctx=len(IDS), n_batch=512, n_ubatch=512, n_threads=1, verbose=False)
    llm._batch.set_batch(batch=IDS, n_past=0, logits_all=True)
    llm._ctx.decode(llm._batch)
    rows = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(IDS), llm.n_vocab())).astype(np.float64)
    del llm
    return rows


def compare(folder: Path, gguf: Path, model_type: str) -> dict:
    """The verdict, the largest gap and, in the detail, the gap at position 0 (where attention sees one key, so no
    attention score, RoPE's included, plays a part: a gap there is elsewhere); a side whose logits are not finite is
    named, not compared."""
    import numpy as np

    llama, ours = llama_logits(gguf), transformers_logits(folder, model_type)
    broken = [name for name, rows in (("llama.cpp", llama), ("transformers", ours)) if not np.isfinite(rows).all()]
    if broken:
        return {"verdict": "not run", "detail": f"{' and '.join(broken)} gave non-finite logits on this tiny model"}
    gaps = np.abs(llama - ours).max(axis=1)  # per position
    gap = float(gaps.max())
    detail = f"max |Δlogit| {gap:.3g}; {gaps[0]:.2g} at position 0 (one key)"
    return {"verdict": "same" if gap <= TOLERANCE else "differs", "gap": gap, "detail": detail}


def measure(model_type: str, folder: Path, gguf: Path, work: Path) -> list[dict]:
    from ropekit.eval.backends.llamacpp_probe import probe

    why = probe(gguf)  # a child process: an architecture llama.cpp crashes on stays there
    if why is not None:
        return [{"method": "source", "verdict": "not run", "detail": f"llama.cpp: {why}"[:240]}]
    cells = [{"method": "source", **compare(folder, gguf, model_type)}]
    lost = lost_original_length(folder, gguf)
    for method in METHODS:
        flags = ["--scaling", method] + ([] if method == "none" else ["--factor", str(FACTOR)])
        out = work / f"{model_type}-{method}"
        status, said = _invoke("extend", "--model", folder, *flags, "-o", out, "--force")
        if status != "ok":
            cells.append({"method": method, "verdict": f"folder extend {status}", "detail": said})
            continue
        status, said = _invoke("extend", "--model", gguf, *flags, *lost, "-o", f"{out}.gguf", "--force")
        if status != "ok":
            cells.append({"method": method, "verdict": f"gguf extend {status}", "detail": said})
            continue
        try:
            cells.append({"method": method, **compare(out, Path(f"{out}.gguf"), model_type)})
        except Exception as error:  # extend's file, not the source's: the source cell stands
            said = f"{type(error).__name__}: {error}"[:240]
            cells.append({"method": method, "verdict": "TRACEBACK", "detail": f"extend's GGUF file: {said}"})
    return cells


def lost_original_length(folder: Path, gguf: Path) -> list[str]:
    """``--original-length N`` (the folder's) for a GGUF file that lost it (Llama 3's scaling baked into
    ``rope_freqs``: ``extend`` refuses YaRN on it without the flag), else nothing."""
    from ropekit.integrations.gguf.read_rope import unrecorded_original_length
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of

    if unrecorded_original_length(gguf) is None:
        return []
    config = load_config(folder)
    try:
        rope = rope_of(config, first_scaled_type(config))
    except ValueError:  # a folder extend refuses (its RoPE in text_config): its cells say so
        return []
    return ["--original-length", str(original_length_of(config, rope))]


def timed(model_type: str, folder: Path, gguf: Path, work: Path) -> list[dict]:
    def alarm(*_: object) -> None:
        raise OverTime

    signal.signal(signal.SIGALRM, alarm)
    signal.alarm(LIMIT)
    try:
        return measure(model_type, folder, gguf, work)
    except OverTime:
        return [{"method": "source", "verdict": "not run", "detail": f"over {LIMIT} s on this machine"}]
    except Exception as error:  # recorded, and counted: the matrix exists to find them
        return [{"method": "?", "verdict": "TRACEBACK", "detail": f"{type(error).__name__}: {error}"[:240]}]
    finally:
        signal.alarm(0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", help="comma-separated model types")
    args = parser.parse_args()
    if missing():
        raise SystemExit(missing())
    import transformers

    transformers.logging.set_verbosity_error()
    known = registered()
    types = args.only.split(",") if args.only else rope_architectures()
    stored = json.loads(ROWS.read_text()) if ROWS.is_file() and args.only else {}
    command = "python " + " ".join(sys.argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for start in range(0, len(types), BATCH):
            built = {}
            for model_type in types[start : start + BATCH]:
                row = {"arch": model_type, "hf_class": hf_class(model_type), "command": command}
                if row["hf_class"] not in known:
                    stored[model_type] = {**row, "converter": "not registered", "cells": []}
                    continue
                try:
                    build(model_type, work / model_type)
                except Exception as error:
                    why = f"not built: {type(error).__name__}: {' '.join(str(error).split())}"[:240]
                    stored[model_type] = {**row, "converter": why, "cells": []}
                    continue
                built[model_type] = row
            done = convert([(work / t, work / f"{t}.gguf") for t in built]) if built else {}
            for model_type, row in built.items():
                why = done[work / f"{model_type}.gguf"]
                unconvertible = RELEASED.get(model_type, Released()).unconvertible
                if why and unconvertible:
                    why = f"not convertible here: {unconvertible} (converter: {why})"
                cells = [] if why else timed(model_type, work / model_type, work / f"{model_type}.gguf", work)
                stored[model_type] = {**row, "converter": why or "converted", "cells": cells}
                ROWS.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
                print(model_type, why or [c["verdict"] for c in cells], flush=True)
    for model_type, row in stored.items():  # the traced reasons as released.py says them now, on every stored row
        row.pop("explained", None)
        if RELEASED.get(model_type, Released()).explained:
            row["explained"] = RELEASED[model_type].explained
    ROWS.write_text(json.dumps(dict(sorted(stored.items())), indent=1) + "\n")
    SUMMARY.write_text(summary(stored))


def summary(stored: dict) -> str:
    rows = list(stored.values())
    supported = [r for r in rows if r["converter"] != "not registered"]
    measured = [r for r in supported if any(c["verdict"] in ("same", "differs") for c in r["cells"])]
    counts: dict[str, int] = {}
    for row in supported:
        for cell in row["cells"]:
            counts[f"{cell['method']}: {cell['verdict']}"] = counts.get(f"{cell['method']}: {cell['verdict']}", 0) + 1
    lines = [
        "# llama.cpp's column: converter, source and `extend`'s GGUF against transformers",
        "",
        f"Made by: `{sorted({r['command'] for r in rows})[0]}` (niced, 2 shared cores). Rows: `rows.json`.",
        "",
        f"{len(rows)} RoPE causal-LM architectures of transformers; llama.cpp's converter registers {len(supported)};",
        f"{len(measured)} of those have a measured llama.cpp verdict ({100 * len(measured) / max(len(supported), 1):.0f}%).",
        f"A cell is `same` when max |Δlogit| <= {TOLERANCE:g} (float32 both sides) on {len(IDS)} ids, factor {FACTOR}.",
        "",
        "| method: verdict | cells |",
        "|---|---|",
        *[f"| {key} | {n} |" for key, n in sorted(counts.items())],
        "",
        "| architecture | converter | " + " | ".join(("source", *METHODS)) + " | why it differs |",
        "|---|---|" + "---|" * (2 + len(METHODS)),
    ]
    for row in supported:
        by = {c["method"]: c for c in row["cells"]}
        shown = [_cell(by.get(m)) for m in ("source", *METHODS)]
        why = RELEASED.get(row["arch"], Released()).explained.replace("|", "/")
        lines.append(
            f"| {row['arch']} | {row['converter'][:60].replace('|', '/')} | " + " | ".join(shown) + f" | {why} |"
        )
    return "\n".join(lines) + "\n"


def _cell(cell: dict | None) -> str:
    if cell is None:
        return ""
    if cell["verdict"] in ("same", "differs"):
        return f"{cell['verdict']} ({cell['gap']:.2g})"
    return f"{cell['verdict']}: {cell['detail'][:80]}".replace("|", "/")


if __name__ == "__main__":
    main()
