"""The per-model RoPE search: per-pair ``longrope`` factors found by an evolutionary search scored by needle-driven
perplexity (LongRoPE, Ding et al., arXiv 2402.13753; LongRoPE2, Shang et al., arXiv 2502.20082).

Vocabulary (as in the rest of ropekit): a *candidate* is a critical pair ``c`` and one factor per rotary pair
(``long_factor``: pair i's frequency is ``inv_freq[i] / factor[i]``), every factor >= 1, non-decreasing over pairs,
and >= s (the extension factor) from pair ``c`` on. Its *score* is the mean loss, in nats, on the answer tokens only
of passkey samples at the target length (:mod:`ropekit.search.objective`); lower is better.

* :mod:`~ropekit.search.space`: the candidate, its repair to the constraints, the formula seeds, mutation and
  crossover in log-factor space;
* :mod:`~ropekit.search.objective`: the needle samples (search and held-out, disjoint, seeded) and the score;
* :mod:`~ropekit.search.evolve`: the evolutionary loop over any objective, with a journal so a stopped search
  resumes to the same result;
* :mod:`~ropekit.search.journal`: that journal;
* :mod:`~ropekit.search.result`: ``search.json`` (its schema is documented there and in docs/search.md);
* :mod:`~ropekit.search.pipeline`: one search end to end (what ``ropekit search`` and :func:`ropekit.api.search`
  run), with :mod:`~ropekit.search.identity` (the journal's header), :mod:`~ropekit.search.memory` (the memory plan)
  and :mod:`~ropekit.search.output` (the output folder);
* :mod:`~ropekit.search.processes`: a search among the processes of ``accelerate launch`` (each generation scored in
  shares; the main process decides and writes).

The package is also the short API's entry: ``ropekit.search(model, out=..., target_length=...)`` calls
:func:`ropekit.api.search` (the top package makes it callable: a package and a function cannot share the name
``ropekit.search`` otherwise).
"""

import sys

import ropekit
from ropekit.search.evolve import SearchSettings, SearchTrace, run_search
from ropekit.search.space import Candidate, seed_candidates

__all__ = ["Candidate", "SearchSettings", "SearchTrace", "run_search", "seed_candidates"]

sys.modules[__name__].__class__ = ropekit._CallablePackage  # ropekit.search(...) is ropekit.api.search(...)
