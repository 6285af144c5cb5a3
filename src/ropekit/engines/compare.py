"""Compare each engine with transformers on one model: :func:`compare` (extending it first when asked), or
:func:`compare_folder` on a folder already extended (see :mod:`ropekit.engines`)."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ropekit._costs import MAX_LOGITS
from ropekit.engines import llama_cpp, mlx_lm, ollama, sglang, vllm
from ropekit.engines.launch import Launch, key_conflict, launch_lines
from ropekit.engines.probe import Answer, Case, EngineRow, Probe, make_probe
from ropekit.engines.transformers_ref import reference_answer
from ropekit.engines.transformers_ref import version as transformers_version
from ropekit.errors import InvalidArgument

if TYPE_CHECKING:
    from ropekit.scaling.registry import ScalingConfig

#: the engines compared, in the order of the table
COMPARED_ENGINES = ("MLX-LM", "llama.cpp", "vLLM", "SGLang", "Ollama")


def engine_names(names: Sequence[str]) -> tuple[str, ...]:
    """``names`` as :data:`COMPARED_ENGINES` spells them, matched without regard to case (``vllm`` is ``vLLM``);
    a name no engine has is kept as given, for :func:`check_compare` to refuse."""
    spelled = {name.lower(): name for name in COMPARED_ENGINES}
    return tuple(spelled.get(name.strip().lower(), name.strip()) for name in names)


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
        row = module.row(case)
        in_process = module in (mlx_lm, llama_cpp) and row.version is not None  # their Python packages run here
        return replace(row, interpreter=sys.executable) if in_process and row.interpreter is None else row
    except Exception as error:  # an engine's own code failing on this model is its row, not the end of the table
        why = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        return EngineRow(module.NAME, module.version(), "cannot run here", f"the engine failed: {why}", "")


def _describe(reference: Answer) -> str:
    served = ", ".join(f"{n:,}" for n in reference.tables)
    scale = "not read" if reference.softmax_scale is None else f"{reference.softmax_scale:.6g}"
    return f"served lengths {served}; softmax scale {scale}"


def _hf_launch(folder: Path, config: dict) -> str:
    return launch_lines(config, int(config.get("max_position_embeddings") or 0), folder=folder)["transformers"].text()


@dataclass(frozen=True)
class Extension:
    """How :func:`compare` extends the model before comparing (into a temporary folder).

    Attributes:
        scaling: the scaling method's config.
        target_length: the length to serve (``None``: the method's own).
        layer_types: the layer types the scaling applies to (``None``: the model's default rule).
        flags: ``ropekit extend``'s method flags for it, for the launch lines that write the files first.
    """

    scaling: ScalingConfig
    target_length: int | None = None
    layer_types: tuple[str, ...] | None = None
    flags: str = "..."


@dataclass(frozen=True)
class Comparison:
    """:func:`compare`'s answer: the reference row, one row per engine, every launch line, and the engines run
    here whose version is not the one ropekit is checked against (``None``: all checked)."""

    reference: EngineRow
    rows: list[EngineRow]
    launch: dict[str, Launch]
    unchecked_versions: str | None

    def as_dict(self) -> dict[str, Any]:
        """The rows as JSON-ready dicts (what ``ropekit engines --json`` prints)."""
        return {
            "reference": self.reference.as_dict(),
            "engines": [row.as_dict() for row in self.rows],
            "launch": {name: line.as_dict() for name, line in self.launch.items()},
            "unchecked_versions": self.unchecked_versions,
        }


def check_compare(model: str | Path, *, engines: Sequence[str] = COMPARED_ENGINES, logits: int = 0) -> None:
    """What :func:`compare` checks before anything loads: ``logits`` within 0 to :data:`MAX_LOGITS`, ``model`` a
    transformers folder or a GGUF file, and every engine one of :data:`COMPARED_ENGINES`.

    Raises:
        InvalidArgument: about ``logits``, ``model`` or ``engines`` (its ``value``: the unknown names).
    """
    if not 0 <= logits <= MAX_LOGITS:
        raise InvalidArgument("logits", logits, f"must be between 0 and {MAX_LOGITS}")
    path = Path(model)
    if not (path.is_file() and path.suffix == ".gguf") and not (path / "config.json").is_file():
        message = f"model {str(model)!r}: give a transformers model folder (with config.json) or a .gguf file"
        raise InvalidArgument("model", str(model), message=message)
    unknown = sorted(set(engine_names(engines)) - set(COMPARED_ENGINES))
    if unknown:
        message = f"engines: unknown {unknown}; available: {', '.join(COMPARED_ENGINES)}"
        raise InvalidArgument("engines", unknown, message=message, allowed=COMPARED_ENGINES, leads=True)


def compare(
    model: str | Path,
    extension: Extension | None = None,
    *,
    original_length: int | None = None,
    engines: Sequence[str] = COMPARED_ENGINES,
    gguf: Path | None = None,
    logits: int = 0,
    progress: Callable[[str], None] = lambda message: None,
) -> Comparison:
    """Each engine against transformers on ``model``'s RoPE, after extending it with ``extension`` (when given).

    With an ``extension`` the model (a transformers folder, or a GGUF file dequantised first) is extended into a
    temporary folder, and its GGUF file written beside it unless ``gguf`` is given; the launch lines are those for
    the files ``ropekit extend`` writes. Without one, ``model`` is compared as it is (an extended folder).

    Args:
        original_length: the original (pre-extension) length (default: the model's, read from its config).
        gguf: the GGUF file llama.cpp and Ollama run.
        logits: random token ids whose logits are compared (0: none).
        progress: called with each engine's name before it runs.

    Raises:
        InvalidArgument: :func:`check_compare`'s refusals, or a GGUF ``model`` without an ``extension``.
        ValueError: transformers' own RoPE could not be read for the model.

    Example:
        >>> from ropekit.scaling import LinearScaling  # doctest: +SKIP
        >>> compare("model-folder", Extension(LinearScaling(factor=2.0)), engines=("Ollama",)).as_dict()  # doctest: +SKIP
    """
    import tempfile

    from ropekit._versions import unchecked

    check_compare(model, engines=engines, logits=logits)
    engines = engine_names(engines)
    model = Path(model)
    if extension is None and model.suffix == ".gguf":
        raise InvalidArgument("model", str(model), message="model: a .gguf file needs an extension to compare")
    if extension is not None and original_length is None:
        original_length = _original_length(model, extension.layer_types)
    with tempfile.TemporaryDirectory(prefix="ropekit-engines-") as scratch:
        source = None
        if extension is not None:
            folder, gguf, source = _extended(model, extension, Path(scratch), original_length, gguf)
            where: dict[str, Any] = {"model": model, "method": extension.flags}
        else:
            folder, where = model, {"folder": model, "gguf": gguf}
        probe = probe_for(folder, original_length=original_length, logit_tokens=logits)
        config = json.loads((folder / "config.json").read_text())
        launch = launch_lines(config, probe.target_length, **where)
        source = source if logits else None
        reference, rows = compare_folder(
            folder, probe, engines=engines, gguf=gguf, source=source, progress=progress, launch=launch
        )
    versions = unchecked({row.engine: row.version for row in (reference, *rows)})
    return Comparison(reference, rows, launch, versions)


def _original_length(model: Path, layer_types: tuple[str, ...] | None) -> int:
    """The original (pre-training) length of ``model``'s RoPE, from its config."""
    from ropekit.integrations.hf.load import load_config
    from ropekit.integrations.hf.model_config import first_scaled_type, original_length_of, rope_of

    config = load_config(model)
    return original_length_of(config, rope_of(config, first_scaled_type(config, layer_types)))


def _extended(model: Path, extension: Extension, scratch: Path, original: int | None, gguf: Path | None):
    """``(folder, gguf, source)``: ``model`` extended into ``scratch``. A GGUF model is dequantised once, into the
    unextended folder (``source`` = that folder and the GGUF file, on which the llama.cpp row measures the
    quantisation floor), which is then extended (its weights copied as they are), and the extended GGUF is written
    beside it unless ``gguf`` is given; a folder model has no ``source``."""
    from ropekit.integrations.hf.extend import extend

    spec, target, types = extension.scaling, extension.target_length, extension.layer_types
    options = {"original_length": original, "layer_types": types}
    if model.suffix != ".gguf":
        return extend(model, spec, scratch / "model", target_length=target, **options).out, gguf, None
    plain = extend(model, None, scratch / "source", **options).out
    folder = extend(plain, spec, scratch / "model", target_length=target, **options).out
    if gguf is None:
        from ropekit.integrations.gguf.write_rope import extend_gguf

        try:
            gguf = extend_gguf(model, spec, scratch / "model.gguf", target_length=target, layer_types=types).out
        except ValueError:
            gguf = None  # the llama.cpp row says why
    return folder, gguf, (plain, model)
