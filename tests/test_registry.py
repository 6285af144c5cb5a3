"""The one registry type, and adding a scaling method, an attention method or a task in one file.

Each toy below is defined in this file alone, registered by a fixture (and removed afterwards), and then reached by
name through the library and through the CLI's name validation, checked against an independent oracle: a closed
form, torch's own masked attention, and a generator rebuilt from the documented seed.
"""

from __future__ import annotations

import json
import sys
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from ropekit._registry import Registry, UnknownName, declared_names
from ropekit.cli.app import app

runner = CliRunner()


# -- the registry type -------------------------------------------------------------------------------------------


def test_register_get_order_aliases_and_the_decorator():
    registry: Registry[Any] = Registry("colour")
    registry.register("red", 1, aliases=("r",))
    assert registry.register("green")(len) is len  # the decorator returns what it decorates
    registry.register("blue", 3)
    assert registry.names() == ("red", "green", "blue") == tuple(registry)
    assert registry.get("r") == registry["red"] == 1 and registry.get("green") is len
    assert "blue" in registry and "r" not in registry and len(registry) == 3
    assert registry.items() == [("red", 1), ("green", len), ("blue", 3)]
    with pytest.raises(ValueError, match="already registered"):
        registry.register("red", 4)
    with pytest.raises(ValueError, match="already registered"):
        registry.register("pink", 4, aliases=("r",))
    registry.unregister("red")
    assert registry.names() == ("green", "blue") and "r" not in registry.aliases


def test_unknown_name_is_a_structured_value_error_listing_the_names():
    registry: Registry[int] = Registry("colour")
    registry.register("red", 1)
    registry.register("blue", 2)
    with pytest.raises(UnknownName) as info:
        registry.get("pink")
    assert str(info.value) == "unknown colour 'pink'; available: red, blue"
    assert (info.value.kind, info.value.name, info.value.available) == ("colour", "pink", ("red", "blue"))
    assert isinstance(info.value, ValueError) and isinstance(info.value, LookupError)
    with pytest.raises(KeyError):
        registry["pink"]


def test_lazy_entries_resolve_on_first_get():
    registry: Registry[Any] = Registry("codec")
    registry.register_lazy("json", "json:dumps")
    registry.register("first", 1)
    assert registry.names() == ("json", "first")  # listed without resolving
    assert registry.get("json") is json.dumps
    with pytest.raises(ValueError, match="module:attr"):
        registry.register_lazy("bad", "json.dumps")


