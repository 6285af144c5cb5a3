"""RULER-style synthetic tasks (Hsieh et al., arXiv 2404.06654) evaluated: RULER's scoring, shared-prefill greedy
decoding and the effective context length. The samples come from :mod:`ropekit.synthetic`.

Modules: ``limits`` (defaults and the checks made before samples are built), ``scoring`` (string match, intervals,
effective length), ``decode`` (cached greedy decoding), ``grid`` (the units a run answers), ``run`` (the evaluation
over methods × lengths × tasks), ``section`` (the report's task section).
"""
