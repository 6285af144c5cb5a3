"""Continued training at a longer context on ``accelerate``, exported as a checkpoint transformers loads natively.

Nothing is imported here (torch, transformers and accelerate load with the modules):

* :mod:`~ropekit.finetune.run` — ``ropekit finetune`` end to end: checks, training, export, before/after.
* :mod:`~ropekit.finetune.request` — :class:`~ropekit.finetune.request.FinetuneRequest`, what a run is asked to
  do, and ``prepare``: every check before training, in one place (the run and ``--dry-run`` both call it).
* :mod:`~ropekit.finetune.settings` — :class:`~ropekit.finetune.settings.FinetuneSettings`, how a run trains
  (validated once).
* :mod:`~ropekit.finetune.train` — the training loop (full-length or PoSE windows); :mod:`~ropekit.finetune.loss` its loss
  (the chunked head of :mod:`ropekit.integrations.hf.output_head`), :mod:`~ropekit.finetune.loss_log` its loss log and
  :mod:`~ropekit.finetune.processes` its ``accelerate`` plumbing (stopping together, checkpoints, progress).
* :mod:`~ropekit.finetune.lora` — LoRA adapters with trainable norms and embeddings (LongLoRA).
* :mod:`~ropekit.finetune.pose` — PoSE position ids: a short window whose positions skip across the target length.
* :mod:`~ropekit.finetune.mixed` — LongRoPE2's mixed windows: rows packed from short documents (the original RoPE)
  or from long ones (the long factors), switched per row by :mod:`ropekit.mixed_window`.
* :mod:`~ropekit.finetune.fit` — the plan of what fits: predicted peak memory and time per step, the largest
  window that fits; :mod:`~ropekit.finetune.fit_measure` measures a step's peak (the free memory:
  :func:`ropekit._free_memory.available_memory`); :mod:`~ropekit.finetune.fit_parallel` the per-device plan of a run
  whose sequence is sharded (``--sequence-parallel`` / ``--context-parallel``) from the config alone.
* :mod:`~ropekit.finetune.data` — training text → token windows (the target length, or PoSE's window).
* the method ``--plan`` picks (and every other "method + factor + target length → scaling" rule) is
  :func:`ropekit.integrations.resolve.resolve_scaling`, which ``ropekit.extend`` and ``ropekit.patch`` share.

The model a run ends with is written by :mod:`ropekit.integrations.hf.extend` (what ``ropekit extend`` runs), and what
a run reads is checked by :mod:`ropekit.integrations.hf.input_checks` before anything is written (what is written goes
through :mod:`ropekit._output`, the writer every command shares: what the user owns is never overwritten).
"""

__all__ = [
    "data",
    "fit",
    "fit_measure",
    "fit_parallel",
    "lora",
    "loss",
    "loss_log",
    "mixed",
    "pose",
    "processes",
    "request",
    "run",
    "settings",
    "train",
]
