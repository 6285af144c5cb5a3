"""The docstring examples of the numpy-only modules run as doctests (the theory, the cost policy, the checks).

Oracle: the outputs written in the docstrings (each a number a test elsewhere also checks, e.g. 1707 in
tests/theory/test_decay.py and 26952 in tests/theory/test_bound.py).
"""

from __future__ import annotations

import doctest
import importlib

import pytest

#: modules that import neither torch nor matplotlib, each with at least one example
MODULES = (
    "ropekit._costs",
    "ropekit._validate",
    "ropekit._versions",
    "ropekit.scaling.ntk",
    "ropekit.theory.bound",
    "ropekit.theory.decay",
    "ropekit.theory.planning",
    "ropekit.theory.published",
)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no examples"
    assert result.failed == 0
