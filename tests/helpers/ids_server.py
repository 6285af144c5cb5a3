"""llama-cpp-python's server (``python -m llama_cpp.server``) taking a completion prompt as token ids too, as
llama.cpp's own C++ server, vLLM and SGLang do; its ``Llama.create_completion`` already takes ids, only the request
model refuses them. Run as ``python ids_server.py --model FILE ...`` (the server's own options)."""

from __future__ import annotations

import runpy
from typing import Union

import llama_cpp.server.types as types
from pydantic import field_validator


class IdsCompletionRequest(types.CreateCompletionRequest):
    prompt: Union[str, list[str], list[list[int]]] = ""

    @field_validator("prompt", mode="before")
    @classmethod
    def _ids(cls, value):
        """Token ids become a one-prompt list, which the route unwraps and passes to ``create_completion``."""
        if isinstance(value, list) and value and all(isinstance(t, int) for t in value):
            return [value]
        return value


types.CreateCompletionRequest = IdsCompletionRequest
runpy.run_module("llama_cpp.server", run_name="__main__")
