"""The tiny reference model: a Llama-style byte-level decoder, its corpus, training and checkpoints.

``ropekit.model.load("tiny")`` returns the bundled checkpoint, ready for evaluation with any scaling
method via ``model.set_scaling(...)``.
"""

from ropekit.model.checkpoint import load, metadata, save
from ropekit.model.tiny import TinyConfig, TinyLM

__all__ = ["TinyConfig", "TinyLM", "load", "metadata", "save"]
