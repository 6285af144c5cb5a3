"""Run inside the vLLM environment (standard library only): what an engine's model file passes to its ``get_rope``.

The file is read as source (``ast``), not imported: for each ``get_rope(...)`` call, its arguments bound to the
names of the engine's own ``get_rope`` signature, and from them

* ``neox``: the ``is_neox_style`` it passes (a constant, a local name assigned constants, or a parameter's default;
  absent: the signature's default);
* ``scaling``: whether it passes the config's scaling at all (``rope_parameters`` in vLLM, ``rope_scaling`` in
  SGLang; absent or ``None``: the engine runs plain RoPE);
* ``dual_chunk``: whether it passes ``dual_chunk_attention_config``;
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
            if isinstance(node, ast.Call) and _name(node.func) == "get_rope":
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
