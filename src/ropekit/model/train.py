"""Training the tiny model: deterministic batches, passkey episodes mixed in, checkpoints, resume, time budget.

Batch ``i`` is a pure function of ``(seed, i)``, so a resumed run sees exactly the data an uninterrupted
run would. The learning rate follows linear warm-up and cosine decay over ``steps``; ``minutes`` stops
early (with a checkpoint) when the time budget is spent.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from ropekit._schedule import warmup_cosine
from ropekit._validate import require_choice, require_float, require_int
from ropekit.errors import InvalidArgument
from ropekit.model.corpus import build_training_bytes, heldout_bytes
from ropekit.model.mixed_batches import mixed_batch, use_mixed_window
from ropekit.model.tiny import TinyConfig, TinyLM, bits_per_byte
from ropekit.model.tokenizer import byte_ids
from ropekit.model.train_state import check_train_out, checkpoint, copy_weights, load_state
from ropekit.synthetic.passkey import minimum_length, passkey_episode

TASK_MIXES = ("passkey", "suite")
#: with ``task_mix="suite"``, the share of task sequences that stay passkey episodes
SUITE_PASSKEY_SHARE = 0.25


@dataclass(frozen=True, kw_only=True)
class TrainConfig:
    """Optimisation settings (recorded in the checkpoint)."""

    steps: int = 4000
    batch_size: int = 16
    lr: float = 3e-3
    min_lr_ratio: float = 0.1
    warmup_steps: int = 100
    weight_decay: float = 0.1
    task_fraction: float = 0.2
    #: what the task share holds: "passkey" episodes only, or "suite": a quarter passkey, the rest RULER-style tasks
    #: (:func:`ropekit.synthetic.suite.mixture_sample`)
    task_mix: str = "passkey"
    #: the loss weight of answer tokens (the tokens after a task's question) relative to every other token: 1 is the
    #: plain language-model loss; above 1 the retrieval signal, a few tokens per task sequence, weighs more
    answer_weight: float = 1.0
    #: with ``task_mix="suite"``, relative weights of the RULER-style tasks (``{"vt": 2, "fwe": 2}``; a task not
    #: named weighs 1, 0 leaves it out); ``None``: uniform, the data order of runs made before the option existed
    task_weights: dict[str, float] | None = None
    seed: int = 0
    minutes: float | None = None
    checkpoint_every: int = 250
    #: where the model trains ("cpu", "cuda", "cuda:1"); checkpoints are always written from CPU copies
    device: str = "cpu"
    #: LongRoPE2's mixed windows (:mod:`ropekit.model.mixed_batches`): needs a ``longrope`` scaling on the model
    mixed_window: bool = False

    def __post_init__(self) -> None:
        for name in ("steps", "batch_size", "checkpoint_every"):
            object.__setattr__(self, name, require_int(name, getattr(self, name), minimum=1))
        for name in ("warmup_steps", "seed"):
            object.__setattr__(self, name, require_int(name, getattr(self, name), minimum=0))
        object.__setattr__(self, "lr", require_float("lr", self.lr, above=0.0))
        object.__setattr__(self, "weight_decay", require_float("weight_decay", self.weight_decay, at_least=0.0))
        object.__setattr__(self, "answer_weight", require_float("answer_weight", self.answer_weight, above=0.0))
        for name in ("min_lr_ratio", "task_fraction"):
            value = require_float(name, getattr(self, name), at_least=0.0)
            if value > 1.0:
                raise InvalidArgument(name, getattr(self, name), "must be in [0, 1]", allowed="[0, 1]")
            object.__setattr__(self, name, value)
        require_choice("task_mix", self.task_mix, TASK_MIXES)
        if self.task_weights is not None:
            if self.task_mix != "suite":
                mix = self.task_mix
                raise InvalidArgument(
                    "task_weights",
                    self.task_weights,
                    message=lambda n: f"{n('task_weights')} needs {n('task_mix', 'suite')}, got {n('task_mix', mix)}",
                )
            from ropekit.synthetic.suite import check_task_weights

            check_task_weights(self.task_weights)  # a clear error now, not at the first task sequence
            object.__setattr__(self, "task_weights", {k: float(v) for k, v in self.task_weights.items()})
        if self.minutes is not None:
            object.__setattr__(self, "minutes", require_float("minutes", self.minutes, above=0.0))
        if not isinstance(self.device, str) or not self.device:
            raise TypeError(f"device must be a string such as 'cpu' or 'cuda', got {self.device!r}")


def make_batch(
    corpus: np.ndarray, config: TinyConfig, train: TrainConfig, step: int, *, with_answers: bool = False
) -> torch.Tensor | tuple[torch.Tensor, torch.Tensor]:
    """``(batch, train_length + 1)`` ids for ``step``: corpus windows and task sequences, from (seed, step).

    Task sequences need at least :func:`~ropekit.synthetic.passkey.minimum_length` tokens; shorter contexts get corpus
    windows only. With ``with_answers``, also each row's answer length (its last tokens; 0 for corpus windows).
    """
    rng = np.random.default_rng([train.seed, step])
    length = config.train_length + 1
    episodes_fit = length >= minimum_length(byte_ids)
    rows, answers = [], []
    for _ in range(train.batch_size):
        if rng.random() < train.task_fraction and episodes_fit:
            if train.task_mix == "suite" and rng.random() >= SUITE_PASSKEY_SHARE:
                row, answer = _suite_sequence(rng, corpus, length, train.task_weights)
            else:
                episode = passkey_episode(rng, corpus, length, encode=byte_ids)
                row, answer = episode.ids, episode.answer_len
        else:
            start = int(rng.integers(0, len(corpus) - length))
            row, answer = corpus[start : start + length].astype(np.int64), 0
        rows.append(row)
        answers.append(answer)
    ids = torch.from_numpy(np.stack(rows))
    return (ids, torch.tensor(answers)) if with_answers else ids


def training_loss(
    logits: torch.Tensor,
    batch: torch.Tensor,
    answers: torch.Tensor,
    answer_weight: float,
    documents: torch.Tensor | None = None,
) -> torch.Tensor:
    """Next-token cross-entropy of ``logits`` for ``batch[:, 1:]``, answer tokens weighted ``answer_weight``.

    ``answers[b]`` is row ``b``'s answer length (its last targets). The loss is ``Σ w·ce / Σ w``: with weight 1 it is
    the plain mean. ``documents`` (``batch``'s shape: numbers of packed documents) gives weight 0 to a target in
    another document than its input.
    """
    targets = batch[:, 1:]
    if answer_weight == 1.0 and documents is None:
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))
    per_token = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="none")
    from_end = torch.arange(targets.shape[1] - 1, -1, -1, device=targets.device)
    is_answer = from_end[None, :] < answers.to(targets.device)[:, None]
    weights = torch.where(is_answer, answer_weight, 1.0)  # (batch, seq - 1)
    if documents is not None:
        weights = weights * (documents[:, 1:] == documents[:, :-1]).to(weights.device)
    weights = weights.reshape(-1)
    return (weights * per_token).sum() / weights.sum()


_PIECES: dict[str, object] = {}


def _suite_sequence(
    rng: np.random.Generator, corpus: np.ndarray, length: int, weights: dict[str, float] | None
) -> tuple[np.ndarray, int]:
    """A RULER-style task sequence and its answer length (imported here: training is the suite's only user in model/)."""
    from ropekit.synthetic.base import Pieces
    from ropekit.synthetic.suite import mixture_sample

    pieces = _PIECES.setdefault("bytes", Pieces(byte_ids))
    return mixture_sample(rng, length, corpus, pieces, weights)


def progress_fraction(train: TrainConfig, step: int, elapsed_s: float) -> float:
    """How far through the run we are: by steps, or by the time budget if that is further along."""
    done = step / train.steps
    if train.minutes is not None:
        done = max(done, elapsed_s / (train.minutes * 60))
    return min(1.0, done)


def learning_rate(train: TrainConfig, step: int, progress: float) -> float:
    """Linear warm-up over ``warmup_steps`` steps, then cosine decay to ``min_lr_ratio · lr`` at ``progress`` 1.

    With ``minutes`` set, ``progress`` follows the time budget, so a time-limited run still ends fully
    decayed (the data order stays deterministic; only the step count depends on the machine's speed).
    """
    return warmup_cosine(train.lr, step, warmup=train.warmup_steps, progress=progress, floor=train.min_lr_ratio)


@torch.no_grad()
def heldout_bpb(model: TinyLM, length: int, *, max_windows: int = 64) -> float:
    """Bits per byte on the shipped held-out text, non-overlapping windows of ``length``."""
    device = next(model.parameters()).device
    data = torch.from_numpy(byte_ids(heldout_bytes())).to(device)
    windows = min(max_windows, (len(data) - 1) // length)
    total, count = 0.0, 0
    model.eval()
    for w in range(windows):
        chunk = data[w * length : w * length + length + 1]
        logits = model(chunk[None, :-1])
        total += F.cross_entropy(logits[0], chunk[1:], reduction="sum").item()
        count += length
    return bits_per_byte(total / count)


def _device(train: TrainConfig) -> torch.device:
    """``train.device`` as a torch device, refused with a one-line error if it is malformed or absent here."""
    try:
        device = torch.device(train.device)
    except RuntimeError as error:
        raise InvalidArgument("device", train.device, "must be a torch device such as 'cpu' or 'cuda'") from error
    if device.type == "cuda" and not torch.cuda.is_available():
        message = f"device {train.device!r} was asked for but CUDA is not available here"
        raise InvalidArgument("device", train.device, message=message)
    return device


def _optimizer(model: TinyLM, train: TrainConfig) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices only (not on norms and biases)."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    return torch.optim.AdamW(
        [{"params": decay, "weight_decay": train.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=train.lr,
        betas=(0.9, 0.95),
    )


def _step(
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    batch: torch.Tensor,
    answers: torch.Tensor,
    train: TrainConfig,
    lr: float,
    packed: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> torch.Tensor:
    """One optimizer step at learning rate ``lr`` with gradients clipped to norm 1; returns the loss. ``packed``:
    ``(positions, documents)`` of a mixed-window batch (:func:`ropekit.model.mixed_batches.mixed_batch`)."""
    for group in optimizer.param_groups:
        group["lr"] = lr
    if packed is None:
        loss = training_loss(model(batch[:, :-1]), batch, answers, train.answer_weight)
    else:
        positions, documents = packed
        logits = model(batch[:, :-1], positions, documents=documents[:, :-1])
        loss = training_loss(logits, batch, answers, train.answer_weight, documents)
    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    return loss


def _train_steps(
    model: TinyLM,
    optimizer: torch.optim.Optimizer,
    corpus: np.ndarray,
    config: TinyConfig,
    train: TrainConfig,
    out: Path,
    device: torch.device,
    step: int,
    history: list,
    progress: bool,
    elapsed_before: float,
) -> int:
    """Optimizer steps from ``step`` until ``train.steps`` or the time budget, appending to ``history`` every 10
    steps and checkpointing every ``train.checkpoint_every``; returns the step reached."""
    from ropekit._progress import progress_bar

    started = time.perf_counter()
    tokens_per_step = train.batch_size * config.train_length
    with progress_bar("train", steps=True, enabled=progress) as bar:
        task = bar.add_task("", total=train.steps, completed=step)
        smoothed = None
        while step < train.steps:
            model.train()
            packed = None
            batch, answers = make_batch(corpus, config, train, step, with_answers=True)
            if train.mixed_window:
                batch, answers, positions, documents = mixed_batch(batch, answers, corpus, config, train.seed, step)
                packed = (positions.to(device), documents.to(device))
            batch = batch.to(device)
            elapsed = elapsed_before + time.perf_counter() - started
            fraction = progress_fraction(train, step, elapsed)
            if fraction >= 1.0:
                break
            loss = _step(model, optimizer, batch, answers, train, learning_rate(train, step, fraction), packed)
            step += 1
            elapsed = elapsed_before + time.perf_counter() - started
            smoothed = loss.item() if smoothed is None else 0.95 * smoothed + 0.05 * loss.item()
            rate = step * tokens_per_step / max(elapsed, 1e-9)
            bar.update(
                task, completed=step, description=f"loss {smoothed:.3f}  {rate:,.0f} tok/s  {fraction:.0%} of budget"
            )
            if step % 10 == 0:
                history.append({"step": step, "loss": round(smoothed, 4), "elapsed_s": round(elapsed, 1)})
            if step % train.checkpoint_every == 0:
                checkpoint(out, model, optimizer, step, history, {"partial": True, "step": step})
    return step


def train(
    config: TinyConfig,
    train: TrainConfig,
    out: str | Path,
    *,
    resume: bool = True,
    corpus: np.ndarray | None = None,
    progress: bool = True,
    command: str = "",
    init: str | Path | None = None,
    force: bool = False,
) -> dict:
    """Train a model and save it to ``out``; returns the summary (also stored in the checkpoint's metadata).

    Args:
        config: architecture.
        train: optimisation settings.
        out: checkpoint directory; if it holds a ``train_state`` and ``resume`` is true, training continues.
        corpus: training bytes (default: the stdlib corpus of :mod:`ropekit.model.corpus`).
        init: start from this checkpoint's weights (a bundled name such as ``"tiny"`` or a directory) instead of
            random ones: continued training, e.g. at a longer context or another RoPE base, as Men et al. do when
            they fine-tune with a changed base. Its shape must match ``config``; position encoding, base and
            training length may differ (RoPE has no weights). Ignored when resuming.
        force: replace the checkpoint files (:data:`~ropekit.model.train_state.CHECKPOINT_FILES`) that ``out``
            holds without a run to resume (refused otherwise, before any work); the other files in ``out`` are never
            touched. Checkpoints are written beside ``out`` and renamed into it, so an interrupted write leaves the
            previous one whole.
    """
    torch.manual_seed(train.seed)
    out = Path(out)
    device = _device(train)
    if train.mixed_window:  # short rows take the short list: equal lists become the original RoPE
        from ropekit.mixed_window import mixed_window_scaling

        config = dataclasses.replace(config, scaling=mixed_window_scaling(config.scaling))
    resuming = check_train_out(out, resume=resume, force=force)
    model = TinyLM(config)
    if init is not None:
        copy_weights(init, model)
    out.mkdir(parents=True, exist_ok=True)  # after the checks: a bad run leaves nothing behind
    manifest = None
    if corpus is None:
        corpus, manifest = build_training_bytes()
    model = model.to(device)
    optimizer = _optimizer(model, train)
    step, history = 0, []
    if resuming:
        step, history = load_state(out, model, optimizer)
    elapsed_before = history[-1]["elapsed_s"] if history else 0.0
    tokens_per_step = train.batch_size * config.train_length
    started = time.perf_counter()
    if train.mixed_window:
        use_mixed_window(model)
    step = _train_steps(model, optimizer, corpus, config, train, out, device, step, history, progress, elapsed_before)
    if train.mixed_window:
        model.set_scaling(config.scaling)  # the rotary the checkpoint loads with
    elapsed = elapsed_before + time.perf_counter() - started
    summary = {
        "command": command,
        "steps": step,
        "tokens": step * tokens_per_step,
        "wall_time_s": round(elapsed, 1),
        "parameters": model.num_parameters(),
        "heldout_bpb": round(heldout_bpb(model, config.train_length), 4),
        "train": train.__dict__,
        "corpus_digest": manifest["train_digest"] if manifest else None,
        "init": None if init is None else str(init),
        "history": history,
    }
    checkpoint(out, model, optimizer, step, history, summary)
    return summary
