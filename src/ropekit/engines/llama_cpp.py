"""llama.cpp (llama-cpp-python, the ``llamacpp`` extra): its own runtime on the GGUF file.

llama.cpp's RoPE cannot be called alone from Python, so the row compares logits: llama.cpp on the GGUF against
transformers on the folder with the same weights. A quantised file differs from float32 by its arithmetic; the
tolerance is the one calibrated at 1× with plain RoPE on SmolLM2 Q4_1 (``tests/integrations/test_llamacpp.py``:
mean |Δlogit| 0.155, max 1.66; here mean <= 0.25 and max <= 3.0). Without a GGUF file the row says which file to
write and which load-time flags run the same RoPE on the original file.

By design llama.cpp fixes its RoPE when it starts: LongRoPE's two lists are chosen once by the context size
``n_ctx`` (Phi-3 files: ``rope_factors_long`` when ``n_ctx`` > L0), and dynamic NTK has no form.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ropekit.engines.probe import Answer, EngineRow, Probe

NAME = "llama.cpp"
TOL_MEAN, TOL_MAX = 0.25, 3.0


def version() -> str | None:
    try:
        import llama_cpp
    except ImportError:
        return None
    return llama_cpp.__version__


def _launch(config: dict[str, Any], probe: Probe) -> tuple[str, str | None]:
    """``(launch line, why not)``: how llama.cpp runs the config's RoPE (flags where flags can say it, else the
    GGUF to write), or why it has no form."""
    from ropekit.integrations.gguf_rope import llamacpp_flags, to_llamacpp
    from ropekit.integrations.hf_config import first_scaled_type, rope_of

    rope = rope_of(config, first_scaled_type(config, None))
    try:
        to_llamacpp(rope, rope_freqs=True, betas=False)
    except ValueError as error:
        return "no llama.cpp form", str(error)
    gguf = f"ropekit extend --model MODEL.gguf ... --out OUT.gguf; llama-server -m OUT.gguf -c {probe.target_length}"
    try:
        flags = " ".join(llamacpp_flags(to_llamacpp(rope, rope_freqs=False, betas=True)))
    except ValueError:
        return gguf, None
    return f"llama-server -m MODEL.gguf -c {probe.target_length} {flags}   (or {gguf})", None


def row(folder: Path, config: dict[str, Any], probe: Probe, reference: Answer, *, gguf: Path | None) -> EngineRow:
    """llama.cpp's verdict: logits on ``gguf`` (the extended file) against transformers' on the folder."""
    found = version()
    launch, why_not = _launch(config, probe)
    if why_not is not None:
        verdict = "differs" if "n_ctx" in why_not else "cannot express"
        return EngineRow(NAME, found, verdict, why_not, launch)
    if found is None:
        return EngineRow(NAME, None, "cannot run here", "llama-cpp-python is not installed (ropekit[llamacpp])", launch)
    if gguf is None or reference.logits is None:
        return EngineRow(NAME, found, "cannot run here", "no GGUF file of this model given (--gguf)", launch)
    theirs = logits(gguf, list(probe.ids))
    gap = np.abs(theirs - reference.logits)
    agree = float((theirs.argmax(-1) == reference.logits.argmax(-1)).mean())
    numbers = {"logits_mean_diff": float(gap.mean()), "logits_max_diff": float(gap.max()), "argmax_agreement": agree}
    detail = (
        f"logits mean diff {gap.mean():.3g}, max {gap.max():.3g} (quantised file), argmax agrees at {100 * agree:.0f}%"
    )
    if gap.mean() <= TOL_MEAN and gap.max() <= TOL_MAX:
        return EngineRow(NAME, found, "same", detail, launch, numbers)
    first = int(np.flatnonzero(gap.max(-1) > TOL_MAX)[0]) if (gap.max(-1) > TOL_MAX).any() else 0
    return EngineRow(NAME, found, "differs", f"{detail}, from position {first}", launch, numbers)


def logits(path: Path, ids: list[int]) -> np.ndarray:
    """llama.cpp's logits (float64, ``(len(ids), vocab)``) on ``ids``, 512 at a time, n_ctx = ``len(ids)``."""
    import llama_cpp

    llm = llama_cpp.Llama(str(path), n_ctx=len(ids), n_batch=512, n_ubatch=512, n_threads=1, verbose=False)
    vocab, rows = llm.n_vocab(), []
    for start in range(0, len(ids), 512):
        chunk = ids[start : start + 512]
        llm._batch.set_batch(batch=chunk, n_past=start, logits_all=True)  # every position's logits (0.3.36)
        llm._ctx.decode(llm._batch)
        rows.append(np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(len(chunk), vocab)).astype(np.float64))
    del llm
    return np.concatenate(rows)
