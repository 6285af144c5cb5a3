"""The labelled fallback, run inside the vLLM environment (standard library only) where an engine's model class cannot
be built there: what its model file passes to its ``get_rope``, read as source (its rows say "read from source").

The file is read as source (``ast``), not imported: for each ``get_rope(...)`` call, its arguments bound to the
names of the engine's own ``get_rope`` signature, and from them

* ``neox``: the ``is_neox_style`` it passes (a constant, a local name assigned constants, or a parameter's default;
  absent: the signature's default);
* ``scaling``: whether it passes the config's scaling at all (``rope_parameters`` in vLLM, ``rope_scaling`` in
  SGLang; absent or ``None``: the engine runs plain RoPE);
* ``dual_chunk``: whether it passes ``dual_chunk_attention_config``;
* ``neox_config``: ``[key, default, negated]`` where the pairing is the config's ``key`` (absent: ``default``;
  ``negated``: its ``not``), in a local name or passed down by the class that builds the attention (SGLang's
  Ernie 4.5: ``getattr(config, "rope_is_neox_style", False)``; its DeepSeek: ``not getattr(config,
  "rope_interleave", True)``);
* ``permutes_qk``: whether the file permutes transformers' ``q_proj``/``k_proj`` weights as it loads them (a
  function named for permuting that names them: vLLM's Llama 4 reorders interleaved pairs (2i, 2i + 1) into NeoX's
  (i, i + d/2), so its NeoX module computes transformers' interleaved rotation).

The first call of the file is the one reported (``calls`` says how many there are).
"""

import ast
import inspect


def facts(path: str, get_rope, scaling_name: str) -> dict:
    """``{"file", "calls", "neox", "scaling", "dual_chunk"}`` of the first ``get_rope`` call in the file at
    ``path`` (``calls`` 0: the file calls no ``get_rope``, the other keys are then absent)."""
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    parameters = list(inspect.signature(get_rope).parameters.values())
    calls = []
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for node in ast.walk(function):
            if isinstance(node, ast.Call) and _name(node.func) in ("get_rope", "get_rope_wrapper"):
                calls.append((node, function))
    found = {"file": path, "calls": len(calls), "permutes_qk": _permutes_qk(tree)}
    if not calls:
        return found
    call, function = min(calls, key=lambda pair: pair[0].lineno)
    bound = {parameters[i].name: arg for i, arg in enumerate(call.args) if i < len(parameters)}
    bound.update({keyword.arg: keyword.value for keyword in call.keywords if keyword.arg})
    default_neox = next((p.default for p in parameters if p.name == "is_neox_style"), True)
    neox = _constant(bound.get("is_neox_style"), function, default_neox)
    found["neox"] = bool(default_neox if neox is None else neox)
    local = _read_passed(bound.get("is_neox_style"), function) if neox is None else None
    if local and "neox_config" in local:  # a local name holding the config's key (SGLang's DeepSeek)
        found["neox_config"] = local["neox_config"]
    passed = _parameter(bound.get("is_neox_style"), function)
    if passed is not None:  # its caller decides: the argument it passes, where the file holds that call
        found.update(_caller_value(tree, passed))
        found["neox_param"] = passed
    found["scaling"] = _passed(bound.get(scaling_name))
    found["dual_chunk"] = _passed(bound.get("dual_chunk_attention_config"))
    found["line"] = call.lineno
    return found


def _permutes_qk(tree) -> bool:
    """Whether a function named for permuting names transformers' q/k projection weights (``q_proj``, ``k_proj``;
    a permutation of Mistral's own ``wq``/``wk`` names only does not touch a transformers checkpoint)."""
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)) and "permute" in function.name:
            names = {n.value for n in ast.walk(function) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
            if names & {"q_proj", "k_proj"}:
                return True
    return False


def follow(path: str, get_rope, scaling_name: str, package: str) -> dict:
    """:func:`facts` of the model file at ``path``; where it calls no ``get_rope`` itself, of the first module of
    ``package`` (``"vllm.model_executor.models."``, ``"sglang.srt.models."``) it imports from that does (Phi-3's and
    Mistral's classes extend Llama's; SGLang's Ernie 4.5 uses Llama's attention), with a pairing the importing file
    passes down (SGLang's Ernie: ``rope_is_neox_style``) or sets on the built module (vLLM's Ernie) read there."""
    import os

    found = facts(path, get_rope, scaling_name)
    if found["calls"]:
        return found
    with open(path, encoding="utf-8") as file:
        tree = ast.parse(file.read())
    imports = [node for node in tree.body if isinstance(node, ast.ImportFrom) and node.module]
    # a module it takes an attention class from first (Ernie takes an MLP from DeepSeek's, its attention from Llama's)
    imports.sort(key=lambda node: not any("Attention" in alias.name for alias in node.names))
    for node in imports:
        if node.level == 1 or node.module.startswith(package):
            other = os.path.join(os.path.dirname(path), node.module.removeprefix(package) + ".py")
            if not os.path.isfile(other):
                continue
            followed = facts(other, get_rope, scaling_name)
            if followed["calls"]:
                param = followed.get("neox_param")
                passed = _caller_value(tree, param) if param else {}
                passed = _assigned_pairing(tree) or passed  # a pairing set on the built module wins
                if "neox" in passed or "neox_config" in passed:  # the importing file decides
                    followed.pop("neox_config", None)
                    followed.update(passed)
                return followed
    return found


def _assigned_pairing(tree) -> dict:
    """``{"neox": value}`` where the file sets ``….rotary_emb.is_neox_style = <constant>`` on modules it has built
    (vLLM's Ernie 4.5 builds Llama's attention, then turns its pairing to (2i, 2i + 1)); ``{}`` otherwise."""
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value, ast.Constant):
            continue
        if any(isinstance(t, ast.Attribute) and t.attr == "is_neox_style" for t in node.targets):
            return {"neox": bool(node.value.value)}
    return {}


