"""The same numbers in every engine: each engine's own code on one RoPE configuration, against transformers.

For an extended model folder (what ``ropekit extend`` writes) every engine that runs here is asked the same
:class:`~ropekit.engines.probe.Probe`: at positions 0, L0 − 1, L0, target − 1 and each switch point, and at each
served length (L0, one past each switch, the target), the rotation its own RoPE code applies (A·cos, A·sin: the
frequencies and the attention factor at once), its softmax scale, and where it runs the model here, the logits on
the same ids. One module per engine, each with ``row(case)`` (a :class:`~ropekit.engines.probe.Case`: the folder,
its config, the probe, transformers' answer and any GGUF file) and importing the engine's own code inside its
functions (never a port):

* :mod:`~ropekit.engines.transformers_ref`: the reference;
* :mod:`~ropekit.engines.mlx_lm`: MLX-LM's loader, RoPE modules and model;
* :mod:`~ropekit.engines.llama_cpp`: llama.cpp's runtime on the GGUF file (logits);
* :mod:`~ropekit.engines.vllm`: vLLM's ``get_rope`` module, in its own environment (subprocess);
* :mod:`~ropekit.engines.sglang`: SGLang's ``get_rope`` module, in the vLLM environment (subprocess);
* :mod:`~ropekit.engines.ollama`: its launch line, and why it is not run here.

Each row says ``same`` (with the largest difference), ``differs`` (how much, from which position, and why: a
documented behaviour of the engine, or none), ``cannot express`` or ``cannot run here``, and the line that launches
the engine with this RoPE. :func:`~ropekit.engines.compare.compare_folder` makes the rows;
:func:`compare_engines` gives each engine's verdict, reason and largest difference on one folder.

The reference is the rotation transformers' own modeling code applies (:mod:`~ropekit.integrations.hf.rotation_capture`), read
in its own pairing; vLLM's and SGLang's modules are built as the architecture's model file builds them
(:mod:`~ropekit.engines.source_reader`, :mod:`~ropekit.engines.model_class`).
"""

from ropekit.engines.compare import Verdict, compare_engines

__all__ = ["Verdict", "compare_engines"]
