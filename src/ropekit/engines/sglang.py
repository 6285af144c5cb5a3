"""SGLang: its own rotary-embedding module (``get_rope``), built on CPU in the vLLM environment and run in a subprocess.

SGLang 0.5.23 installs with ``--no-deps`` into ``.venv-vllm`` beside vLLM (``make vllm-env`` adds it, with
``orjson`` and ``IPython``, which its rotary imports need); its module then builds on CPU (it warns that vLLM's
``_C`` kernels are missing, which the native path does not use). :mod:`ropekit.engines._sglang_probe` runs
``get_rope(head_size, rotary_dim, max_position, base, is_neox_style, rope_scaling, dtype)`` with the arguments vLLM's
probe gets (:func:`ropekit.engines.vllm.request_for`), except ``max_position``: the config's
``max_position_embeddings``, as SGLang's model classes pass it. Then it applies the module to the probe vectors:
SGLang's own arithmetic.

By design (``sglang/srt/layers/rotary_embedding``): ``dynamic`` is one static table for ``max_position × factor``
positions with the NTK base of that length (static NTK at the target length where ``max_position`` is L0); YaRN
reads ``attn_factor`` or ``mscale``/``mscale_all_dim``, not ``attention_factor``, and always truncates the correction
range; LongRoPE reads ``short_mscale``/``long_mscale``, not ``attention_factor``, and picks the long list for a whole
batch once a position in it exceeds L0, so a batch whose last position is exactly L0 reads position L0 past the end
of the short cache (the long cache's position 0): every LongRoPE model, whatever its lists, differs there.
The rotary module is compared (tables), not a model.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from ropekit.engines import vllm
from ropekit.engines.probe import Case, EngineRow, Probe

NAME = "SGLang"
#: the script beside this file that runs in the vLLM environment
PROBE = "_sglang_probe.py"
#: what puts SGLang into the vLLM environment (the Makefile's vllm-env step)
INSTALL = '.venv-vllm/bin/pip install orjson IPython && .venv-vllm/bin/pip install --no-deps "sglang==0.5.23"'


def version() -> str | None:
    """SGLang's version in the vLLM environment (its installed metadata), or ``None`` where it is not there."""
    return vllm.installed("sglang")


def launch(config: dict[str, Any], probe: Probe, folder: Path) -> str:
    """SGLang's launch line for the folder (:func:`ropekit.engines.launch.launch_lines`)."""
    from ropekit.engines.launch import launch_lines

    return launch_lines(config, probe.target_length, folder=folder)[NAME].text()


def row(case: Case) -> EngineRow:
    """SGLang's verdict: its rotary module, given what vLLM's is given, against transformers' tables."""
    where = launch(case.config, case.probe, case.folder)
    interpreter, source = vllm.environment()
    if interpreter is None:
        return EngineRow(NAME, None, "cannot run here", f"no vLLM environment to install SGLang into: {source}", where)
    if version() is None:
        return EngineRow(NAME, None, "cannot run here", f"sglang is not in the vLLM environment ({INSTALL})", where)
    # SGLang's model classes pass the config's max_position_embeddings (vLLM's probe: its --max-model-len)
    longest = int(case.config.get("max_position_embeddings") or case.probe.target_length)
    request = {**vllm.request_for(case), "max_position": longest}
    if "unreadable" in request:  # SGLang's module is built from the rope dict, which names no layer's
        raise ValueError(request["unreadable"])
    return vllm.table_row(sys.modules[__name__], request, case, where)
