"""What fits: predicted peak memory and time per training step, before any weights train.

The peak of one optimizer step of :func:`ropekit.finetune.train.train`, per process, is predicted from the model's
shapes (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models", arXiv 2205.05198
§4, for the activations of a decoder layer):

* **resident**: the weights (fp32, ``4·P`` bytes) and AdamW's two fp32 moments of the trainable parameters
  (``8·T``; with LoRA ``T`` is the adapters plus the norms and embeddings);
* then the larger of two moments of the step: the optimizer step, with the **gradients** (``4·T``) alive; and the
  start of the backward pass, with the activations and the loss head alive:
* **activations**: per token, what a decoder layer keeps for its backward pass — ``a = e·(c_h·h + c_kv·kv + c_i·i)``
  bytes for hidden size ``h``, key/value width ``kv`` and MLP width ``i`` at ``e`` bytes per element (4 in fp32, 2
  under bf16/fp16 autocast); ``layers·a`` without gradient checkpointing; with it each layer keeps its input
  (``layers·4·h``) and one layer is recomputed at a time, after the loss head's backward (so ``max(a, logits)``).
  Attention is scaled-dot-product (flash/memory-efficient: linear in the window);
* **loss head**: the float32 logits of the chunked loss (:class:`ropekit.finetune.loss.ChunkedCausalLM`): all of them
  when they fit in its chunk budget, else one chunk, times the copies the cross-entropy and its gradient hold.

The activation constants were fitted on random Llamas (fp32, CPU, torch's profiler). A short measured step (:func:`calibrate`, one row at a short window)
adds what the shapes miss (optimizer temporaries, an architecture's extra buffers: the measured peak above the
prediction at that window, never less than 0) and gives the time per FLOP, scaled to the window by the step's FLOPs
(``6·P`` per token, ``8·P`` with recomputation, plus the attention's ``6·layers·h·W`` per token). On CPU the peak is
read from torch's profiler (``profile_memory``: every allocation and free, deterministic), on CUDA from the allocator.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import nn

from ropekit._free_memory import available_memory
from ropekit.errors import InvalidArgument, Namer
from ropekit.finetune.fit_measure import measure_step, resident_bytes
from ropekit.finetune.loss import prepared_model
from ropekit.integrations.hf.output_head import TRAIN_CHUNK_BYTES

#: decoder-layer activation elements per token (fp32, no recomputation), per unit of h, kv width and MLP width;
#: fitted once on random Llamas with the profiler (tests/finetune/test_fit.py checks the prediction)
ACTIVATION_COEFFICIENTS = (8.0, 4.0, 4.0)
#: float32 copies of the loss head's logits alive at the peak (logits, log-softmax, their gradient)
LOGIT_COPIES = 3
#: the share of the device's free memory a plan may use
USABLE_SHARE = 0.9


@dataclass(frozen=True)
class Shapes:
    """What the prediction reads from a model: parameter counts and the decoder's widths."""

    parameters: int
    trainable: int
    layers: int
    hidden: int
    kv_width: int
    intermediate: int
    vocab: int

    @classmethod
    def of_model(cls, model: nn.Module, *, lora_rank: int = 0) -> Shapes:
        """Shapes of a transformers causal LM (weights may be on the meta device); ``lora_rank`` > 0 counts the
        trainable parameters :func:`ropekit.finetune.lora.lora_model` leaves (adapters on every linear layer but the
        head, plus norms and embeddings)."""
        config = model.config
        config = config.get_text_config() if hasattr(config, "get_text_config") else config
        parameters = sum(p.numel() for p in model.parameters())
        trainable = parameters
        if lora_rank:
            head = model.get_output_embeddings()
            trainable = sum(
                lora_rank * (m.in_features + m.out_features)
                for m in model.modules()
                if isinstance(m, nn.Linear) and m is not head
            )
            trainable += sum(p.numel() for n, p in model.named_parameters() if "norm" in n or "embed" in n)
        heads = int(config.num_attention_heads)
        head_dim = int(getattr(config, "head_dim", None) or config.hidden_size // heads)
        kv_heads = int(getattr(config, "num_key_value_heads", None) or heads)
        return cls(
            parameters=parameters,
            trainable=trainable,
            layers=int(config.num_hidden_layers),
            hidden=int(config.hidden_size),
            kv_width=kv_heads * head_dim,
            intermediate=int(getattr(config, "intermediate_size", None) or 4 * config.hidden_size),
            vocab=int(config.vocab_size),
        )

    @classmethod
    def of_config(cls, config: Mapping[str, Any], *, lora_rank: int = 0) -> Shapes:
        """Shapes from a config dict (:func:`ropekit.integrations.hf.load.transformers_config`), the model built on the
        meta device (no memory, no weights read)."""
        from transformers import AutoConfig, AutoModelForCausalLM

        hf_config = AutoConfig.for_model(**dict(config))
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(hf_config)
        return cls.of_model(model, lora_rank=lora_rank)


@dataclass(frozen=True)
class StepPlan:
    """Predicted peak memory (bytes, per process) and time of one optimizer step; see the module docstring."""

    window: int
    target_length: int
    batch_size: int
    grad_accum: int
    weights: int
    optimizer: int
    gradients: int
    activations: int
    logits: int
    other: int
    checkpointing: bool
    layer_inputs: int
    seconds_per_step: float | None
    available: int | None
    calibrated: bool
    mask: int = 0  # mixed windows: the 4-D bool document mask, batch × window² bytes, alive through the step

    @property
    def peak(self) -> int:
        backward = self.activations + self.logits  # all alive when the loss head's backward starts
        if self.checkpointing:  # layer inputs, then the head's backward or one recomputed layer
            backward = self.layer_inputs + max(self.activations - self.layer_inputs, self.logits)
        return self.weights + self.optimizer + max(self.gradients, backward) + self.other + self.mask

    @property
    def fits(self) -> bool:
        return self.available is None or self.peak <= USABLE_SHARE * self.available

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "peak": self.peak, "fits": self.fits}

    def summary(self) -> str:
        """One line: the plan in GiB and seconds."""

        def gib(n: int) -> str:
            return f"{n / 2**30:.2f} GiB"

        step = f"{self.seconds_per_step:.2f} s/step" if self.seconds_per_step is not None else "time not measured"
        free = f" of {gib(self.available)} free" if self.available is not None else ""
        extra = f", measured extra {gib(self.other)}" if self.other else ""
        extra += f", document mask {gib(self.mask)}" if self.mask else ""
        return (
            f"plan: window {self.window:,} (target {self.target_length:,}) × batch {self.batch_size} × accum "
            f"{self.grad_accum}: peak {gib(self.peak)}{free} (weights {gib(self.weights)}, AdamW "
            f"{gib(self.optimizer)}, gradients {gib(self.gradients)}, activations {gib(self.activations)}, logits "
            f"{gib(self.logits)}{extra}); {step}{' (measured)' if self.calibrated else ''}"
        )


