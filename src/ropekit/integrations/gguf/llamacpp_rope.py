"""llama.cpp's RoPE (what a GGUF file's metadata and llama.cpp's runtime flags mean) against ropekit's scaling.

llama.cpp (the tree vendored by the llama-cpp-python version in :data:`ropekit._versions.CHECKED`: ``src/llama-model.cpp`` ``load_hparams``,
``src/llama-context.cpp``, ``ggml/src/ggml-cpu/ops.cpp`` ``rope_yarn``) rotates pair i of the ``n_rot = d`` rotating
dims with, for θ_i = b^(−2i/d) (b = ``rope.freq_base``), s = ``rope.scaling.factor`` (its ``freq_scale`` is 1/s;
``none`` forces s = 1) and ff_i the ``rope_freqs`` tensor (1 without it; llama.cpp *divides* by it)::

    x_i  = θ_i / ff_i
    θ'_i = (x_i / s)·(1 − e_i) + x_i·e_i          e_i = 0 unless YaRN (ext_factor = 1 for scaling type yarn)
    e_i  = 1 − clamp((i − lo) / max(0.001, hi − lo), 0, 1)
    lo   = max(0, floor(c(beta_fast))),  hi = min(d − 1, ceil(c(beta_slow))),  c(r) = d·ln(L0/(2πr)) / (2 ln b)
    A    = rope.scaling.attn_factor · (1 + 0.1 ln s  under YaRN, else 1)

with L0 = ``rope.scaling.original_context_length`` (default ``context_length``). For the Llama architecture
``rope.scaling.yarn_beta_fast``/``_slow`` are *not read* (only Grok and Mistral 3 read them): the betas are 32 and 1
unless set at load time. This is YaRN exactly as transformers computes it (its ramp in the pair index), so a ropekit
scaling maps onto these fields when it is one of them, and onto per-pair factors (``rope_freqs``) otherwise.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ropekit.scaling.registry import Frequencies, frequencies, inv_freq
from ropekit.scaling.static_form import static_form

if TYPE_CHECKING:
    from ropekit.config import RopeConfig

#: GGUF architectures whose llama.cpp graph multiplies the ``rope_freqs`` tensor into RoPE (llama.cpp as vendored by the checked llama-cpp-python,
#: ``src/models/*.cpp`` creating ``LLM_TENSOR_ROPE_FREQS``); only ``llama`` is checked against llama.cpp here.
ROPE_FREQS_ARCHITECTURES = (
    "llama",
    "deci",
    "granite",
    "granitemoe",
    "exaone",
    "exaone4",
    "mistral3",
    "arcee",
    "apertus",
    "minicpm",
    "llama4",
)
#: the YaRN betas llama.cpp uses when the file cannot carry others (the Llama architecture reads none)
DEFAULT_BETAS = (32.0, 1.0)
#: relative agreement required between ropekit's float64 frequencies and llama.cpp's reading of the fields (the file
#: stores float32: one float32 rounding of the base or of a factor moves a frequency by ~1e-7)
_AGREE_RTOL = 1e-6


@dataclass(frozen=True)
class LlamaCppRope:
    """One RoPE as llama.cpp describes it (GGUF metadata, the ``rope_freqs`` tensor, or load-time flags).

    Attributes:
        n_rot: rotating dims d (``rope.dimension_count``).
        freq_base: b (``rope.freq_base``).
        scaling_type: ``none``, ``linear`` or ``yarn`` (``rope.scaling.type``).
        factor: s (``rope.scaling.factor``); 1 for ``none``.
        original_context_length: L0 for YaRN (``rope.scaling.original_context_length``), else ``None``.
        attn_factor: ``rope.scaling.attn_factor`` (multiplies cos and sin on top of YaRN's own factor).
        freq_factors: the ``rope_freqs`` tensor (d/2 divisors of θ_i), or ``None``.
        beta_fast, beta_slow: YaRN's betas (load-time flags; the Llama architecture's file cannot set them).
    """

    n_rot: int
    freq_base: float
    scaling_type: str = "none"
    factor: float = 1.0
    original_context_length: int | None = None
    attn_factor: float = 1.0
    freq_factors: tuple[float, ...] | None = None
    beta_fast: float = DEFAULT_BETAS[0]
    beta_slow: float = DEFAULT_BETAS[1]


def llamacpp_frequencies(rope: LlamaCppRope) -> Frequencies:
    """The frequencies and attention factor llama.cpp computes for ``rope``, in float64 (see the module docstring).

    Returns:
        :class:`~ropekit.scaling.registry.Frequencies` with ``inv_freq`` of shape ``(n_rot // 2,)``.
    """
    d = rope.n_rot
    x = inv_freq(d, rope.freq_base)
    if rope.freq_factors is not None:
        x = x / np.asarray(rope.freq_factors, dtype=np.float64)
    s = 1.0 if rope.scaling_type == "none" else float(rope.factor)
    if rope.scaling_type != "yarn":
        return Frequencies(x / s, float(rope.attn_factor))
    length = float(rope.original_context_length)

    def corr(rotations: float) -> float:
        return d * math.log(length / (rotations * 2 * math.pi)) / (2 * math.log(rope.freq_base))

    low, high = max(0.0, math.floor(corr(rope.beta_fast))), min(d - 1.0, math.ceil(corr(rope.beta_slow)))
    keep = 1 - np.clip((np.arange(d // 2) - low) / max(0.001, high - low), 0, 1)
    attention = rope.attn_factor * (1 + 0.1 * math.log(s) if s > 1 else 1.0)
    return Frequencies(x / s * (1 - keep) + x * keep, attention)


def to_llamacpp(rope: RopeConfig, *, rope_freqs: bool, betas: bool) -> LlamaCppRope:
    """The llama.cpp form of ``rope`` (its base, rotary dim and scaling), or a ``ValueError`` saying why there is none.

    Translates :func:`~ropekit.scaling.static_form.static_form`: the names llama.cpp shares with transformers first
    (``linear``, ``yarn``), then the static form (``none`` with a new base, or per-pair factors through ``rope_freqs``
    (Llama 3, LongRoPE with one factor list or frozen, YaRN with the paper's ramp or its own betas, user factors). The
    result is checked: llama.cpp's frequencies (:func:`llamacpp_frequencies`) must equal ropekit's to 1e-6.

    Args:
        rope: the model's base RoPE with the scaling to express.
        rope_freqs: whether the target reads per-pair factors (a GGUF file of an architecture in
            :data:`ROPE_FREQS_ARCHITECTURES`); load-time flags cannot set them.
        betas: whether the target can set YaRN's betas (load-time flags can; the Llama architecture's file cannot).

    Raises:
        ValueError: the method cannot be expressed exactly (the message says why and what to do instead).
    """
    form = static_form(rope)
    d, base = rope.dim, float(rope.base)
    if form.follows_length is not None:
        raise ValueError(
            f"{form.rope_type} cannot be expressed in llama.cpp: {form.follows_length}, while llama.cpp fixes its "
            "RoPE when it starts (a file with two LongRoPE lists would switch by the context size it was started "
            "with, n_ctx); freeze it with fixed_seq_len=N"
        )
    spec = rope.scaling
    if form.named and form.rope_type == "linear":
        return _checked(rope, LlamaCppRope(d, base, "linear", float(form.factor)))
    if form.named and form.rope_type == "yarn":
        hf = spec.hf_params()
        given = (float(hf["beta_fast"]), float(hf["beta_slow"]))
        if hf["truncate"] and (betas or given == DEFAULT_BETAS):
            s, attention = float(form.factor), form.attention_factor
            plain = 1 + 0.1 * math.log(s) if s > 1 else 1.0
            yarn = LlamaCppRope(d, base, "yarn", s, form.original_length, attention / plain, None, *given)
            return _checked(rope, yarn)
    if form.new_base is not None:
        return _checked(rope, LlamaCppRope(d, form.new_base))
    if form.factors is None:
        raise ValueError(
            f"{form.unexpressible} (or more pairs than the rotary dims): no llama.cpp divisor can express it (it "
            "would be infinite)"
        )
    if not rope_freqs:
        raise ValueError(
            f"{form.rope_type} needs per-pair frequency factors (llama.cpp's rope_freqs tensor), which no load-time "
            f"flag sets and only GGUF files of these architectures carry: {', '.join(ROPE_FREQS_ARCHITECTURES)} "
            "(write one with `ropekit extend --out NAME.gguf`)"
        )
    return _checked(rope, LlamaCppRope(d, base, attn_factor=form.attention_factor, freq_factors=form.factors))


def _checked(rope: RopeConfig, form: LlamaCppRope) -> LlamaCppRope:
    """``form`` if llama.cpp's frequencies for it equal ropekit's for ``rope``; else the ``ValueError`` saying so."""
    spec = rope.scaling
    ours = frequencies(rope, seq_len=None if spec is None else spec.frozen_length())
    theirs = llamacpp_frequencies(form)
    expected = np.asarray(ours.inv_freq, dtype=np.float64)
    error = float(np.max(np.abs(theirs.inv_freq - expected) / expected))
    attention_error = abs(theirs.attention_factor - ours.attention_factor) / ours.attention_factor
    if error > _AGREE_RTOL or attention_error > _AGREE_RTOL:
        name = spec.rope_type if spec is not None else "plain RoPE"
        raise ValueError(
            f"llama.cpp would compute a different RoPE for {name} (frequencies off by {error:.2g}, attention factor "
            f"by {attention_error:.2g} relative)"
        )
    return form


def llamacpp_options(rope: LlamaCppRope) -> dict[str, float | int]:
    """Keyword arguments of ``llama_cpp.Llama`` that make llama.cpp run ``rope`` on a file without RoPE scaling.

    The file must carry no ``rope_freqs`` tensor and no ``rope.scaling.attn_factor``: flags cannot remove them.

    Raises:
        ValueError: ``rope`` needs per-pair factors, or an attention factor YaRN's flags cannot set (llama.cpp
            recomputes ``yarn_attn_factor`` itself when YaRN is on).
    """
    if rope.freq_factors is not None:
        raise ValueError(
            "per-pair frequency factors (rope_freqs) cannot be set by llama.cpp flags: write a GGUF file with "
            "`ropekit extend --model in.gguf --out out.gguf` instead"
        )
    if rope.scaling_type == "yarn" and abs(rope.attn_factor - 1) > _AGREE_RTOL:
        raise ValueError(
            "a YaRN attention factor other than 0.1·ln s + 1 cannot be set by llama.cpp flags (llama.cpp overwrites "
            "--yarn-attn-factor under YaRN): write a GGUF file with `ropekit extend --out out.gguf` instead"
        )
    scaling_types = {"none": 0, "linear": 1, "yarn": 2}  # enum llama_rope_scaling_type
    options: dict[str, float | int] = {
        "rope_scaling_type": scaling_types[rope.scaling_type],
        "rope_freq_base": float(rope.freq_base),
    }
    if rope.scaling_type != "none":
        options["rope_freq_scale"] = 1.0 / float(rope.factor)
    if rope.scaling_type == "yarn":
        options |= {
            "yarn_orig_ctx": int(rope.original_context_length),
            "yarn_ext_factor": 1.0,
            "yarn_beta_fast": float(rope.beta_fast),
            "yarn_beta_slow": float(rope.beta_slow),
        }
    elif rope.attn_factor != 1.0:
        options["yarn_attn_factor"] = float(rope.attn_factor)
    return options


#: llama.cpp's command-line flag for each ``llama_cpp.Llama`` option (``common/arg.cpp``)
_FLAGS = {
    "rope_scaling_type": "--rope-scaling",
    "rope_freq_base": "--rope-freq-base",
    "rope_freq_scale": "--rope-scale",
    "yarn_orig_ctx": "--yarn-orig-ctx",
    "yarn_ext_factor": "--yarn-ext-factor",
    "yarn_attn_factor": "--yarn-attn-factor",
    "yarn_beta_fast": "--yarn-beta-fast",
    "yarn_beta_slow": "--yarn-beta-slow",
}


def llamacpp_flags(rope: LlamaCppRope) -> list[str]:
    """llama.cpp's command-line flags (``llama-cli``, ``llama-server``) equal to :func:`llamacpp_options`.

    ``--rope-scale`` takes s (llama.cpp stores 1/s); ``--rope-scaling`` takes the type's name.

    Raises:
        ValueError: as :func:`llamacpp_options`.
    """
    flags: list[str] = []
    for key, value in llamacpp_options(rope).items():
        if key == "rope_scaling_type":
            text = rope.scaling_type
        elif key == "rope_freq_scale":
            text = f"{float(rope.factor):.9g}"
        else:
            text = f"{value:.9g}" if isinstance(value, float) else str(value)
        flags += [_FLAGS[key], text]
    return flags
