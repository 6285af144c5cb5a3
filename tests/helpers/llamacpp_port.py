"""llama.cpp's RoPE arithmetic, ported line by line from the C source of llama-cpp-python 0.3.36's vendored tree.

Written from ``src/llama-model.cpp`` (``load_hparams``: scale = 1/factor), ``src/llama-context.cpp`` (``none`` forces
scale 1; ext_factor 1 for YaRN; ``yarn_attn_factor`` = g(s)/(1 + 0.1 ln s) · ``rope.scaling.attn_factor``) and
``ggml/src/ggml-cpu/ops.cpp`` / ``ggml.c`` (``ggml_rope_yarn_corr_dims``, ``rope_yarn_ramp`` in i0/2, ``rope_yarn``:
θ/ff, then the mix, mscale · (1 + 0.1 ln(1/scale)) under YaRN), independently of
``ropekit.integrations.gguf.llamacpp_rope``. The oracle of the GGUF tests that run without llama.cpp.
"""

from __future__ import annotations

import math

import numpy as np


def llamacpp_reference(form) -> tuple[np.ndarray, float]:
    """(angle of each pair at position 1, cos/sin multiplier) as llama.cpp 0.3.36 computes them, in float64.

    ``form`` has llama.cpp's fields (``n_rot``, ``freq_base``, ``scaling_type``, ``factor``, ``original_context_length``,
    ``attn_factor``, ``freq_factors``, ``beta_fast``, ``beta_slow``).
    """
    d = form.n_rot
    scaling = {"none": 0, "linear": 1, "yarn": 2}[form.scaling_type]
    freq_scale = 1.0 if scaling == 0 or form.factor == 0 else 1.0 / form.factor  # load_hparams + llama_context
    ext_factor = 1.0 if scaling == 2 else 0.0
    attn = 1.0
    if ext_factor != 0:
        factor = 1.0 / freq_scale
        attn = (1.0 if factor <= 1 else 0.1 * math.log(factor) + 1.0) / (1.0 + 0.1 * math.log(factor))
    attn *= form.attn_factor
    n_ctx_orig = form.original_context_length or 0

    def corr_dim(n_rot: float) -> float:
        return d * math.log(n_ctx_orig / (n_rot * 2 * math.pi)) / (2 * math.log(form.freq_base))

    dims = (
        (max(0.0, math.floor(corr_dim(form.beta_fast))), min(d - 1.0, math.ceil(corr_dim(form.beta_slow))))
        if ext_factor
        else (0.0, 0.0)
    )
    theta_scale = form.freq_base ** (-2.0 / d)
    angles, mscale_out = [], attn
    theta = 1.0  # position 1
    for i0 in range(0, d, 2):
        ff = form.freq_factors[i0 // 2] if form.freq_factors is not None else 1.0
        extrap = theta / ff
        interp = freq_scale * extrap
        value, mscale = interp, attn
        if ext_factor != 0:
            y = (i0 // 2 - dims[0]) / max(0.001, dims[1] - dims[0])
            mix = (1 - min(1.0, max(0.0, y))) * ext_factor
            value = interp * (1 - mix) + extrap * mix
            mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
        angles.append(value)
        mscale_out = mscale
        theta *= theta_scale
    return np.array(angles), mscale_out
