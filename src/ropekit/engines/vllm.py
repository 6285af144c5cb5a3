"""vLLM: its own rotary-embedding module (``get_rope``), built on CPU in its own environment and run in a subprocess
that serves every request of a run.

vLLM's pins fight ropekit's, so it lives in a separate virtual environment (``make vllm-env``:
``.venv-vllm``, vLLM installed with ``--no-deps`` beside the same torch, plus the small packages its rotary imports
need). :mod:`ropekit.engines._vllm_probe` runs there: ``get_rope(head_size, max_position, is_neox_style,
rope_parameters, dtype)`` under ``set_current_vllm_config(VllmConfig(device_config=DeviceConfig(device="cpu")))``,
then ``forward_native(positions, q, k)`` on the probe vectors: vLLM's own arithmetic (``cos_sin_cache``, ``mscale``).

The module is built as the architecture's model class builds it: the probe finds vLLM's model file for the
architecture in its registry and reads what that file passes to ``get_rope`` (``is_neox_style``, the scaling or
none, ``dual_chunk_attention_config``: :mod:`ropekit.engines.source_reader`); an architecture vLLM serves through its
Transformers backend runs transformers' own RoPE code. By design vLLM builds one static table for
``--max-model-len``: LongRoPE's list is chosen by it (long when it exceeds L0, at every position), and its LongRoPE
reads ``short_mscale``/``long_mscale``, not ``attention_factor``, and refuses pairs other than NeoX's. Its
``dynamic`` keeps the base (``max_trained_positions`` defaults to ``max_position``): plain RoPE. Where a model class
passes ``dual_chunk_attention_config`` and the config has one, it builds ``DualChunkRotaryEmbedding`` from the base
alone. The rotary module is compared (tables), not a model.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from ropekit.engines.probe import Answer, Case, EngineRow, Probe, judge, positions_below

NAME = "vLLM"
#: the script beside this file that runs in the vLLM environment
PROBE = "_vllm_probe.py"
#: the vLLM environment ``make vllm-env`` makes, beside ropekit's own source checkout
ENVIRONMENT = ".venv-vllm"
#: the variable that names the vLLM environment's interpreter (an absolute path)
VARIABLE = "ROPEKIT_VLLM_PYTHON"


def python() -> Path | None:
    """The vLLM environment's interpreter, if there is one (:func:`environment`)."""
    return environment()[0]


def environment() -> tuple[Path | None, str]:
    """``(interpreter, where it came from)``: ``ROPEKIT_VLLM_PYTHON`` where set (an absolute path to a file), else
    ``.venv-vllm/bin/python`` beside ropekit's own source checkout, complete once ``make setup`` wrote
    ``.venv-vllm/.ready`` beside it. Never a path found through the working directory: that may be a model folder
    someone else wrote, and its interpreter would run with the user's rights. Without one, the interpreter is
    ``None`` and the text says why."""
    given = os.environ.get(VARIABLE)
    if given:
        path = Path(given).expanduser()
        if not path.is_absolute():
            return None, f"{VARIABLE}={given!r} is not an absolute path (a relative one would follow the folder)"
        return (path, f"{VARIABLE}") if path.is_file() else (None, f"{VARIABLE}={given!r} is not a file")
    root = checkout()
    if root is None:
        return None, f"ropekit is not run from its source checkout: set {VARIABLE} to the vLLM environment's python"
    path = root / ENVIRONMENT / "bin" / "python"
    if not (path.is_file() and (root / ENVIRONMENT / ".ready").is_file()):
        return None, f"no complete {root / ENVIRONMENT} (make vllm-env, or set {VARIABLE})"
    return path, f"ropekit's checkout ({root})"


def checkout() -> Path | None:
    """The root of the source checkout this ropekit is imported from (``src/ropekit`` under a ``pyproject.toml``),
    or ``None`` for an installed copy."""
    root = Path(__file__).resolve().parents[3]
    return root if (root / "pyproject.toml").is_file() and (root / "src" / "ropekit").is_dir() else None


