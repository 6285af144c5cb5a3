"""llama.cpp (llama-cpp-python, the ``llamacpp`` extra): its own runtime on the GGUF file.

llama.cpp's RoPE cannot be called alone from Python, so the row compares logits: llama.cpp on the GGUF against
transformers on the folder with the same (dequantised) weights. A quantised file differs from float32 by its
arithmetic, by an amount that depends on the file and on the ids, so the row calibrates it where it can: the same
comparison on the *unextended* model (llama.cpp on the source GGUF, transformers on the source weights with plain
RoPE, the same ids) is the quantisation floor, and the extended pair is "same" while its mean |Δlogit| stays within
:data:`FLOOR_RATIO` × that floor (plus :data:`FLOOR_SLACK`) and its argmax agreement within
:data:`AGREEMENT_SLACK` of the floor's. Without a source to calibrate on, the fixed tolerance calibrated at 1× with
plain RoPE on SmolLM2 Q4_1 on text (``tests/integrations/gguf/test_llamacpp.py``: mean 0.155, max 1.66; here mean <=
0.25, max <= 3.0) applies, and the row says it is uncalibrated. Without a GGUF file the row says which file to write and
which load-time flags run the same RoPE on the original file.

By design llama.cpp fixes its RoPE when it starts: LongRoPE's two lists are chosen once by the context size
``n_ctx`` (Phi-3 files: ``rope_factors_long`` when ``n_ctx`` > L0), and dynamic NTK has no form.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import Case, EngineRow, Probe

NAME = "llama.cpp"
TOL_MEAN, TOL_MAX = 0.25, 3.0
#: the extended file's mean |Δlogit| may be this many times the unextended file's (the quantisation floor) ...
FLOOR_RATIO = 1.5
#: ... plus this much, so that a floor near zero does not call float noise a difference
FLOOR_SLACK = 0.02
#: and its argmax agreement may fall this far below the floor's, or by two standard errors of the difference of two
#: agreements measured on the same number of positions, sqrt(2 p (1 - p) / n), where that is more (one position of
#: 64 is 1.6 points: the fixed slack alone would call sampling noise a difference)
AGREEMENT_SLACK = 0.05


def version() -> str | None:
    """llama-cpp-python's version, read without loading its library (``None`` where it is not installed)."""
    from ropekit.eval.backends.llamacpp_probe import installed_version

    return installed_version()


def _launch(config: dict[str, Any], probe: Probe, gguf: Path | None) -> tuple[str, str | None]:
    """``(launch line, why not)``: how llama.cpp runs the config's RoPE (:func:`ropekit.engines.launch.launch_lines`:
    the GGUF file, flags where flags can say it, else the GGUF to write), or why it has no form."""
    from ropekit.engines.launch import launch_lines, llamacpp_form

    why_not = llamacpp_form(config)[2]
    return launch_lines(config, probe.target_length, gguf=gguf)[NAME].text(), why_not


def gaps(theirs: np.ndarray, ours: np.ndarray) -> dict[str, float]:
    """Mean and max |Δlogit| and the argmax agreement of two ``(positions, vocab)`` logit arrays."""
    gap = np.abs(theirs - ours)
    agree = float((theirs.argmax(-1) == ours.argmax(-1)).mean())
    numbers = {"logits_mean_diff": float(gap.mean()), "logits_max_diff": float(gap.max()), "argmax_agreement": agree}
    return {**numbers, "positions": int(gap.shape[0])}


