"""Experiments that test published claims at tiny scale: each a subpackage with its settings, run, verdict and page.

* :mod:`ropekit.experiments.base_bound`: does a RoPE base below the lower bound for the context give
  "superficial" long context (Men et al., arXiv 2405.14591)? ``ropekit experiment base-bound``.

They sit above the library: they use ``model`` (training), ``eval`` (perplexity, passkey) and ``theory`` (the bound);
nothing in the library imports them.
"""

__all__ = ["base_bound"]
