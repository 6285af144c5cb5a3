"""Run inside the vLLM environment (not ropekit's): vLLM's own rotary module, as the architecture's model class
builds it, on the probe vectors.

Reads JSON requests on stdin, one a line, and answers each with one line (:func:`serve`). The request names the
folder, the launch line's ``hf_overrides`` and ``max_model_len``, the compared ``layer``, the reference's pairing
(``interleaved``) and rotary width, and ``served``: served length → positions. vLLM's model class for the folder is
built on CPU as vLLM builds it, its ``get_rope`` calls recorded (:mod:`ropekit.engines._vllm_build`), and the rotary
module of the compared layer, as built, applied to the probe vectors: ``"source": "built class"``. Where the class
cannot be built here, the model file is read as source instead (:mod:`ropekit.engines.source_reader`) and
``get_rope`` called with what its first call passes (the request's ``rope_parameters``, ``head_size``,
``is_neox_style``, ``class_rule``, ``config``): ``"source": "read from source"``, with ``build_error``. The reply:
vLLM's version, the model file, the module's class, its ``mscale``, the pairing it says and the one it rotates, and
per served length the ``(positions, rotary_dim/2, 2)`` table of A·cos, A·sin it applies to a key. An architecture
vLLM serves through its Transformers backend answers ``"backend": "transformers"`` and no tables.
"""

import functools
import importlib.util
import json
import logging
import os
import sys
import types
from pathlib import Path


