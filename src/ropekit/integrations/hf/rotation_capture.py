"""transformers' own rotation of attention layers, captured from a real forward of its model (the reference of
``ropekit engines`` and of ``extend``'s preservation check).

A short forward of the model records, for each attention layer asked for, the first call its modeling file makes to its own rotation
function (``apply_rotary_pos_emb``, ``apply_rotary_emb``, ``apply_rotary_pos_emb_interleave``, ...) and the calls
of its rotary module (``*RotaryEmbedding``) whose outputs that function is given. The function is then replayed on
basis vectors, with the rotary module's outputs for each served length (``position_ids`` 0 … n − 1, a fresh copy of
the module per length, so a length-following method starts from its original state): row j of the result is the
rotation of e_j. Whatever the modeling file does lives in that function and that module: partial rotary, the
pairing (halves, interleaved pairs, Cohere's and GLM's repeated tables, DeepSeek's permutation into halves) and the
attention factor on cos and sin.

The rotation is read back in the input's coordinates (C(p) = M(p)·M(0)ᵀ / |M(0)| per column: a permutation of the
output, as DeepSeek's interleave applies to q and k alike, cancels in q·k and here). The pair of dimension 0 (1 or
d/2) gives the pairing; the table is A·cos, A·sin of each pair in that pairing.
"""

from __future__ import annotations

import copy
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

#: tokens of the recording forward: a length no tiny model has as its head count or head size
FORWARD_TOKENS = 7


@dataclass
class _Recorded:
    """One recorded call: the callable, its arguments and its output."""

    target: Any
    args: tuple
    kwargs: dict
    output: Any = None


class RotationCapture:
    """The rotation function each asked-for attention layer calls, and the rotary-module calls it reads, recorded in
    one forward.

    Attributes:
        apply_calls: per asked-for layer (its position in ``attentions``), its first rotation call; a layer that
            calls none (a NoPE layer) has no entry.
    """

    def __init__(self, model: Any, attentions: Any) -> None:
        self.model = model
        self.attentions = list(attentions) if isinstance(attentions, (list, tuple)) else [attentions]
        self.rotary_calls: list[_Recorded] = []
        self.apply_calls: dict[int, _Recorded] = {}
        self.replayed: dict[tuple, dict] = {}

    @property
    def apply_call(self) -> _Recorded | None:
        """The first asked-for layer's rotation call."""
        return self.apply_calls.get(0)

    def record(self, *, required: bool = True, tokens: Any = None) -> RotationCapture:
        """Run the forward (on ``tokens``, default :data:`FORWARD_TOKENS` zeros) with the hooks in place; raise
        ``ValueError`` where ``required`` and the first asked-for layer called no rotation function."""
        import torch

        state = {"in_layer": None, "depth": 0}
        patched = self._patch_functions(state)
        handles = []
        for number, attention in enumerate(self.attentions):
            handles.append(attention.register_forward_pre_hook(lambda *a, n=number: state.update(in_layer=n)))
            handles.append(attention.register_forward_hook(lambda *a: state.update(in_layer=None)))
        for module in self.model.modules():
            if type(module).__name__.endswith("RotaryEmbedding"):
                handles.append(module.register_forward_hook(self._rotary_hook(module), with_kwargs=True))
        try:
            with torch.no_grad():
                self.model(torch.zeros(1, FORWARD_TOKENS, dtype=torch.long) if tokens is None else tokens)
        finally:
            for handle in handles:
                handle.remove()
            for module, name, original in patched:
                setattr(module, name, original)
        if required and self.apply_call is None:
            raise ValueError(f"{type(self.model).__name__}: no RoPE function of its modeling file ran in its attention")
        return self

    def _rotary_hook(self, module: Any):
        def hook(_module, args, kwargs, output):
            self.rotary_calls.append(_Recorded(module, args, kwargs, output))

        return hook

    def _patch_functions(self, state: dict) -> list[tuple[Any, str, Any]]:
        """Wrap every ``apply*rotary*`` / ``apply*rope*`` function of the model's and the attention's modeling files;
        the outermost call made inside each asked-for attention layer is recorded."""
        modules = {sys.modules[type(self.model).__module__]}
        modules |= {sys.modules[type(attention).__module__] for attention in self.attentions}
        patched = []
        for module in modules:
            for name in dir(module):
                low = name.lower()
                function = getattr(module, name)
                if not (callable(function) and "apply" in low and ("rotary" in low or "rope" in low)):
                    continue
                if isinstance(function, type):
                    continue
                patched.append((module, name, function))
                setattr(module, name, self._wrap(function, state))
        return patched

    def _wrap(self, function: Any, state: dict):
        def wrapped(*args, **kwargs):
            state["depth"] += 1
            try:
                output = function(*args, **kwargs)
            finally:
                state["depth"] -= 1
            layer = state["in_layer"]
            if layer is not None and state["depth"] == 0 and layer not in self.apply_calls:
                self.apply_calls[layer] = _Recorded(function, args, kwargs, output)
            return output

        return wrapped