@pytest.fixture
def home_package(tmp_path, monkeypatch) -> Iterator[str]:
    """A package ``toyhome`` with a module that registers itself, one that only declares a name, one behind a lazy
    entry that registers itself when imported, and one that fails on import (it must never be imported)."""
    package = tmp_path / "toyhome"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from ropekit._registry import Registry\n"
        "THINGS = Registry('thing', home='toyhome', marker='@THINGS.register')\n"
        "LAZY = Registry('lazy thing')\n"
        "LAZY.register_lazy('gamma', 'toyhome.gamma:Gamma')\n"
    )
    (package / "alpha.py").write_text(
        "from toyhome import THINGS\n\n@THINGS.register('alpha')\nclass Alpha:\n    label = 'alpha'\n"
    )
    (package / "beta.py").write_text("class Beta:\n    label = 'beta'\n")
    (package / "gamma.py").write_text("from toyhome import LAZY\n\n@LAZY.register('gamma')\nclass Gamma:\n    pass\n")
    (package / "heavy.py").write_text("raise ImportError('heavy modules stay unimported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    yield "toyhome"
    for name in [m for m in sys.modules if m == "toyhome" or m.startswith("toyhome.")]:
        del sys.modules[name]


def test_a_home_package_registers_its_files_on_first_need(home_package):
    import importlib

    things = importlib.import_module(home_package).THINGS
    assert "toyhome.alpha" not in sys.modules
    assert things.names() == ("alpha",)  # the marked module only: heavy.py was not imported
    assert things.get("alpha").__module__ == "toyhome.alpha"
    assert declared_names(home_package, "label") == ("alpha", "beta")  # read from source, nothing imported
    assert "toyhome.beta" not in sys.modules and "toyhome.heavy" not in sys.modules


def test_a_lazy_entrys_module_may_register_it_itself(home_package):
    import importlib

    lazy = importlib.import_module(home_package).LAZY
    assert lazy.names() == ("gamma",) and "toyhome.gamma" not in sys.modules
    assert lazy.get("gamma").__name__ == "Gamma"  # its decorator replaced the placeholder, not a second entry
    assert "toyhome.gamma" in sys.modules and lazy.get("gamma") is sys.modules["toyhome.gamma"].Gamma
    with pytest.raises(ValueError, match="'gamma' is already registered"):
        lazy.register("gamma", 1)


def test_help_names_are_the_registered_ones():
    """What ``--help`` reads from the source is what importing the packages registers."""
    from ropekit.attention import list_attentions
    from ropekit.scaling import list_scalings

    assert sorted(declared_names("ropekit.scaling", "rope_type")) == sorted(list_scalings())
    assert sorted(declared_names("ropekit.attention", "name")) == sorted(list_attentions())


# -- a toy scaling method ----------------------------------------------------------------------------------------


@pytest.fixture
def toy_scaling() -> Iterator[str]:
    from ropekit.config import RopeConfig
    from ropekit.scaling import Frequencies, ScalingConfig, inv_freq, register_scaling
    from ropekit.scaling.registry import SCALINGS

    @dataclass(frozen=True, kw_only=True)
    class Stretch(ScalingConfig):
        rope_type = "toy-stretch"  # every pair divided by the factor
        factor: float

    @register_scaling(Stretch)
    def stretch_frequencies(spec: Stretch, rope: RopeConfig, *, seq_len: int | None = None) -> Frequencies:
        return Frequencies(inv_freq(rope.dim, rope.base) / spec.factor, 1.0)

    yield Stretch.rope_type
    SCALINGS.unregister(Stretch.rope_type)


def test_a_toy_scaling_method_is_usable_by_name(toy_scaling):
    from ropekit.cli.method_options import parse_methods
    from ropekit.config import RopeConfig
    from ropekit.eval.methods import scaling_for
    from ropekit.scaling import frequencies, make_scaling

    oracle = 10000.0 ** (-np.arange(0, 16, 2) / 16) / 4  # θ_i = b^(−2i/d) / s
    rope = RopeConfig(16, scaling=make_scaling(toy_scaling, factor=4))
    np.testing.assert_allclose(frequencies(rope).inv_freq, oracle, rtol=1e-15)
    assert scaling_for(toy_scaling, factor=4, train_length=256) == rope.scaling
    assert parse_methods(f"none,{toy_scaling}") == ("none", toy_scaling)
    result = runner.invoke(
        app, ["frequencies", "--head-dim", "16", "--scaling", toy_scaling, "--factor", "4", "--json"]
    )
    assert result.exit_code == 0, result.output
    np.testing.assert_allclose(json.loads(result.stdout)["inv_freq"], oracle, rtol=1e-15)


# -- a toy attention method --------------------------------------------------------------------------------------


@pytest.fixture
def toy_attention() -> Iterator[str]:
    from ropekit.attention.registry import ATTENTIONS, AttentionConfig, Region, band, positive_int, register

    @register
    @dataclass(frozen=True, kw_only=True)
    class NearOnly(AttentionConfig):
        name = "toy_near_only"  # attend only to the ``window`` nearest keys, at their true positions
        window: int

        def __post_init__(self) -> None:
            positive_int("window", self.window)

        @classmethod
        def defaults(cls, train_length: int, length: int) -> dict[str, Any]:
            return {"window": train_length}

        def regions(self) -> tuple[Region, ...]:
            return (band(self.window),)

        def max_relative(self, length: int) -> float:
            return float(min(length, self.window) - 1)

    yield NearOnly.name
    ATTENTIONS.unregister(NearOnly.name)


def test_a_toy_attention_method_is_usable_by_name(toy_attention):
    from ropekit.attention import attend
    from ropekit.cli.method_options import parse_methods
    from ropekit.eval.methods import attention_for, check_params, split_method
    from ropekit.functional import apply_rope, cos_sin

    method = attention_for(f"yarn+{toy_attention}", train_length=8, length=40, params={"window": 8})
    assert split_method(f"yarn+{toy_attention}") == ("yarn", toy_attention) and method.window == 8
    check_params((toy_attention,), {"window": 8})
    assert parse_methods(f"{toy_attention},yarn+{toy_attention}") == (toy_attention, f"yarn+{toy_attention}")

    freqs = 10000.0 ** (-torch.arange(0, 16, 2, dtype=torch.float64) / 16)
    cos, sin = cos_sin(torch.arange(40), freqs, dtype=torch.float64)
    q, k, v = (apply_rope(x, cos, sin, seq_dim=2) for x in torch.randn(3, 1, 2, 40, 16, dtype=torch.float64))
    i, j = torch.arange(40)[:, None], torch.arange(40)[None, :]
    oracle = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=(j <= i) & (i - j < 8))
    assert float((attend(q, k, v, method, freqs) - oracle).abs().max()) < 1e-12