@functools.cache
def shared(name: str):
    """A module beside this file, by its path (this folder is not on ``sys.path``, where ``vllm.py`` would shadow
    vLLM), loaded once a process."""
    spec = importlib.util.spec_from_file_location(name, Path(__file__).with_name(f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


#: the facts of the model file a reply carries (:mod:`ropekit.engines.source_reader`; SGLang's probe shares them)
FACT_KEYS = ("calls", "neox", "scaling", "dual_chunk", "line", "permutes_qk", "neox_config")
#: what starts a reply line (:data:`ropekit.engines.probe_worker.MARK`)
MARK = "ropekit-reply "


def serve(answer) -> None:
    """Answer each JSON request line on stdin with one line, :data:`MARK` and the JSON reply of ``answer`` (or
    ``{"error": ..., "error_type": ...}`` where it raised), until stdin ends: one process serves a whole run
    (:mod:`ropekit.engines.probe_worker`)."""
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            reply = answer(json.loads(line))
        except Exception as error:  # one request's failure is its reply; the next request still runs
            reply = {"error": f"{type(error).__name__}: {error}", "error_type": type(error).__name__}
        print(MARK + json.dumps(reply), flush=True)


def forget(get_rope) -> None:
    """Empty ``get_rope``'s module cache: its key leaves out the served length, which LongRoPE's list choice
    reads."""
    getattr(sys.modules[get_rope.__module__], "_ROPE_DICT", {}).clear()


def main() -> None:
    os.environ.setdefault("VLLM_LOGGING_LEVEL", "ERROR")
    logging.disable(logging.WARNING)
    serve(answer)


def answer(request: dict) -> dict:
    """vLLM's reply to one request (module docstring): from its model class built and recorded
    (:func:`answer_built`), else, where the class cannot be built here, from its model file read as source
    (:func:`answer_from_source`, ``"source": "read from source"``, with why it was not built)."""
    import vllm

    reply = {"version": vllm.__version__}
    if request.get("folder"):
        build = shared("_vllm_build")
        try:
            return answer_built(request, reply, build)
        except build.Unbuilt as error:
            reply["build_error"] = str(error)
    return answer_from_source(request, reply)


def answer_built(request: dict, reply: dict, build) -> dict:
    """vLLM's reply from its model class for the request's ``folder``, built on CPU as vLLM builds it
    (:mod:`ropekit.engines._vllm_build`): the rotary module of the compared layer as built, its recorded ``get_rope``
    arguments, and the pairing it rotates (``neox_found``, measured), beside the one it says (``neox``)."""
    from vllm.model_executor.layers.rotary_embedding import get_rope

    forget(get_rope)
    reply["source"] = "built class"
    try:
        found = build.built(request)
    except build.Refused as error:
        return {**reply, "model_file": relative(error.file), "refused": str(error)}
    if found.get("backend"):
        return {**reply, "backend": "transformers"}
    rope, arguments = build.compared_rotary(found, int(request.get("layer") or 0))
    reply.update(model_file=relative(found["file"]), model_class=found["class"], stubbed=found["stubbed"])
    if rope is None:
        return {**reply, "failed": f"{found['class']} built no rotary module"}
    source = class_facts(found["file"], get_rope)  # the load-time q/k permutation: weights are not loaded here
    reply.update(
        recorded_arguments(arguments, get_rope), permutes_qk=source.get("permutes_qk"), calls=len(found["calls"])
    )
    reply["neox"] = said_pairing(rope, reply.get("recorded") or {})
    head, half = int(rope.head_size), request["rotary_dim"] // 2
    try:
        reply["neox_found"] = rotates_neox(rope, head)
        pairs = read_interleaved(request, reply, reply["neox_found"])
        reply["tables"] = rotated_tables(rope, head, half, pairs, within_table(rope, request["served"], reply))
    except Exception as error:  # the built module does not run here
        return failed(reply, error)
    return described(reply, rope)


def within_table(rope, served: dict, reply: dict) -> dict:
    """The served lengths whose positions the built module's cos/sin table holds (its ``cos_sin_cache`` rows: the
    ``max_position`` the class passes); the others go to ``reply["past_table"]`` as ``[table rows, lengths]``: a
    position past the table indexes out of it (on CPU an ``IndexError``, on an accelerator unchecked memory)."""
    cache = getattr(rope, "cos_sin_cache", None)
    rows = None if cache is None else int(cache.shape[0])
    if rows is None:
        return served
    kept = {n: p for n, p in served.items() if not p or max(p) < rows}
    if len(kept) < len(served):
        reply["past_table"] = [rows, sorted(int(n) for n in served if n not in kept)]
    return kept


def relative(path: str) -> str:
    """A file of vLLM's as ``vllm/…``."""
    import vllm

    return "vllm/" + str(Path(path).relative_to(Path(vllm.__file__).parent))


def recorded_arguments(arguments, get_rope) -> dict:
    """The facts a reply carries from one recorded ``get_rope`` call: ``scaling`` (it passes a scaled
    ``rope_type``), ``dual_chunk`` (a dual-chunk config), and ``recorded`` (its arguments, JSON-clean);
    ``{}`` where no recorded call built the module."""
    import inspect

    if arguments is None:
        return {}
    bound = inspect.signature(get_rope).bind(*arguments["args"], **arguments["kwargs"]).arguments
    params = bound.get("rope_parameters") or {}
    clean = {key: value for key, value in bound.items() if isinstance(value, (bool, int, float, str, dict, type(None)))}
    return {
        "scaling": params.get("rope_type", "default") != "default",
        "dual_chunk": bound.get("dual_chunk_attention_config") is not None,
        "recorded": json.loads(json.dumps(clean, default=str)),
    }


def rotates_neox(rope, head: int) -> bool:
    """Whether ``rope`` rotates pairs (i, i + d/2), measured: e_0 at position 1 moves into dimension d/2, not 1."""
    import torch

    rotary = int(getattr(rope, "rotary_dim", head))
    forward = getattr(rope, "forward_native", None)
    shape = (1, 1, head) if forward is not None else (1, head)
    vector = torch.zeros(*shape, dtype=torch.float32)
    vector[..., 0] = 1.0
    _, rotated = (forward or rope.forward)(torch.tensor([1]), vector.clone(), vector.clone())
    rotated = rotated.reshape(head)
    if rotary <= 2:
        return bool(getattr(rope, "is_neox_style", True))
    return bool(abs(float(rotated[rotary // 2])) > abs(float(rotated[1])))


def said_pairing(rope, recorded: dict):
    """The pairing the built module says it rotates: its ``is_neox_style`` (a model class may set it after building),
    else, for a class that keeps none (LongRoPE, which builds NeoX pairs only), the ``is_neox_style`` its recorded
    ``get_rope`` call passed; ``None`` where neither says."""
    said = getattr(rope, "is_neox_style", recorded.get("is_neox_style"))
    return None if said is None else bool(said)


def answer_from_source(request: dict, reply: dict) -> dict:
    """vLLM's reply from its model file read as source (:mod:`ropekit.engines.source_reader`): ``get_rope`` built
    with the arguments the file's first call passes, ``"source": "read from source"``."""
    import torch
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.model_executor.layers.rotary_embedding import get_rope

    reply["source"] = "read from source"
    if request.get("unreadable"):
        return {**reply, "failed": f"ValueError: {request['unreadable']}"}
    path = model_file(request["architecture"])
    if path is None:
        return {**reply, "backend": "transformers"}
    forget(get_rope)
    facts = class_facts(path, get_rope)
    reply["model_file"] = relative(facts["file"])
    reply.update({key: facts.get(key) for key in FACT_KEYS})
    neox, params, dual = request.get("is_neox_style", True), request["rope_parameters"], None
    if request.get("class_rule") != "ropekit" and facts["calls"]:
        neox = class_pairing(facts, request.get("config") or {})
        reply["neox"] = neox
        params = params if facts["scaling"] else None
        dual = request.get("dual_chunk_attention_config") if facts["dual_chunk"] else None
    head, half = request["head_size"], request["rotary_dim"] // 2
    config = VllmConfig(device_config=DeviceConfig(device="cpu"))
    # the served --max-model-len, the one model_config field vLLM's rotary classes read (LongRoPE's list choice);
    # a full ModelConfig would load the model's files
    object.__setattr__(config, "model_config", types.SimpleNamespace(max_model_len=request["max_position"]))
    with set_current_vllm_config(config):
        try:
            rope = get_rope(
                head, request["max_position"], neox, params, torch.float32, dual_chunk_attention_config=dual
            )
            pairs = read_interleaved(request, facts, neox)
            reply["tables"] = rotated_tables(rope, head, half, pairs, request["served"])
        except Exception as error:  # the class refuses this configuration, or cannot be built here
            return failed(reply, error)
    return described(reply, rope)


def failed(reply: dict, error: Exception) -> dict:
    """The reply of a module its class would not build or run: "refused" where the class refuses the configuration
    (``ValueError``, ``NotImplementedError``, ``KeyError``: a key it needs), else "failed"."""
    refused = isinstance(error, (ValueError, NotImplementedError, KeyError))
    return {**reply, "refused" if refused else "failed": f"{type(error).__name__}: {error}"}


def described(reply: dict, rope) -> dict:
    """The reply with the module's class and its ``mscale`` (``None`` where it has none)."""
    mscale = getattr(rope, "mscale", None)
    return {**reply, "class": type(rope).__name__, "mscale": None if mscale is None else float(mscale)}


def model_file(architecture: str):
    """The file of vLLM's own model class for ``architecture`` (``None``: vLLM serves it through its Transformers
    backend, named so in its registry or absent from it)."""
    from vllm.model_executor.models import registry

    entry = registry._TEXT_GENERATION_MODELS.get(architecture)
    if entry is None or entry[0] == "transformers":
        return None
    name = entry[0] if "." in entry[0] else f"vllm.model_executor.models.{entry[0]}"
    return importlib.util.find_spec(name).origin


def class_facts(path: str, get_rope) -> dict:
    """What the model file passes to ``get_rope`` (:func:`ropekit.engines.source_reader.follow`)."""
    return shared("source_reader").follow(path, get_rope, "rope_parameters", "vllm.model_executor.models.")


def class_pairing(facts: dict, config: dict) -> bool:
    """The ``is_neox_style`` the model class passes: the file's constant, or the config key it reads."""
    if facts.get("neox_config"):
        key, default, negated = facts["neox_config"]
        return bool(config.get(key, default)) != negated
    return bool(facts["neox"])


def read_interleaved(request: dict, facts: dict, neox: bool) -> bool:
    """The pairing to read a module's table at: the reference's (``request["interleaved"]``), except where the
    model file permutes transformers' interleaved q/k weights into NeoX order as it loads them and builds a NeoX
    module: its pairs (i, i + d/2) then hold the reference's (2i, 2i + 1)."""
    return bool(request["interleaved"]) and not (facts.get("permutes_qk") and neox)


def rotated_tables(rope, head: int, half: int, interleaved: bool, served: dict) -> dict:
    """Per served length, the ``(positions, half, 2)`` table of A·cos, A·sin that ``rope`` applies to a key holding
    ones at the first dimension of each pair of the reference's pairing (``interleaved``: (2i, 2i + 1), else
    (i, i + half)), read at the same pairs: a module that pairs other dimensions gives another table. The key, not
    the query: dual-chunk attention rotates keys at their absolute positions (``forward_native`` where the class
    has it, else ``forward``; SGLang's probe shares this)."""
    import torch

    first = list(range(0, 2 * half, 2)) if interleaved else list(range(half))
    second = [i + 1 for i in first] if interleaved else [i + half for i in first]
    tables = {}
    for length, positions in served.items():
        index = torch.tensor(positions, dtype=torch.long)
        forward = getattr(rope, "forward_native", None)
        # (tokens, heads, head size) for forward_native (DeepSeek's broadcasts over heads); LongRoPE has only
        # forward, which takes (tokens, heads · head size)
        shape = (len(positions), 1, head) if forward is not None else (len(positions), head)
        vector = torch.zeros(*shape, dtype=torch.float32)
        vector[..., first] = 1.0
        _, rotated = (forward or rope.forward)(index, vector.clone(), vector.clone())
        rotated = rotated.reshape(len(positions), head).double()
        tables[length] = torch.stack([rotated[:, first], rotated[:, second]], dim=-1).tolist()
    return tables


if __name__ == "__main__":
    main()