@dataclass
class Rotation:
    """transformers' rotation of the compared layer, replayable at any served length.

    Attributes:
        capture: what the forward recorded.
        sources: per argument of the rotation function, ``(rotary call index, output index)`` where it is an output
            of the rotary module (replaced per served length), else ``None``.
    """

    capture: RotationCapture
    sources: list[tuple[int, int | None] | None]
    layer: int = 0

    def matrices(self, served: int, positions: np.ndarray) -> np.ndarray:
        """float64 ``(positions, W, W)``: row j is the rotation of e_j at each position (W: the width the modeling
        file passes), run at ``served`` tokens."""
        import torch

        call = self.capture.apply_calls[self.layer]
        fresh = self._rotary_outputs(served, positions)
        q = _seq_axis(call.args[0])
        width = call.args[0].shape[-1]
        shape = [1] * call.args[0].dim()
        shape[0], shape[q], shape[-1] = width, len(positions), width
        probe = torch.zeros(shape, dtype=call.args[0].dtype)
        index = [slice(None)] * len(shape)
        for j in range(width):
            index[0], index[-1] = j, j
            probe[tuple(index)] = 1.0
        args = [probe, probe.clone(), *call.args[2:]]
        for i, source in enumerate(self.sources):
            if source is not None:
                args[i] = fresh[source]
        with torch.no_grad():
            out = call.target(*args, **call.kwargs)
        out = out[0] if isinstance(out, tuple) else out
        out = out.movedim(q, 1).reshape(width, len(positions), width)  # (basis j, position, output dim)
        return out.transpose(0, 1).double().numpy()

    def rope_key(self) -> str | None:
        """The ``layer_type`` the layer's rotary call was given (a key of the rope dict: a layer type, or DeepSeek-V4's
        ``main``/``compress``, which its model class chooses per layer), recorded in the forward; ``None`` where the
        call names none."""
        for source in self.sources:
            if source is not None:
                kind = self.capture.rotary_calls[source[0]].kwargs.get("layer_type")
                return kind if isinstance(kind, str) else None
        return None

    def _rotary_outputs(self, served: int, positions: np.ndarray) -> dict:
        import torch

        needed = {source[0] for source in self.sources if source is not None}
        fresh = {}
        cache = self.capture.replayed  # layers that read one rotary call share its replay
        for number in needed:
            key = (number, served, tuple(int(p) for p in positions))
            if key in cache:
                fresh.update(cache[key])
                continue
            recorded = self.capture.rotary_calls[number]
            module = copy.deepcopy(recorded.target)
            args = [_positions_like(a, served) for a in recorded.args]
            kwargs = {k: _positions_like(v, served) for k, v in recorded.kwargs.items()}
            with torch.no_grad():
                output = module(*args, **kwargs)
            outputs = output if isinstance(output, tuple) else (output,)
            before = recorded.output if isinstance(recorded.output, tuple) else (recorded.output,)
            picked = torch.as_tensor(positions)
            replay = {}
            for k, tensor in enumerate(outputs):
                replay[(number, k if isinstance(output, tuple) else None)] = tensor.index_select(
                    _seq_axis(before[k]), picked
                )
            cache[key] = replay
            fresh.update(replay)
        return fresh


def capture(model: Any, attention: Any) -> Rotation:
    """The compared layer's rotation (:class:`Rotation`) of ``model``, recorded in a short forward."""
    return rotation_of(RotationCapture(model, attention).record(), 0)