# -- a toy task --------------------------------------------------------------------------------------------------


def echo_sample(name, rng, length, pieces, *, haystack, depth, include_answer, digits: int = 5):
    """Noise, one needle ``The code is NNNNN.`` at ``depth`` (drawn when ``None``), and the question for it."""
    from ropekit.synthetic.base import Question, Sample, answer_room, budget_for, insert_needles

    code = "".join(str(d) for d in rng.integers(0, 10, digits))
    needle, target = pieces.ids(f"The code is {code}. "), pieces.ids(f" {code}")
    question = Question(pieces.ids("\nWhat is the code? It is"), (code,), target, budget_for(target))
    where = float(rng.random()) if depth is None else float(depth)
    stream, bounds = haystack.stream(rng, length - len(needle) - answer_room(question), pieces)
    context, starts = insert_needles(stream, bounds, [needle], [where])
    return Sample(name, context, (question,), where, starts)


@pytest.fixture
def toy_task() -> Iterator[str]:
    from ropekit.synthetic.suite import TASKS, TaskSpec, register_task

    register_task(TaskSpec("toy_echo", family="retrieval", haystack="noise", build=echo_sample))
    yield "toy_echo"
    TASKS.unregister("toy_echo")


def byte_ids(data: bytes) -> list[int]:
    return list(data)


def test_a_toy_task_is_usable_by_name_and_seeded_by_its_name(toy_task):
    from ropekit.synthetic.base import Haystack, Pieces
    from ropekit.synthetic.suite import make_sample, parse_tasks, task_seed

    assert task_seed("123456789") == 0xCBF43926  # the CRC-32 check value
    assert parse_tasks(f"vt,{toy_task}") == ("vt", toy_task)
    sample = make_sample(toy_task, 200, byte_ids, seed=7, index=3)
    rng = np.random.default_rng([7, 200, zlib.crc32(toy_task.encode()), 3])  # the documented seed, rebuilt
    expected = echo_sample(
        toy_task, rng, 200, Pieces(byte_ids), haystack=Haystack("noise"), depth=None, include_answer=False
    )
    assert sample.length == 200 and sample.questions[0].answers == expected.questions[0].answers
    np.testing.assert_array_equal(sample.context, expected.context)


def test_a_toy_task_runs_from_the_cli(toy_task):
    args = ["eval", "tasks", "--tasks", toy_task, "--samples", "1", "--multiples", "1", "--methods", "none", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout[result.stdout.index("{") :])["rows"]
    assert [row["task"] for row in rows] == [toy_task]


@pytest.mark.parametrize("task", ["niah_single_1", "niah_multikey_2", "vt", "cwe", "fwe"])
def test_built_in_samples_are_drawn_from_the_seed_and_the_task_name(task):
    """Sample ``i`` is the task's generator run on ``default_rng([seed, length, crc32(name), i])``, whatever other
    tasks exist or in which order they were registered."""
    from ropekit.synthetic.base import Pieces
    from ropekit.synthetic.suite import TASKS, make_sample

    sample = make_sample(task, 600, byte_ids, seed=4, index=9)
    rng = np.random.default_rng([4, 600, zlib.crc32(task.encode()), 9])
    expected = TASKS.get(task).sample(rng, 600, Pieces(byte_ids), None)
    np.testing.assert_array_equal(sample.context, expected.context)
    assert [q.answers for q in sample.questions] == [q.answers for q in expected.questions]
