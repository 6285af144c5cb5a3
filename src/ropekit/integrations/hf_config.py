"""Reading and writing Hugging Face transformers RoPE configs: kept for compatibility, see :mod:`ropekit.hf_format`.

The conversion lives in :mod:`ropekit.hf_format` (shared rules) and in each method's config class (its own keys
and transformers quirks); this module only re-exports it.
"""

from __future__ import annotations

from ropekit.hf_format import from_hf_config, to_hf_config, to_hf_dict

__all__ = ["from_hf_config", "to_hf_config", "to_hf_dict"]
