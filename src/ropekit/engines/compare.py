"""Compare each engine with transformers on one model folder (see :mod:`ropekit.engines`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from ropekit.engines import llama_cpp, mlx_lm, ollama, sglang, vllm
from ropekit.engines.launch import Launch, key_conflict
from ropekit.engines.probe import Answer, Case, EngineRow, Probe, make_probe
from ropekit.engines.transformers_ref import reference_answer
from ropekit.engines.transformers_ref import version as transformers_version

#: the engines compared, in the order of the table
COMPARED_ENGINES = ("MLX-LM", "llama.cpp", "vLLM", "SGLang", "Ollama")


def probe_for(folder: Path, *, original_length: int | None = None, logit_tokens: int = 0, seed: int = 0) -> Probe:
    """The probe for an extended folder: L0, the target (its ``max_position_embeddings``) and the switch lengths of
    its RoPE (:func:`~ropekit.scaling.static_form.static_form`); ``logit_tokens`` random ids (0: no logits)."""
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of
    from ropekit.scaling.static_form import static_form

    config = json.loads((Path(folder) / "config.json").read_text())
    rope = rope_of(config, first_scaled_type(config, None))
    form = static_form(rope)
    original = original_length or original_length_of(config, rope)
    target = int(config.get("max_position_embeddings") or original)
    if form.rope_type == "dynamic":  # its max_position_embeddings is L; it is served beyond
        target = max(target, int(original * (form.factor or 1)))
    ids: tuple[int, ...] = ()
    if logit_tokens:
        vocab = int(config.get("vocab_size") or config.get("text_config", {}).get("vocab_size"))
        ids = tuple(int(i) for i in np.random.default_rng(seed).integers(0, vocab, size=logit_tokens))
    return make_probe(int(original), target, form.switch_lengths, ids)


def compare_folder(
    folder: Path,
    probe: Probe,
    *,
    engines: Sequence[str] = COMPARED_ENGINES,
    gguf: Path | None = None,
    source: tuple[Path, Path] | None = None,
    progress: Callable[[str], None] = lambda message: None,
    launch: Mapping[str, Launch] | None = None,
) -> tuple[EngineRow, list[EngineRow]]:
    """``(reference row, one row per engine)`` for ``folder`` (an extended model) under ``probe``.

    ``gguf``: the GGUF file llama.cpp and Ollama run (``None``: their rows give the file to write).
    ``source``: ``(unextended folder, source GGUF)``, on which the llama.cpp row measures its quantisation floor.
    ``launch``: the launch lines the rows give (default: for ``folder`` and ``gguf`` themselves; a caller that
    extended into a temporary folder gives the lines for the files the user writes).
    """
    progress("transformers (reference)")
    config = json.loads((Path(folder) / "config.json").read_text())
    try:
        reference = reference_answer(folder, probe)
    except (ValueError, TypeError, AttributeError, RuntimeError, IndexError) as error:
        arch = (config.get("architectures") or [config.get("model_type")])[0]
        first = (str(error).strip().splitlines() or [""])[0]
        why = f"{arch} ({folder}): transformers' own RoPE could not be read: {type(error).__name__}: {first}"
        raise ValueError(why) from error
    launch_line = _hf_launch(folder, config)
    ref_row = EngineRow("transformers", transformers_version(), "reference", _describe(reference), launch_line)
    conflict = key_conflict(config)
    if conflict is not None:
        ref_row = replace(ref_row, detail=f"{ref_row.detail}; {conflict}", numbers={"key_conflict": conflict})
    baseline = None
    if source is not None and gguf is not None and probe.ids and "llama.cpp" in engines:
        progress("transformers on the unextended model (llama.cpp's quantisation floor)")
        baseline = (reference_answer(source[0], probe).logits, source[1])
    case = Case(Path(folder), config, probe, reference, gguf, baseline)
    rows = []
    for name in engines:
        progress(name)
        rows.append(_row(name, case))
    if launch is not None:
        ref_row = replace(ref_row, launch=launch["transformers"].text())
        rows = [replace(row, launch=launch[row.engine].text()) for row in rows]
    return ref_row, rows


@dataclass(frozen=True)
class Verdict:
    """One engine's verdict on a folder, for tables over many folders (the conformance matrix).

    Attributes:
        engine: the engine's name.
        verdict: ``same``, ``differs``, ``cannot express`` or ``cannot run here``.
        reason: the row's detail (the largest difference, or why it differs, cannot express or cannot run).
        largest_difference: the largest table difference against transformers' rotation over all served lengths
            (``None``: no tables compared).
    """

    engine: str
    verdict: str
    reason: str
    largest_difference: float | None


def compare_engines(
    folder: Path,
    *,
    engines: Sequence[str] = COMPARED_ENGINES,
    logit_tokens: int = 0,
    original_length: int | None = None,
) -> list[Verdict]:
    """Each engine's :class:`Verdict` on ``folder`` (a transformers model folder, extended or not) under
    :func:`probe_for` its RoPE: :func:`compare_folder` without launch lines or GGUF files."""
    probe = probe_for(folder, original_length=original_length, logit_tokens=logit_tokens)
    _, rows = compare_folder(folder, probe, engines=engines)
    return [Verdict(row.engine, row.verdict, row.detail, largest_difference(row)) for row in rows]


def largest_difference(row: EngineRow) -> float | None:
    """The largest ``table_max_diff@…`` of a row's numbers (``None``: it has none)."""
    found = [float(v) for k, v in row.numbers.items() if k.startswith("table_max_diff@")]
    return max(found) if found else None


def _row(name: str, case: Case) -> EngineRow:
    module = {"MLX-LM": mlx_lm, "llama.cpp": llama_cpp, "vLLM": vllm, "SGLang": sglang, "Ollama": ollama}[name]
    try:
        return module.row(case)
    except Exception as error:  # an engine's own code failing on this model is its row, not the end of the table
        why = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        return EngineRow(module.NAME, module.version(), "cannot run here", f"the engine failed: {why}", "")


def _describe(reference: Answer) -> str:
    served = ", ".join(f"{n:,}" for n in reference.tables)
    scale = "not read" if reference.softmax_scale is None else f"{reference.softmax_scale:.6g}"
    return f"served lengths {served}; softmax scale {scale}"


def _hf_launch(folder: Path, config: dict) -> str:
    from ropekit.engines.launch import launch_lines

    return launch_lines(config, int(config.get("max_position_embeddings") or 0), folder=folder)["transformers"].text()
