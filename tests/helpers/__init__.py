"""Helpers shared by test files, imported as ``helpers.<module>`` (``tests/`` is on pytest's ``pythonpath``): small
random transformers models (:mod:`helpers.hf_models`)."""