def judge_logits(numbers: dict[str, float], floor: dict[str, float] | None) -> tuple[bool, str]:
    """``(same, detail)`` for the extended pair's ``numbers`` against the unextended pair's ``floor`` (``None``:
    the fixed tolerance, said to be uncalibrated)."""
    mean, top, agree = numbers["logits_mean_diff"], numbers["logits_max_diff"], numbers["argmax_agreement"]
    detail = f"logits mean diff {mean:.3g}, max {top:.3g}, argmax agrees at {100 * agree:.0f}%"
    if floor is None:
        same = mean <= TOL_MEAN and top <= TOL_MAX
        return same, f"{detail} (quantised file; fixed tolerance, uncalibrated: no source GGUF to compare)"
    limit = FLOOR_RATIO * floor["logits_mean_diff"] + FLOOR_SLACK
    same = mean <= limit and agree >= floor["argmax_agreement"] - agreement_slack(floor)
    return same, (
        f"{detail}; the unextended file on the same ids (quantisation floor): mean {floor['logits_mean_diff']:.3g}, "
        f"argmax {100 * floor['argmax_agreement']:.0f}% (same within {FLOOR_RATIO:g}x + {FLOOR_SLACK:g})"
    )


def agreement_slack(floor: dict[str, float]) -> float:
    """How far the argmax agreement may fall below the ``floor``'s (:data:`AGREEMENT_SLACK`)."""
    p, n = floor["argmax_agreement"], floor.get("positions")
    sampling = 2 * math.sqrt(2 * p * (1 - p) / n) if n else 0.0
    return max(AGREEMENT_SLACK, sampling)


def row(case: Case) -> EngineRow:
    """llama.cpp's verdict: logits on ``case.gguf`` (the extended file) against transformers' on the folder, judged
    against the quantisation floor of ``case.baseline`` where given."""
    probe, reference, gguf, baseline = case.probe, case.reference, case.gguf, case.baseline
    found = version()
    launch, why_not = _launch(case.config, probe, gguf)
    if why_not is not None:
        verdict = "differs" if "n_ctx" in why_not else "cannot express"
        return EngineRow(NAME, found, verdict, why_not, launch)
    if found is None:
        return EngineRow(NAME, None, "cannot run here", "llama-cpp-python is not installed (ropekit[llamacpp])", launch)
    if gguf is None or reference.logits is None:
        return EngineRow(NAME, found, "cannot run here", "no GGUF file of this model given (--gguf)", launch)
    from ropekit.eval.backends.llamacpp_probe import probe as probe_file

    why = probe_file(gguf)
    if why is not None:
        return EngineRow(NAME, found, "cannot run here", why, launch)
    theirs = logits(gguf, list(probe.ids))
    numbers = gaps(theirs, reference.logits)
    floor = None if baseline is None else gaps(logits(baseline[1], list(probe.ids)), baseline[0])
    if floor is not None:
        numbers["floor"] = floor
    same, detail = judge_logits(numbers, floor)
    if same:
        return EngineRow(NAME, found, "same", detail, launch, numbers)
    gap = np.abs(theirs - reference.logits).max(-1)
    first = int(np.flatnonzero(gap > TOL_MAX)[0]) if (gap > TOL_MAX).any() else 0
    return EngineRow(NAME, found, "differs", f"{detail}, from position {first}", launch, numbers)


def logits(path: Path, ids: list[int]) -> np.ndarray:
    """llama.cpp's logits (float64, ``(len(ids), vocab)``) on ``ids``, 512 at a time, n_ctx = ``len(ids)``, once a
    child process has run the file (:func:`ropekit.eval.backends.llamacpp_probe.require_llama_cpp`)."""
    from ropekit.eval.backends.llamacpp_probe import require_llama_cpp

    llama_cpp = require_llama_cpp(path)

    llm = llama_cpp.Llama(str(path), n_ctx=len(ids), n_batch=512, n_ubatch=512, n_threads=1, verbose=False)
    vocab, rows = llm.n_vocab(), []
    for start in range(0, len(ids), 512):
        chunk = ids[start : start + 512]
        llm._batch.set_batch(batch=chunk, n_past=start, logits_all=True)  # every position's logits (0.3.36)
        llm._ctx.decode(llm._batch)
        rows.append(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(chunk), vocab)).astype(np.float64))
    del llm
    return np.concatenate(rows)
