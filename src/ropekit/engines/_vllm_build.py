"""Run inside the vLLM environment: vLLM's own model class for a folder, built on CPU as vLLM builds it, with every
``get_rope`` call it makes recorded, and the rotary module of the compared layer as built (what the class sets on it
after building included: vLLM's Ernie 4.5 turns its pairing to (2i, 2i + 1) on the built module).

The class is the one vLLM's registry resolves for the folder (``ModelRegistry.resolve_model_cls`` on a
``ModelConfig`` of the folder with the launch line's ``--hf-overrides`` and ``--max-model-len``), built under a
``VllmConfig`` in a one-process gloo group. The layers that need an accelerator or a kernel to be built (attention
backends, fused MoE, Mamba mixers) are replaced by empty modules as a build meets them (:func:`build`): a failing
``__init__`` of a class in ``vllm/model_executor/layers`` (never the rotary classes, never a class of the model file
itself) is stubbed and the build tried again. ``get_rope`` raising is the class refusing the configuration
(:class:`Refused`); any other failure means the class could not be built here (the probe then reads the model file
as source, and says so). Standard library at import; vLLM and torch inside the functions.
"""

import contextlib
import functools
import os
import sys
import tempfile
import traceback

#: where the classes a build may stub live (never the rotary classes)
LAYERS = "vllm/model_executor/layers/"
#: how many classes one build may stub before it gives up
MOST_STUBS = 12

_STUBS: dict = {}  # original class or function → its stand-in, kept for the whole process


class Refused(Exception):
    """The class's ``get_rope`` call raised: vLLM refuses this configuration (``file``: the model file)."""

    file = None


class Unbuilt(Exception):
    """The class could not be built here (its error, and the classes stubbed on the way)."""


def built(request: dict) -> dict:
    """``{"model": the built model, "class", "architecture", "module", "calls", "stubbed"}`` for the request's
    ``folder`` (``hf_overrides``, ``max_model_len``), or ``{"backend": "transformers"}`` where vLLM resolves the
    architecture to its Transformers backend. ``calls``: every ``get_rope`` call, ``(arguments, returned module)``.

    Raises:
        Refused: the class's ``get_rope`` raised.
        Unbuilt: anything else failed.
    """
    from vllm.config import set_current_vllm_config
    from vllm.model_executor.models.registry import ModelRegistry

    missing = unimportable(request.get("architecture") or "")
    if missing is not None:
        raise Unbuilt(missing)
    config = vllm_config(request)
    model_config = config.model_config
    model_class, architecture = ModelRegistry.resolve_model_cls(model_config.architectures, model_config)
    if model_class.__name__.startswith("Transformers"):
        return {"backend": "transformers"}
    import torch

    torch.set_default_dtype(torch.float32)
    module = sys.modules[model_class.__module__]
    with set_current_vllm_config(config):
        group()
        try:
            model, calls, stubbed = build(model_class, config)
        except Refused as error:
            error.file = module.__file__
            raise
    return {
        "model": model,
        "class": model_class.__name__,
        "architecture": architecture,
        "file": module.__file__,
        "calls": calls,
        "stubbed": (["torchvision (empty modules)"] if torchvision_stood_in() else []) + stubbed,
    }


@functools.cache
def unimportable(architecture: str) -> str | None:
    """Why vLLM's model file for ``architecture`` does not import here (a package its imports need is not in this
    environment), ``None`` where it does or the registry has no class of that name; asked once a process, before
    vLLM's own inspection (which says only that the class "failed to be inspected")."""
    from vllm.model_executor.models.registry import ModelRegistry

    registered = ModelRegistry.models.get(architecture)
    if registered is None:
        return None
    try:
        registered.load_model_cls()
    except ImportError as error:
        if getattr(error, "name", None) != "torchvision" or torchvision_stood_in():
            return f"{type(error).__name__}: {error}"
        stand_in_torchvision()
    return imported_here(architecture) if torchvision_stood_in() else None


