"""Evaluation backends beyond the torch models of :mod:`ropekit.eval.models`: the same samples through the engine a
model is served with, each an implementation of the evaluation-model protocol (:class:`ropekit.eval.protocol.EvalModel`).

Nothing is imported here (llama-cpp-python, torch and the HTTP client load with the modules):

* :mod:`~ropekit.eval.backends.llamacpp` — :class:`~ropekit.eval.backends.llamacpp.LlamaCppEvalModel`: a GGUF file
  run by llama.cpp in this process; :mod:`~ropekit.eval.backends.llamacpp_probe` first checks, in a child process,
  that llama.cpp runs here at all (the comparison's llama.cpp row asks it too).
* :mod:`~ropekit.eval.backends.openai` — :class:`~ropekit.eval.backends.openai.OpenAIEvalModel`: an
  OpenAI-compatible completions server, with its parts: :mod:`~ropekit.eval.backends.openai_client` (HTTP, deadlines,
  retries), :mod:`~ropekit.eval.backends.openai_served` (which model the server serves, its context, its identity),
  :mod:`~ropekit.eval.backends.openai_vocab` (the model's tokenizer, read locally),
  :mod:`~ropekit.eval.backends.openai_journal` (the answers kept to resume a run) and
  :mod:`~ropekit.eval.backends.openai_logprobs` (a check that prompt log-probabilities sit at the right position).
"""

__all__ = [
    "llamacpp",
    "llamacpp_probe",
    "openai",
    "openai_client",
    "openai_journal",
    "openai_logprobs",
    "openai_served",
    "openai_vocab",
]
