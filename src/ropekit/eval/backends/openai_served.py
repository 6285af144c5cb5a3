"""What an OpenAI-compatible server says about the model it serves: which one is evaluated (``served_model``, required
when it lists several), its context, and the record of everything that decides an answer (the answer journal's
identity).

Servers report different things, and ropekit records what each reports: ``/v1/models`` (vLLM's ``max_model_len``,
``root``; llama.cpp's ``meta``: its training context, vocabulary, parameters) and llama.cpp's ``/props`` (the
slot's context ``n_ctx``, the model's path, the build, any RoPE setting it names). Fields that change on every call
(``created``, vLLM's ``permission`` ids) are left out.
"""

from __future__ import annotations

from typing import Any

from ropekit.eval.backends.openai_client import ServerError

#: the request settings every completion is sent with (greedy, no penalty)
REQUEST = {"temperature": 0.0, "top_k": 1, "repeat_penalty": 1.0}
#: /models fields that differ between two calls to the same server
VOLATILE = frozenset({"created", "permission", "status"})


class ServedModelError(ServerError):
    """``served_model`` is missing where the server lists several models, or names none it lists."""

    argument = "served_model"


def choose_model(url: str, listed: Any, served_model: str | None) -> dict[str, Any]:
    """The ``/models`` entry to evaluate: ``served_model``'s, or the only one listed.

    Raises:
        ServerError: the server lists no model.
        ServedModelError: several are listed and ``served_model`` is ``None``, or it is not among them.
    """
    cards = [card for card in (listed if isinstance(listed, list) else []) if isinstance(card, dict) and "id" in card]
    if not cards:
        raise ServerError(f"{url}/models lists no model")
    names = [str(card["id"]) for card in cards]
    shown = ", ".join(repr(name) for name in names[:10]) + (" ..." if len(names) > 10 else "")
    if served_model is None:
        if len(cards) > 1:
            raise ServedModelError(f"{url} serves {len(cards)} models ({shown}); name the one to evaluate")
        return cards[0]
    if served_model not in names:
        raise ServedModelError(f"{url} does not serve {served_model!r}; it serves {shown}")
    return cards[names.index(served_model)]


def server_props(client: Any) -> dict[str, Any]:
    """llama.cpp's ``/props`` (the slot's context, the model path, the build, RoPE settings), or ``{}`` where the
    server has none (or ``client`` cannot ask)."""
    getter = getattr(client, "get_root", None)
    if getter is None:
        return {}
    try:
        props = getter("/props")
    except ServerError:
        return {}
    found: dict[str, Any] = {}
    settings = props.get("default_generation_settings")
    n_ctx = props.get("n_ctx", settings.get("n_ctx") if isinstance(settings, dict) else None)
    if isinstance(n_ctx, int):
        found["n_ctx"] = n_ctx
    for key in ("model_path", "build_info"):
        if isinstance(props.get(key), str):
            found[key] = props[key]
    found.update(_rope_settings(props))
    return found


def max_context(card: dict[str, Any], props: dict[str, Any]) -> int | None:
    """The served context: the /models entry's (vLLM's ``max_model_len``, ``meta.n_ctx``...), else ``/props``'s."""
    for key in ("max_model_len", "context_length", "max_context_length", "n_ctx"):
        if isinstance(card.get(key), int):
            return card[key]
    meta = card.get("meta") or {}
    if isinstance(meta, dict) and isinstance(meta.get("n_ctx"), int):
        return meta["n_ctx"]
    return props.get("n_ctx") if isinstance(props.get("n_ctx"), int) else None


def server_identity(url: str, card: dict[str, Any], props: dict[str, Any], tokenizer: str) -> dict[str, Any]:
    """Everything that decides an answer, as the journal records it: the URL, the served model's id and what the
    server reports about it, the tokenizer's SHA-256 and the request settings."""
    reported = {key: value for key, value in card.items() if key not in VOLATILE}
    return {
        "url": url.rstrip("/"),
        "served_model": str(card["id"]),
        "models_entry": reported,
        "props": props,
        "tokenizer_sha256": tokenizer,
        "request": REQUEST,
    }


def _rope_settings(value: Any, prefix: str = "") -> dict[str, Any]:
    """Every scalar under a key that names RoPE or the context (``rope_freq_base``, ``yarn_*``, ``n_ctx_train``)."""
    found: dict[str, Any] = {}
    if not isinstance(value, dict):
        return found
    for key, inner in value.items():
        name = f"{prefix}{key}"
        if isinstance(inner, dict):
            found.update(_rope_settings(inner, f"{name}."))
        elif any(word in str(key).lower() for word in ("rope", "yarn", "n_ctx")) and isinstance(
            inner, (int, float, str, bool)
        ):
            found[name] = inner
    return found