def capture_layers(model: Any, attentions: list[Any]) -> list[Rotation | None]:
    """Each layer's rotation (:class:`Rotation`), recorded in one short forward; ``None`` for a layer that calls no
    rotation function (a NoPE layer)."""
    recorded = RotationCapture(model, attentions).record(required=False)
    return [rotation_of(recorded, n) if n in recorded.apply_calls else None for n in range(len(attentions))]


def rotation_of(recorded: RotationCapture, layer: int) -> Rotation:
    """The :class:`Rotation` of asked-for layer ``layer`` of a recorded forward."""
    sources = [_source_of(argument, recorded.rotary_calls) for argument in recorded.apply_calls[layer].args]
    if not any(sources):
        raise ValueError(f"{type(recorded.model).__name__}: its RoPE function is not given its rotary module's output")
    return Rotation(recorded, sources, layer)


def layers_of(model):
    """``(the decoder's module, its list of layers)`` of a transformers causal LM (``model.model``, GPT-NeoX's
    ``gpt_neox``, ...: its ``base_model``)."""
    import torch

    for found in (getattr(model, "model", None), model.base_model):
        for decoder in (found, getattr(found, "language_model", None)):  # a multimodal model's text part
            layers = getattr(decoder, "layers", None)
            if isinstance(layers, torch.nn.ModuleList):
                return decoder, layers
    raise ValueError(f"{type(model).__name__}: no decoder layers found (base model {type(model.base_model).__name__})")


def attention_of(layer):
    """The attention module of one decoder layer (``self_attn``, GPT-NeoX's ``attention``, ...)."""
    for name in ("self_attn", "attention", "attn"):
        if hasattr(layer, name):
            return getattr(layer, name)
    raise ValueError(f"{type(layer).__name__}: no attention module (self_attn, attention, attn)")


def _source_of(argument: Any, calls: list[_Recorded]) -> tuple[int, int | None] | None:
    import torch

    if not isinstance(argument, torch.Tensor):
        return None
    for number in range(len(calls) - 1, -1, -1):  # the latest call of the rotary module made these
        output = calls[number].output
        outputs = output if isinstance(output, tuple) else (output,)
        for k, tensor in enumerate(outputs):
            same = tensor is argument or (tensor.shape == argument.shape and torch.equal(tensor, argument))
            if isinstance(tensor, torch.Tensor) and same:
                return number, (k if isinstance(output, tuple) else None)
    return None


def _positions_like(value: Any, served: int) -> Any:
    """``value``, or the positions 0 … served − 1 where it is the forward's position ids."""
    import torch

    if isinstance(value, torch.Tensor) and not value.is_floating_point() and value.shape[-1] == FORWARD_TOKENS:
        return torch.arange(served, dtype=value.dtype).expand(*value.shape[:-1], served).clone()
    return value


def _seq_axis(tensor: Any) -> int:
    """The sequence axis of a recorded tensor: the last axis of length :data:`FORWARD_TOKENS` before the last."""
    axes = [i for i in range(tensor.dim() - 1) if tensor.shape[i] == FORWARD_TOKENS]
    if not axes:
        raise ValueError(f"no sequence axis of length {FORWARD_TOKENS} in a tensor of shape {tuple(tensor.shape)}")
    return axes[-1]


def pair_table(matrices: np.ndarray, half: int) -> tuple[np.ndarray, bool]:
    """``(table, interleaved)``: the ``(positions, half, 2)`` A·cos, A·sin of each pair, read in the input's
    coordinates, and whether the pairs are (2i, 2i + 1) (else (i, i + half)). ``matrices[0]`` is position 0."""
    zero = matrices[0]
    norms = np.linalg.norm(zero, axis=1)  # |R(0) e_k| = A on the rotating dims
    inner = np.einsum("pjd,kd->pjk", matrices, zero) / norms[None, None, :]  # C[p, j, k] = A(p)·Rot(p)[k, j]
    partner = int(np.argmax(np.abs(inner[:, 0, 1:]).max(axis=0))) + 1
    if partner not in (1, half):
        raise ValueError(f"dimension 0 rotates with dimension {partner}: neither 1 nor d/2 = {half}")
    interleaved = partner == 1 and half != 1
    first = np.arange(0, 2 * half, 2) if interleaved else np.arange(half)
    second = first + 1 if interleaved else first + half
    table = np.stack([inner[:, first, first], inner[:, first, second]], axis=-1)
    return table, interleaved
