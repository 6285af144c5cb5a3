"""Interop with other libraries (transformers). Imports of those libraries happen inside functions."""
