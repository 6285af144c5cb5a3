"""Measuring what a context extension buys: perplexity against length, passkey retrieval, task suites, sweeps, reports.

Nothing is imported here (torch loads with the modules), so ``import ropekit.eval`` is cheap:

* :mod:`~ropekit.eval.models` — the evaluation view of a model (the bundled tiny one, a transformers folder, a GGUF
  file): hidden states, the output head, and switching its RoPE scaling in place.
* :mod:`~ropekit.eval.methods` — which scaling (and attention method) each evaluated method name gets per length.
* :mod:`~ropekit.eval.perplexity` — perplexity against length, inside and beyond the training length.
* :mod:`~ropekit.eval.passkey` — passkey retrieval accuracy over lengths × depths, with Wilson intervals.
* :mod:`~ropekit.eval.tasks` — RULER-style synthetic tasks (samples from :mod:`ropekit.synthetic`) run and scored,
  and the effective context length.
* :mod:`~ropekit.eval.sweep` — every method over every length, as one result.
* :mod:`~ropekit.eval.run` — the entry point: :func:`~ropekit.eval.run.evaluate` (sweep and tasks, progress as a
  callback) and :func:`~ropekit.eval.run.write_report`, which ``ropekit eval`` and ``ropekit report`` call.
* :mod:`~ropekit.eval.report` — the report folder (``ropekit report``); :mod:`~ropekit.eval.figures` its figures,
  :mod:`~ropekit.eval.page` the HTML shell shared with the experiments' pages.
* :mod:`~ropekit.eval.text` — evaluation text from the user's own files.
* :mod:`~ropekit.eval.backends` — the same evaluation through llama.cpp and OpenAI-compatible servers.
"""

__all__ = [
    "backends",
    "figures",
    "methods",
    "models",
    "page",
    "passkey",
    "perplexity",
    "report",
    "run",
    "sweep",
    "tasks",
    "text",
]
