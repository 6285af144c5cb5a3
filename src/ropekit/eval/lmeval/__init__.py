"""lm-evaluation-harness, both ways: ropekit's task samples as an lm-eval task folder, and lm-eval's per-sample
output read back into ropekit's task table.

Modules: ``export`` (samples → the documents lm-eval reads, checked to re-tokenise to ropekit's ids, and the task
folder: ``samples.jsonl``, one YAML per task, the ``ropekit`` group, the tokenizer), ``results`` (lm-eval's
``--log_samples`` files of those tasks, or of lm-eval's own ``ruler`` tasks → a
:class:`~ropekit.eval.tasks.run.TaskResult`: Wilson intervals, effective lengths, the heatmap). Neither imports
lm-eval: the folder is run by lm-eval itself (``src/ropekit/data/lmeval/ropekit_lmeval.py`` is its Python part).
"""