def launch(config: dict[str, Any], probe: Probe, folder: Path) -> str:
    """vLLM's launch line for the folder (:func:`ropekit.engines.launch.launch_lines`)."""
    from ropekit.engines.launch import launch_lines

    return launch_lines(config, probe.target_length, folder=folder)[NAME].text()


def version() -> str | None:
    """vLLM's version in its environment (from its installed metadata), or ``None`` without one."""
    return installed("vllm") or ("unknown" if python() is not None else None)


def installed(package: str) -> str | None:
    """``package``'s version in the vLLM environment (from its installed metadata), or ``None`` where it has no
    such package or there is no environment."""
    interpreter = python()
    if interpreter is None:
        return None
    found = sorted(interpreter.parent.parent.glob(f"lib/python*/site-packages/{package}-*.dist-info"))
    return found[-1].name.removeprefix(f"{package}-").removesuffix(".dist-info") if found else None


def model_rope(config: dict[str, Any], rope: dict[str, Any], head_size: int) -> dict[str, Any]:
    """``{"head_size", "rope_parameters", "is_neox_style"}``: what vLLM 0.33's model class passes to ``get_rope``
    for ``rope`` (transformers' rope dict of the compared layer), where the class rewrites it:

    * DeepSeek's latent attention (:data:`~ropekit.engines.rules.DEEPSEEK_MLA`: DeepSeek-V2/V3's ``deepseek_v2.py``,
      DeepSeek-V3.2's and GLM-MoE-DSA's ``deepseek_v32``, GLM-4-MoE-Lite's, which builds ``deepseek_v2.py``'s): the
      rope part of the head
      (``qk_rope_head_dim``), pairs (2i, 2i + 1) whatever ``rope_interleave`` says, and a scaled ``rope_type``
      becomes ``deepseek_llama_scaling`` when ``attention_factor`` is 1.0, else ``deepseek_yarn`` (whose attention
      factor is the mscale ratio: it reads no ``attention_factor``);
    * gpt-oss (``gpt_oss.py``): only ``rope_theta``, ``factor``, ``original_max_position_embeddings``, the betas and
      ``truncate`` (``rope_type`` yarn).
    """
    from ropekit.engines.rules import DEEPSEEK_MLA

    kind = config.get("model_type")
    if kind in DEEPSEEK_MLA:
        passed = dict(rope)
        if rope.get("rope_type", "default") != "default":
            passed["rope_type"] = "deepseek_llama_scaling" if rope.get("attention_factor") == 1.0 else "deepseek_yarn"
        rotary = int(config.get("qk_rope_head_dim") or head_size)
        return {"head_size": rotary, "rope_parameters": passed, "is_neox_style": False, "class_rule": "ropekit"}
    if kind == "gpt_oss":
        kept = ("rope_theta", "factor", "original_max_position_embeddings", "beta_fast", "beta_slow")
        passed = {"rope_type": "yarn", **{key: rope[key] for key in kept}, "truncate": rope.get("truncate", True)}
        return {"head_size": head_size, "rope_parameters": passed, "is_neox_style": True, "class_rule": "ropekit"}
    return {"head_size": head_size, "rope_parameters": rope, "is_neox_style": True}


def row(case: Case) -> EngineRow:
    """vLLM's verdict: its rotary module, built as its model class builds it from transformers' reading of the
    folder (:func:`~ropekit.engines.transformers_ref.rope_parameters`), against transformers' tables."""
    interpreter, source = environment()
    where = launch(case.config, case.probe, case.folder)
    if interpreter is None:
        return EngineRow(NAME, None, "cannot run here", f"no vLLM environment: {source}", where)
    return table_row(sys.modules[__name__], request_for(case), case, where)


def table_row(engine: ModuleType, request: dict[str, Any], case: Case, where: str) -> EngineRow:
    """The verdict of an engine whose rotary module runs in the vLLM environment (vLLM's, SGLang's): its
    ``PROBE`` script beside this file answers ``request`` (as :func:`request_for` makes it) in a process that serves
    every request of the run (:mod:`ropekit.engines.probe_worker`); ``engine`` gives ``NAME`` and ``version()``, and
    its hand-kept facts are its rows of :data:`ropekit.engines.rules.RULES`."""
    from dataclasses import replace

    from ropekit.engines.probe_worker import ask

    interpreter = python()
    reply = ask(interpreter, Path(__file__).with_name(engine.PROBE), request)
    if reply.late:
        why = f"{engine.NAME}'s probe process: {reply.error}"
        row = EngineRow(engine.NAME, engine.version(), "cannot run here", why, where)
    elif reply.data is None:
        row = failed_row(engine, reply.error or "no output", where, request, reply.error_type)
    else:
        row = row_from_reply(engine, reply.data, case, where)
    return replace(row, interpreter=str(interpreter))


