"""Synthetic samples of an exact token length: the passkey episode and RULER-style tasks (Hsieh et al., arXiv
2404.06654), built from token-id pieces in the model's own tokenizer (``encode``: text → ids, always given).

Nothing is imported here (numpy loads with the modules). Training (:mod:`ropekit.model`) mixes them into its
sequences and evaluation (:mod:`ropekit.eval`) measures on them; this package imports neither.

* :mod:`~ropekit.synthetic.passkey` — the passkey episode (Mohtashami & Jaggi, arXiv 2305.16300).
* :mod:`~ropekit.synthetic.base` — what every task shares: samples, haystacks, needle placement, random words.
* :mod:`~ropekit.synthetic.niah`, :mod:`~ropekit.synthetic.tracking`, :mod:`~ropekit.synthetic.aggregation` — the
  generators of RULER's retrieval, tracing and aggregation families; :mod:`~ropekit.synthetic.words` the
  pseudo-word pool the word lists draw from; :mod:`~ropekit.synthetic.phrasings` one needle in several wordings.
* :mod:`~ropekit.synthetic.latent`, :mod:`~ropekit.synthetic.path`, :mod:`~ropekit.synthetic.ladder` — the tasks
  beyond literal retrieval: latent hops with literal twins, path traversal (a long answer), the four-level ladder.
* :mod:`~ropekit.synthetic.suite` — the named tasks (each generator with its parameters), seeded by task name.
"""

__all__ = [
    "aggregation",
    "base",
    "ladder",
    "latent",
    "niah",
    "passkey",
    "path",
    "phrasings",
    "suite",
    "tracking",
    "words",
]