def imported_here(architecture: str) -> str | None:
    """Import ``architecture``'s class in this process (the torchvision stand-in in place) and register it as
    imported, so that vLLM inspects it here rather than in a fresh interpreter without the stand-in (every class
    from then on: a model file imported once in this process is not imported again); why not, as
    :func:`unimportable` says it."""
    from vllm.model_executor.models.registry import ModelRegistry, _RegisteredModel

    try:
        model_class = ModelRegistry.models[architecture].load_model_cls()
    except ImportError as error:
        return f"{type(error).__name__}: {error}"
    ModelRegistry.models[architecture] = _RegisteredModel.from_model_cls(model_class)
    return None


class _Absent:
    """Any attribute of the torchvision stand-in: usable as a name, a base class or an annotation; calling it raises."""

    def __init__(self, name: str):
        self._name = name

    def __getattr__(self, name: str):
        return _Absent(f"{self._name}.{name}")

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self._name} is a stand-in: torchvision is not installed here")

    def __mro_entries__(self, bases):
        return (object,)


def stand_in_torchvision() -> None:
    """Let ``import torchvision...`` succeed with empty modules (:class:`_Absent` attributes). vLLM's multimodal
    model files (Qwen3.5, Qwen3-VL) import transformers' image processors, which import torchvision at module level; its CPU build is not on the package index this
    machine reaches, and the text model's rotary never calls it. Installed after transformers has checked which
    packages exist, so transformers still takes torchvision as absent (its PIL processors), as vLLM does."""
    import importlib.abc
    import importlib.machinery
    import types

    import transformers  # noqa: F401  (its package check runs before the stand-in exists)

    class Module(types.ModuleType):
        def __getattr__(self, name: str):
            if name.startswith("__"):
                raise AttributeError(name)
            return _Absent(f"{self.__name__}.{name}")

    class Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        def find_spec(self, fullname, path, target=None):
            if fullname.split(".")[0] == "torchvision":
                return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
            return None

        def create_module(self, spec):
            return Module(spec.name)

        def exec_module(self, module):
            module.__path__ = []

    sys.meta_path.insert(0, Finder())


def torchvision_stood_in() -> bool:
    """Whether :func:`stand_in_torchvision` has run in this process."""
    return any(type(finder).__module__ == __name__ for finder in sys.meta_path)


def vllm_config(request: dict):
    """The ``VllmConfig`` vLLM serves the folder with: its ``ModelConfig`` (float32, no tokenizer) at the launch
    line's ``--max-model-len`` and ``--hf-overrides``, on CPU."""
    from vllm.config import DeviceConfig, ModelConfig, VllmConfig

    model_config = ModelConfig(
        model=request["folder"],
        dtype="float32",
        max_model_len=request["max_model_len"],
        hf_overrides=request.get("hf_overrides") or {},
        skip_tokenizer_init=True,
        enforce_eager=True,
    )
    return VllmConfig(model_config=model_config, device_config=DeviceConfig(device="cpu"))


def group() -> None:
    """A one-process gloo group with tensor and pipeline parallelism 1 (once a process), expert-parallel group
    included: initialised under a config without a model, for which vLLM creates every group (under a dense model's
    config it leaves the expert group out, and every MoE class built later in the process would fail to build)."""
    from vllm.config import DeviceConfig, VllmConfig, set_current_vllm_config
    from vllm.distributed import parallel_state

    if parallel_state.model_parallel_is_initialized():
        return
    with contextlib.redirect_stdout(sys.stderr), set_current_vllm_config(VllmConfig(device_config=DeviceConfig("cpu"))):
        path = os.path.join(tempfile.mkdtemp(prefix="ropekit-vllm-"), "group")
        parallel_state.init_distributed_environment(1, 0, f"file://{path}", 0, "gloo")
        parallel_state.initialize_model_parallel(1, 1)