def request_for(case: Case) -> dict[str, Any]:
    """What :mod:`ropekit.engines._vllm_probe` reads: the folder as the launch line serves it (its ``--hf-overrides``
    and ``--max-model-len``), the compared layer, the positions per length, and for the source reading, the
    rotary module's arguments as :func:`model_rope` makes them (``unreadable``: why there are none)."""
    from ropekit.engines.launch import overrides
    from ropekit.engines.transformers_ref import compared_layer, rope_parameters

    config, probe = case.config, case.probe
    half = int(next(iter(case.reference.tables.values())).shape[1])
    head = int(config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"])
    architectures = config.get("architectures") or [""]
    try:
        read: dict[str, Any] = model_rope(config, rope_parameters(case.folder, case.reference.rope_key), head)
    except ValueError as error:  # a rope dict keyed by other names than layer types: the built class chooses
        read = {"unreadable": str(error)}
    return {
        **read,
        "folder": str(case.folder),
        "hf_overrides": overrides(config),
        "max_model_len": probe.target_length,
        "layer": compared_layer(case.folder)[0],
        "architecture": architectures[0],
        "rotary_dim": 2 * half,
        "max_position": probe.target_length,
        "interleaved": case.reference.interleaved,
        "dual_chunk_attention_config": config.get("dual_chunk_attention_config"),
        "config": {key: value for key, value in config.items() if isinstance(value, (bool, int, float, str))},
        "served": {str(n): positions_below(probe, n).tolist() for n in probe.served_lengths},
    }


#: the exceptions by which an engine's classes refuse a configuration ("cannot express"); any other is "cannot run"
REFUSALS = ("ValueError", "NotImplementedError")


def failed_row(
    engine: ModuleType, last: str, where: str, request: dict[str, Any], error_type: str | None = None
) -> EngineRow:
    """The row of an engine's probe that failed, from the exception it caught (``error_type``) or, where the process
    died, the exception named at the start of the last line it wrote (the engine's own traceback): one of
    :data:`REFUSALS` is its classes refusing the configuration, "cannot express"."""
    import re

    named = error_type or (re.match(r"\s*([A-Za-z_][\w.]*)(?=:)", last) or [None, None])[1]
    verdict = "cannot express" if (named or "").rpartition(".")[2] in REFUSALS else "cannot run here"
    arch = request.get("architecture") or "this architecture"
    return EngineRow(engine.NAME, engine.version(), verdict, f"{engine.NAME}'s {arch} class refuses it: {last}", where)


def row_from_reply(engine: ModuleType, reply: dict[str, Any], case: Case, where: str) -> EngineRow:
    """An engine's verdict from its probe's reply (its tables against the reference's; what its model class drops
    from the configuration: :func:`ropekit.engines.model_class.class_verdict`). Every row says where its module
    came from (``numbers["source"]`` and a word in its detail): the engine's model class built and recorded
    ("built class"), or its model file read as source ("read from source", where the class does not build here)."""
    from ropekit.engines.model_class import backend_row, class_verdict, pairing_reason

    if reply.get("backend") == "transformers":
        return backend_row(engine.NAME, reply["version"], case.config, where)
    source = reply.get("source") or "read from source"
    base = {"model_file": reply.get("model_file"), "source": source, "build_error": reply.get("build_error")}
    if "refused" in reply:
        line = f" (get_rope at line {reply['line']})" if reply.get("line") and not reply.get("class_rule") else ""
        why = f"{engine.NAME}'s {reply['model_file']}{line} refuses it ({source}): {reply['refused']}"
        return EngineRow(engine.NAME, reply["version"], "cannot express", why, where, base)
    from ropekit.engines.rules import Context, reasons

    params = compared_params(case)
    context = Context(params, case.config, interleaved=case.reference.interleaved, target=case.probe.target_length)
    rewrites = reasons(engine.NAME, "rewrite", reply.get("version"), context)
    dropped = class_verdict(engine.NAME, reply, params, case.config) + rewrites
    if "failed" in reply:
        verdict = "cannot express" if dropped else "cannot run here"
        failing = f"not measured here: {reply.get('model_file')}'s module fails on CPU ({source}): {reply['failed']}"
        return EngineRow(engine.NAME, reply["version"], verdict, "; ".join([*dropped, failing]), where, base)
    theirs = Answer(tables={int(n): np.asarray(t, dtype=np.float64) for n, t in reply["tables"].items()})
    rotated = {**reply, "neox": reply.get("neox_found", reply.get("neox"))}  # the pairs it rotates, measured
    wrong = serves_wrong(engine.NAME, reply)
    pairing = wrong or pairing_reason(engine.NAME, rotated, case.reference.interleaved)
    dropped += past_table(engine.NAME, reply, case.probe)
    known = dropped + pairing + reasons(engine.NAME, "behaviour", reply.get("version"), context)
    verdict, detail, numbers = judge(case.reference, theirs, case.probe, known=known)
    kept = ("mscale", "neox", "neox_found", "scaling", "class", "model_class", "permutes_qk", "recorded", "stubbed")
    numbers.update(base | {key: reply.get(key) for key in kept if key in reply})
    detail = f"{detail} (rotary module of {reply.get('model_file')}, {source}{_origin_note(reply)})"
    if dropped:
        verdict, detail = "cannot express", f"{'; '.join(dropped)}; measured: {detail}"
    return EngineRow(engine.NAME, reply["version"], verdict, detail, where, numbers)


def compared_params(case: Case) -> dict[str, Any]:
    """transformers' rope dict of the compared layer (:func:`~ropekit.engines.transformers_ref.rope_parameters`);
    ``{}`` where the dict is keyed by other names than layer types (DeepSeek-V4's ``main``/``compress``: the model
    class chooses, and a built class is measured as it chose)."""
    from ropekit.engines.transformers_ref import rope_parameters

    try:
        return rope_parameters(case.folder, case.reference.rope_key)
    except ValueError:
        return {}


def past_table(engine: str, reply: dict[str, Any], probe: Probe) -> list[str]:
    """Where the built module's cos/sin table holds fewer positions than the served lengths reach (a class that
    passes the config's ``max_position_embeddings``, L0 for a dynamic folder, to a class that tables that many)."""
    if not reply.get("past_table"):
        return []
    rows, lengths = reply["past_table"]
    return [
        f"{engine}'s {reply.get('class')} (built by {reply.get('model_file')}) tables {rows:,} positions and is "
        f"served {probe.target_length:,}: at served lengths {', '.join(f'{n:,}' for n in lengths)} positions past "
        "its table index out of it (measured below that)"
    ]


def serves_wrong(engine: str, reply: dict[str, Any]) -> list[str]:
    """Where the built module rotates other pairs than its ``is_neox_style`` says (a model class that sets it after
    building, on a class whose forward does not read it): the engine serves the model wrong."""
    claimed, found = reply.get("neox"), reply.get("neox_found")
    if claimed is None or found is None or claimed == found:
        return []
    pairs = "(i, i + d/2)" if found else "(2i, 2i + 1)"
    return [
        f"{engine}'s {reply.get('class')} rotates pairs {pairs} though its is_neox_style is {claimed} (set on the "
        f"built module by {reply.get('model_file')}; the class's forward does not read it): {engine} serves this wrong"
    ]


def _origin_note(reply: dict[str, Any]) -> str:
    """What the detail adds to where the module came from: a q/k permutation at load, why it was read from source."""
    notes = []
    if reply.get("permutes_qk"):
        notes.append("q/k weights permuted to NeoX order at load, compared in that order")
    if reply.get("build_error"):
        notes.append(f"the class does not build here: {str(reply['build_error'])[:160]}")
    return "".join(f"; {note}" for note in notes)
