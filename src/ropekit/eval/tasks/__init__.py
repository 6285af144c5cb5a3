"""RULER-style synthetic tasks (Hsieh et al., arXiv 2404.06654): generators exact in token length, RULER's scoring,
shared-prefill greedy decoding and the effective context length.

Modules: ``base`` (samples, haystacks, placement), ``niah``, ``tracking``, ``aggregation`` (the generators),
``suite`` (the named tasks), ``scoring`` (string match, intervals, effective length), ``decode`` (cached greedy
decoding), ``run`` (the evaluation over methods × lengths × tasks), ``section`` (the report's task section).
"""