@dataclass(frozen=True)
class Calibration:
    """A measured step: the bytes its peak had above the prediction (at least 0) and its seconds per FLOP."""

    extra_bytes: int
    seconds_per_flop: float


def activation_per_token(shapes: Shapes, *, checkpointing: bool, element_bytes: int = 4) -> float:
    """Predicted activation bytes per token of the whole decoder (see the module docstring)."""
    c_h, c_kv, c_i = ACTIVATION_COEFFICIENTS
    layer = element_bytes * (c_h * shapes.hidden + c_kv * shapes.kv_width + c_i * shapes.intermediate)
    if checkpointing:
        return layer_input_bytes(shapes) + layer
    return shapes.layers * layer


def layer_input_bytes(shapes: Shapes) -> int:
    """Bytes per token of the decoder layers' inputs, kept under gradient checkpointing."""
    return shapes.layers * 4 * shapes.hidden


def logit_bytes(shapes: Shapes, tokens: int, batch: int, chunk_bytes: int = TRAIN_CHUNK_BYTES) -> int:
    """Bytes of the loss head's logits at the peak: all ``tokens × vocab`` float32 logits when they fit in the chunk
    budget (the loss then forms them at once), else one chunk of positions."""
    whole = 4 * tokens * shapes.vocab
    per_row = max(1, chunk_bytes // (4 * shapes.vocab * batch)) * batch * 4 * shapes.vocab
    return LOGIT_COPIES * (whole if whole <= chunk_bytes else min(whole, per_row))


def step_flops(shapes: Shapes, tokens: int, window: int, *, checkpointing: bool) -> float:
    """FLOPs of one forward + backward over ``tokens`` tokens in rows of ``window`` (Kaplan et al. 2020 §2.1:
    ``6·P`` per token, ``8·P`` with recomputation, plus causal attention)."""
    per_token = (8 if checkpointing else 6) * shapes.parameters + 6 * shapes.layers * shapes.hidden * window
    return float(per_token * tokens)


def plan_step(
    shapes: Shapes,
    *,
    window: int,
    target_length: int,
    batch_size: int = 1,
    grad_accum: int = 1,
    checkpointing: bool = True,
    element_bytes: int = 4,
    calibration: Calibration | None = None,
    available: int | None = None,
    mixed_window: bool = False,
) -> StepPlan:
    """The predicted peak and step time of training on ``batch_size`` rows of ``window`` tokens (positions over
    ``target_length``: PoSE costs what its window costs), ``grad_accum`` micro-steps per optimizer step; mixed windows
    add their document mask (:func:`ropekit.mixed_window.document_mask`)."""
    tokens = batch_size * window
    per_token = activation_per_token(shapes, checkpointing=checkpointing, element_bytes=element_bytes)
    seconds = None
    if calibration is not None:
        flops = step_flops(shapes, tokens, window, checkpointing=checkpointing)
        seconds = grad_accum * flops * calibration.seconds_per_flop
    return StepPlan(
        window=window,
        target_length=target_length,
        batch_size=batch_size,
        grad_accum=grad_accum,
        weights=4 * shapes.parameters,
        optimizer=8 * shapes.trainable,
        gradients=4 * shapes.trainable,
        activations=int(per_token * tokens),
        logits=logit_bytes(shapes, tokens, batch_size),
        other=calibration.extra_bytes if calibration is not None else 0,
        checkpointing=checkpointing,
        layer_inputs=layer_input_bytes(shapes) * tokens if checkpointing else 0,
        seconds_per_step=seconds,
        available=available,
        calibrated=calibration is not None,
        mask=batch_size * window * window if mixed_window else 0,
    )


def largest_window(plan: StepPlan, shapes: Shapes, **kwargs: Any) -> int | None:
    """The largest window (at most the plan's target) whose plan fits ``plan.available``; ``None`` if none does."""
    if plan.available is None:
        return plan.target_length

    def fits(window: int) -> bool:
        return plan_step(
            shapes, window=window, target_length=plan.target_length, available=plan.available, **kwargs
        ).fits

    low, high = 1, plan.target_length
    if not fits(2):
        return None
    while low < high:  # the largest window that fits, by bisection (the peak grows with the window)
        middle = (low + high + 1) // 2
        low, high = (middle, high) if fits(middle) else (low, middle - 1)
    return low


def calibrate(
    wrapper: nn.Module,
    shapes: Shapes,
    *,
    window: int,
    checkpointing: bool,
    device: torch.device | None = None,
    measure_memory: bool = True,
) -> tuple[Calibration, int | None]:
    """A warm-up step and a timed step of ``wrapper`` (a :class:`ropekit.finetune.loss.ChunkedCausalLM`) on a
    random row of ``window`` tokens with AdamW, as training runs them; then, with ``measure_memory``, a step whose
    peak is measured (:func:`measure_step`).

    Returns:
        ``(calibration, measured peak bytes or None)`` — the peak includes the weights and the optimizer state.
    """
    parameters = [p for p in wrapper.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(parameters, lr=1e-12)
    ids = torch.randint(0, shapes.vocab, (1, window), generator=torch.Generator().manual_seed(0)).to(device)

    def step() -> None:
        wrapper(ids).backward()
        optimizer.step()
        optimizer.zero_grad()

    wrapper.train()
    step()  # warm-up: allocates the optimizer state
    start = time.perf_counter()
    step()
    seconds = time.perf_counter() - start
    flops = step_flops(shapes, window, window, checkpointing=checkpointing)
    if not measure_memory:
        return Calibration(0, seconds / flops), None
    peak = resident_bytes(wrapper, optimizer) + measure_step(step, device)
    predicted = plan_step(shapes, window=window, target_length=window, checkpointing=checkpointing).peak
    return Calibration(max(0, peak - predicted), seconds / flops), peak


#: calibrate when the measured steps cost at most this many FLOPs (a few seconds on one CPU core) …
CHEAP_FLOPS = {"cpu": 3e11, "cuda": 1e15}
#: … or at most this share of the run's own training FLOPs (a 135M model on CPU: seconds before an hour's run)
CHEAP_SHARE = 0.02
#: the calibration window (or the run's window when shorter)
CALIBRATION_WINDOW = 256


def plan_finetune(
    config: Mapping[str, Any],
    settings: Any,
    *,
    build_model: Callable[[], nn.Module] | None = None,
    device: torch.device | None = None,
    available: int | None = None,
) -> tuple[StepPlan, int | None]:
    """The plan of a ``ropekit finetune`` run and the largest window that fits the device.

    Args:
        config: the model's config dict.
        settings: the run's :class:`ropekit.finetune.settings.FinetuneSettings`.
        build_model: loads the model as training does; when given and the steps are cheap (:data:`CHEAP_FLOPS`, or
            :data:`CHEAP_SHARE` of the run), two short steps time the device (and on CUDA measure the peak).
        device: the training device (default: CUDA when available, else CPU).
        available: free bytes (default: :func:`available_memory`).

    Returns:
        ``(plan, largest window that fits or None when none does)``.
    """
    from ropekit.finetune.settings import resolved_mixed_precision

    device = device or torch.device("cuda" if torch.cuda.is_available() else "cpu")
    shapes = Shapes.of_config(config, lora_rank=settings.lora_rank)
    window = settings.window or settings.target_length
    element_bytes = 2 if resolved_mixed_precision(settings.mixed_precision) in ("bf16", "fp16") else 4
    common = {
        "batch_size": settings.batch_size,
        "grad_accum": settings.grad_accum,
        "checkpointing": settings.gradient_checkpointing,
        "element_bytes": element_bytes,
        "mixed_window": getattr(settings, "mixed_window", False),
    }
    calibration = None
    short = min(window, CALIBRATION_WINDOW)
    rows = settings.steps * settings.grad_accum * settings.batch_size
    run = rows * step_flops(shapes, window, window, checkpointing=settings.gradient_checkpointing)
    cost = 3 * step_flops(shapes, short, short, checkpointing=False)
    cheap = cost <= max(CHEAP_FLOPS.get(device.type, 0), CHEAP_SHARE * run)
    if build_model is not None and cheap and element_bytes == 4:
        wrapper = prepared_model(build_model(), settings).to(device)
        calibration, _ = calibrate(
            wrapper, shapes, window=short, checkpointing=settings.gradient_checkpointing, device=device,
            measure_memory=device.type == "cuda",
        )  # fmt: skip
        del wrapper
    free = available_memory(device) if available is None else available
    if free is None:
        raise ValueError(
            "this system does not say how much memory is free (no psutil, no /proc/meminfo): install psutil"
        )
    common["calibration"] = calibration
    plan = plan_step(shapes, window=window, target_length=settings.target_length, available=free, **common)
    return plan, largest_window(plan, shapes, **common)


def refusal(plan: StepPlan, largest: int | None) -> InvalidArgument | None:
    """The refusal of a plan that does not fit, about ``window`` (``None`` when it fits)."""
    if plan.fits:
        return None
    need, free = plan.peak / 2**30, (plan.available or 0) / 2**30

    def message(n: Namer) -> str:
        head = f"{n('window', plan.window)}: one step needs about {need:.2f} GiB, more than {USABLE_SHARE:.0%} of the "
        if largest is None:
            return head + (
                f"{free:.2f} GiB free at any window (weights and AdamW state alone): train LoRA adapters "
                f"({n('lora_rank')}), or a smaller model"
            )
        fits = f"the largest window that fits is {n('window', largest)}"
        return head + f"{free:.2f} GiB free; {fits} (PoSE keeps the target)"

    return InvalidArgument("window", plan.window, allowed=f"<= {largest}" if largest else None, message=message)
