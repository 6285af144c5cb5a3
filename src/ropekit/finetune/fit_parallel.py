"""What fits when the sequence is sharded: the per-device memory of ``finetune --sequence-parallel N`` (DeepSpeed
Ulysses / ALST through accelerate) and ``--context-parallel N`` (torch's ring attention through accelerate's
``cp_size``), the divisibility rules, and the longest sequence that fits.

The model of one device's peak, for ``S`` tokens per row, ``B`` rows, ``N`` devices sharing each row, ``P``
parameters, ``T`` trainable ones (:class:`ropekit.finetune.fit.Shapes`) and ``e`` bytes per element of the compute
dtype (2 under bf16/fp16, 4 without mixed precision), is the sum of

* **weights**: DeepSpeed casts the module to the compute dtype, ``e·P`` (ZeRO-3: ``÷ N``); under context
  parallelism FSDP2 keeps the fp32 weights sharded, ``4·P ÷ N``;
* **optimizer state**: AdamW's two fp32 moments, plus the fp32 master copy where the module is cast, of the trainable
  parameters, ``(8 + 4)·T ÷ N`` (ZeRO-1 and up, and FSDP2, shard it over the ``N`` ranks);
* **gradients**: ``e·T``, ``÷ N`` from ZeRO-2 (and FSDP2, in fp32); ZeRO-2 also holds its gradient-reduction
  bucket (DeepSpeed's ``reduce_bucket_size``, 5·10⁸ elements, in the compute dtype);
* **checkpointed hidden states**: gradient checkpointing keeps each decoder layer's input, ``layers·h·e`` bytes per
  token, for ``B·S ÷ N`` tokens;
* **one layer's working set**: the recomputed layer's activations (:data:`ropekit.finetune.fit.ACTIVATION_COEFFICIENTS`,
  Korthikanti et al. 2022, arXiv 2205.05198 §4) for ``B·S ÷ N`` tokens; Ulysses' all-to-all moves the same bytes
  between sequence and heads;
* **logits**: under sharding the loss is the model's own on each shard (pre-shifted labels, the engines'
  convention), so the shard's logits exist whole: ``(e + 4)·vocab`` bytes per token (the logits in the compute dtype
  and the float32 log-probabilities the cross-entropy keeps), for ``B·S ÷ N`` tokens.

The terms are summed, not overlapped: the published measurements sit above the moment-by-moment maximum (the
allocator's reserve, the engines' own buffers), and the sum is the form that meets them. Calibration: ms-swift's
Qwen2.5-3B LoRA at 65,536 tokens, 75.35 / 48.5 / 27.78 / 17.92 GiB at 1 / 2 / 4 / 8 devices (bf16, gradient
checkpointing, flash attention, the loss unchunked); this model gives 83.0 / 44.9 / 25.8 / 16.2 GiB with ropekit's
LoRA (its trainable embeddings included), within 10% of each (``tests/finetune/test_fit_parallel.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, replace
from typing import Any

from ropekit.errors import InvalidArgument
from ropekit.finetune.fit import ACTIVATION_COEFFICIENTS, USABLE_SHARE, Shapes

#: DeepSpeed's default gradient-reduction bucket of ZeRO-2 (``reduce_bucket_size``, elements)
REDUCE_BUCKET = 500_000_000
#: float32 bytes per logit element the cross-entropy keeps beside the logits themselves (its log-probabilities)
LOG_PROBABILITY_BYTES = 4
#: the ZeRO stage of the shipped ``configs/sequence_parallel.yaml``
DEFAULT_ZERO_STAGE = 2
#: how ``--sequence-parallel`` and ``--context-parallel`` shard a row
ENGINES = {
    "sequence": "DeepSpeed Ulysses (accelerate sp_backend=deepspeed)",
    "context": "torch ring attention (accelerate cp_size)",
}


@dataclass(frozen=True)
class ShardedRun:
    """What the plan of a sharded run reads besides the model's shapes.

    Attributes:
        kind: ``sequence`` (Ulysses) or ``context`` (ring attention).
        degree: devices sharing each row (``N``).
        sequence: tokens per row (the target length, or PoSE's window).
        batch_size: rows per step on each group of ``N`` devices.
        element_bytes: bytes per element of the compute dtype (2 under bf16/fp16, else 4).
        zero_stage: DeepSpeed's ZeRO stage (sequence parallelism only).
        checkpointing: gradient checkpointing (without it every layer's activations stay).
    """

    kind: str
    degree: int
    sequence: int
    batch_size: int = 1
    element_bytes: int = 2
    zero_stage: int = DEFAULT_ZERO_STAGE
    checkpointing: bool = True


@dataclass(frozen=True)
class ShardedPlan:
    """One device's predicted peak (bytes) of a sharded run, term by term (see the module docstring)."""

    kind: str
    degree: int
    sequence: int
    weights: int
    optimizer: int
    gradients: int
    engine_buffers: int
    layer_inputs: int
    layer: int
    logits: int
    available: int | None
    rules: tuple[str, ...]
    largest_sequence: int | None = None

    @property
    def per_device_bytes(self) -> int:
        return (
            self.weights + self.optimizer + self.gradients + self.engine_buffers + self.layer_inputs + self.layer
            + self.logits
        )  # fmt: skip

    @property
    def fits(self) -> bool:
        return self.available is None or self.per_device_bytes <= USABLE_SHARE * self.available

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "per_device_bytes": self.per_device_bytes,
            "fits": self.fits,
            "engine": ENGINES[self.kind],
        }

    def summary(self) -> str:
        """One line: the plan in GiB, the rules and the longest sequence that fits."""

        def gib(n: int) -> str:
            return f"{n / 2**30:.2f} GiB"

        free = f" of {gib(self.available)} free" if self.available is not None else ""
        longest = "" if self.largest_sequence is None else f"; longest sequence that fits: {self.largest_sequence:,}"
        return (
            f"plan ({self.kind} parallel × {self.degree}, {ENGINES[self.kind]}): sequence {self.sequence:,}, per "
            f"device {gib(self.per_device_bytes)}{free} (weights {gib(self.weights)}, AdamW {gib(self.optimizer)}, "
            f"gradients {gib(self.gradients)}, engine buffers {gib(self.engine_buffers)}, checkpointed hidden "
            f"states {gib(self.layer_inputs)}, one layer {gib(self.layer)}, logits {gib(self.logits)}); rules: "
            f"{'; '.join(self.rules)}{longest}"
        )


def sharded_plan(shapes: Shapes, run: ShardedRun, *, available: int | None = None) -> ShardedPlan:
    """One device's peak for ``run`` (the module docstring's model); no rule is checked here (:func:`check_rules`)."""
    n, e = run.degree, run.element_bytes
    tokens = -(-run.batch_size * run.sequence // n)  # this device's tokens
    c_h, c_kv, c_i = ACTIVATION_COEFFICIENTS
    layer = int(e * (c_h * shapes.hidden + c_kv * shapes.kv_width + c_i * shapes.intermediate) * tokens)
    master = 4 if e < 4 else 0
    if run.kind == "sequence":
        weights = e * shapes.parameters // (n if run.zero_stage >= 3 else 1)
        optimizer = (8 + master) * shapes.trainable // (n if run.zero_stage >= 1 else 1)
        gradients = e * shapes.trainable // (n if run.zero_stage >= 2 else 1)
        buffers = e * REDUCE_BUCKET if run.zero_stage == 2 else 0
    else:  # FSDP2: fp32 weights, gradients and AdamW state sharded over the ring
        weights, optimizer, buffers = 4 * shapes.parameters // n, 8 * shapes.trainable // n, 0
        gradients = 4 * shapes.trainable // n
    if run.checkpointing:
        layer_inputs = shapes.layers * shapes.hidden * e * tokens
    else:
        layer_inputs, layer = 0, shapes.layers * layer
    return ShardedPlan(
        kind=run.kind,
        degree=n,
        sequence=run.sequence,
        weights=weights,
        optimizer=optimizer,
        gradients=gradients,
        engine_buffers=buffers,
        layer_inputs=layer_inputs,
        layer=layer,
        logits=(e + LOG_PROBABILITY_BYTES) * shapes.vocab * tokens,
        available=available,
        rules=rules(run.kind, n),
    )


def rules(kind: str, degree: int) -> tuple[str, ...]:
    """The divisibility rules of sharding a row over ``degree`` devices, in words."""
    if kind == "sequence":
        return (
            f"attention heads divisible by {degree}",
            f"key/value heads divisible by {degree}, or {degree} divisible by them (DeepSpeed replicates them)",
            f"sequence divisible by {degree}",
        )
    return (f"sequence divisible by {2 * degree} (the ring's load balancing: 2 × {degree} chunks)",)


def check_rules(config: Mapping[str, Any], kind: str, degree: int, sequence: int) -> None:
    """Refuse a sharding the engine cannot run on this model, naming the option and the rule.

    Raises:
        InvalidArgument: about ``sequence_parallel`` or ``context_parallel``.
    """
    name = f"{kind}_parallel"
    heads = int(config.get("num_attention_heads") or 0)
    kv = int(config.get("num_key_value_heads") or heads)
    problems = []
    if kind == "sequence":
        if heads % degree:
            problems.append(f"the model's {heads} attention heads are not divisible by {degree}")
        if kv % degree and degree % kv:
            problems.append(f"its {kv} key/value heads and {degree} do not divide one another")
        if sequence % degree:
            problems.append(f"the sequence of {sequence:,} tokens is not divisible by {degree}")
    elif sequence % (2 * degree):
        problems.append(f"the sequence of {sequence:,} tokens is not divisible by 2 × {degree} (the ring's chunks)")
    if problems:
        message = lambda n: f"{n(name, degree)}: {'; '.join(problems)}"  # noqa: E731
        raise InvalidArgument(name, degree, allowed="; ".join(rules(kind, degree)), message=message)


def largest_sequence(shapes: Shapes, run: ShardedRun, available: int) -> int | None:
    """The longest row (a multiple of the rules' step) whose plan fits ``available``; ``None`` if none does."""
    step = run.degree * (2 if run.kind == "context" else 1)

    def fits(units: int) -> bool:
        return sharded_plan(shapes, replace(run, sequence=units * step), available=available).fits

    if not fits(1):
        return None
    low, high = 1, 1
    while fits(high * 2) and high < 2**40:  # the peak grows with the sequence: double, then bisect
        low, high = high * 2, high * 2
    high *= 2
    while low < high - 1:
        middle = (low + high) // 2
        low, high = (middle, high) if fits(middle) else (low, middle)
    return low * step


def plan_sharded_run(config: Mapping[str, Any], settings: Any, *, available: int | None = None) -> ShardedPlan:
    """The plan of a ``ropekit finetune --sequence-parallel N`` / ``--context-parallel N`` run from the model's config
    alone (the model built on the meta device: no weights are read), with the longest sequence that fits.

    Args:
        config: the model's config dict.
        settings: the run's :class:`ropekit.finetune.settings.FinetuneSettings` (``settings.sharding`` set).
        available: one device's free bytes (default: :func:`ropekit._free_memory.available_memory` of the training
            device).

    Raises:
        InvalidArgument: a rule the engine would refuse (:func:`check_rules`).
    """
    import torch

    from ropekit._free_memory import available_memory
    from ropekit.finetune.settings import resolved_mixed_precision

    kind, degree = settings.sharding
    sequence = settings.window or settings.target_length
    text_config = config.get("text_config") or config
    check_rules(text_config, kind, degree, sequence)
    shapes = Shapes.of_config(config, lora_rank=settings.lora_rank)
    run = ShardedRun(
        kind=kind,
        degree=degree,
        sequence=sequence,
        batch_size=settings.batch_size,
        element_bytes=2 if resolved_mixed_precision(settings.mixed_precision) in ("bf16", "fp16") else 4,
        checkpointing=settings.gradient_checkpointing,
    )
    if available is None:
        available = available_memory(torch.device("cuda" if torch.cuda.is_available() else "cpu"))
    plan = sharded_plan(shapes, run, available=available)
    if available is None:
        return plan
    return replace(plan, largest_sequence=largest_sequence(shapes, run, available))