def build(model_class, config) -> tuple:
    """``(model, get_rope calls, stubbed class names)``: ``model_class`` built under ``config``, each class of
    :data:`LAYERS` whose ``__init__`` fails replaced by an empty module and the build tried again."""
    import torch

    stubbed: list[str] = []
    while True:
        calls: list = []
        restore = record_get_rope(calls)
        try:
            with torch.device("cpu"):
                return model_class(vllm_config=config, prefix=""), calls, stubbed
        except Refused:
            raise
        except Exception as error:
            target = failing_layer(error)
            if target is None or len(stubbed) >= MOST_STUBS:
                why = f"{type(error).__name__}: {' '.join(str(error).split())[:300]}"
                raise Unbuilt(why + (f" (stubbed: {', '.join(stubbed)})" if stubbed else "")) from None
            stubbed.append(stub(target))
        finally:
            restore()


def record_get_rope(calls: list):
    """Wrap ``get_rope`` wherever a loaded vLLM module holds it: each call's arguments and the module it returns go
    to ``calls``; a call that raises raises :class:`Refused`. Returns what puts the original back."""
    from vllm.model_executor.layers import rotary_embedding

    original = rotary_embedding.get_rope

    def recorded(*args, **kwargs):
        try:
            module = original(*args, **kwargs)
        except Exception as error:
            raise Refused(f"{type(error).__name__}: {error}") from error
        calls.append(({"args": args, "kwargs": kwargs}, module))
        return module

    loaded = [m for name, m in list(sys.modules.items()) if name.startswith("vllm") and m is not None]
    holders = [m for m in loaded if vars(m).get("get_rope") is original]
    for holder in holders:
        holder.get_rope = recorded
    return lambda: [setattr(holder, "get_rope", original) for holder in holders]


def failing_layer(error: BaseException):
    """The class (or factory function) of :data:`LAYERS` outside the rotary package whose call the failure is
    in, outermost first; ``None`` where the failure is elsewhere (the model file's own code)."""
    for frame, _ in traceback.walk_tb(error.__traceback__):
        path = frame.f_code.co_filename.replace(os.sep, "/")
        if LAYERS not in path or "/rotary_embedding/" in path:
            continue
        owner = frame.f_locals.get("self")
        if frame.f_code.co_name == "__init__" and owner is not None:
            return type(owner)
        found = frame.f_globals.get(frame.f_code.co_name)
        if callable(found):
            return found
        if owner is not None:
            return type(owner)
    return None


def stub(target) -> str:
    """Replace ``target`` (a class or a function) by an empty module class wherever a loaded vLLM module holds it;
    its name."""
    import torch

    class Stub(torch.nn.Module):
        def __init__(self, *args, **kwargs):
            super().__init__()

        def forward(self, *args, **kwargs):
            raise RuntimeError(f"{target.__name__} is stubbed: it does not run here")

    Stub.__name__ = Stub.__qualname__ = f"Stubbed{target.__name__}"
    _STUBS[target] = Stub
    for module in [m for name, m in list(sys.modules.items()) if name.startswith("vllm") and m is not None]:
        for name, value in list(vars(module).items()):
            if value is target:
                setattr(module, name, Stub)
    return f"{target.__module__}.{target.__name__}"


def compared_rotary(found: dict, layer: int):
    """``(the rotary module of decoder layer ``layer``, its get_rope arguments)``: the rotary module built inside
    that layer, else (a class that builds one for the whole model) the one its get_rope calls returned; its
    arguments ``None`` where no recorded call returned it."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbeddingBase

    model = found["model"]
    rope = None
    layers = decoder_layers(model)
    if layers is not None and layer < len(layers):
        rope = next((m for m in layers[layer].modules() if isinstance(m, RotaryEmbeddingBase)), None)
    if rope is None:
        rope = next((m for m in model.modules() if isinstance(m, RotaryEmbeddingBase)), None)
    if rope is None and found["calls"]:
        rope = found["calls"][0][1]
    arguments = next((args for args, module in found["calls"] if module is rope), None)
    return rope, arguments


def decoder_layers(model):
    """The model's list of decoder layers (the longest ``ModuleList`` named ``layers``), ``None`` without one."""
    import torch

    lists = [m for name, m in model.named_modules() if name.endswith("layers") and isinstance(m, torch.nn.ModuleList)]
    return max(lists, key=len) if lists else None