def _parameter(node, function):
    """The name of ``function``'s parameter that ``node`` is (``None``: it is not one)."""
    if not isinstance(node, ast.Name):
        return None
    arguments = function.args
    names = [a.arg for a in arguments.posonlyargs + arguments.args + arguments.kwonlyargs]
    return node.id if node.id in names else None


def _caller_value(tree, param: str) -> dict:
    """What the calls in ``tree`` pass as keyword ``param``: ``{"neox": value}`` for a constant,
    ``{"neox_config": [key, default, negated]}`` for ``getattr(config, key, default)`` or its ``not`` (directly or
    through a local name),
    ``{}`` where no call in ``tree`` passes it in a form read here."""
    for function in ast.walk(tree):
        if not isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for call in ast.walk(function):
            if not isinstance(call, ast.Call):
                continue
            for keyword in call.keywords:
                if keyword.arg == param:
                    return _read_passed(keyword.value, function) or {}
    return {}


def _read_passed(node, function) -> dict | None:
    """What ``node`` (an argument in ``function``) gives as the pairing, in :func:`_caller_value`'s forms; ``None``
    where it is none of them."""
    if isinstance(node, ast.Constant):
        return {"neox": bool(node.value)}
    if isinstance(node, ast.Name):
        for child in ast.walk(function):
            if isinstance(child, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == node.id for t in child.targets
            ):
                return _read_passed(child.value, function)
        return None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = _read_passed(node.operand, function) or {}
        if "neox_config" in inner:
            key, default, negated = inner["neox_config"]
            return {"neox_config": [key, default, not negated]}
        return {"neox": not inner["neox"]} if "neox" in inner else None
    is_getattr = isinstance(node, ast.Call) and _name(node.func) == "getattr" and len(node.args) == 3
    if is_getattr and isinstance(node.args[1], ast.Constant) and isinstance(node.args[2], ast.Constant):
        return {"neox_config": [node.args[1].value, node.args[2].value, False]}
    return None


def _name(node) -> str:
    return node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else ""


def _passed(node) -> bool:
    return node is not None and not (isinstance(node, ast.Constant) and node.value is None)


def _constant(node, function, default):
    """The constant value of ``node``: itself, the constants a local name is assigned (the first), or the default
    of the function parameter it names; ``None`` where it is none of these."""
    if node is None:
        return default
    if isinstance(node, ast.Constant):
        return node.value
    if not isinstance(node, ast.Name):
        return None
    for child in ast.walk(function):
        named = isinstance(child, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == node.id for t in child.targets
        )
        if named and isinstance(child.value, ast.Constant):
            return child.value.value
    arguments = function.args
    positional = arguments.posonlyargs + arguments.args
    for arg, value in zip(positional[len(positional) - len(arguments.defaults) :], arguments.defaults, strict=True):
        if arg.arg == node.id and isinstance(value, ast.Constant):
            return value.value
    for arg, value in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True):
        if arg.arg == node.id and isinstance(value, ast.Constant):
            return value.value
    return None


def sglang_model_file(models_dir: str, architecture: str):
    """The SGLang model file whose ``EntryClass`` names ``architecture`` (``None``: none does)."""
    import os

    for name in sorted(os.listdir(models_dir)):
        if not name.endswith(".py"):
            continue
        path = os.path.join(models_dir, name)
        with open(path, encoding="utf-8") as file:
            source = file.read()
        if "EntryClass" not in source or architecture not in source:
            continue
        for node in ast.parse(source).body:
            if isinstance(node, ast.Assign) and any(_name(t) == "EntryClass" for t in node.targets):
                names = {_name(n) for n in ast.walk(node.value)}
                if architecture in names:
                    return path
    return None
