"""The theory commands: ``bound``, ``inspect``, ``plan`` and ``plot``, each with ``--json`` and clear errors.

Oracles: the library functions the commands wrap (called directly here), the published numbers, the file signatures
of PNG and SVG, and ``sys.modules`` of a fresh interpreter for the import-cost promise.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from ropekit.cli.app import app
from ropekit.config import RopeConfig
from ropekit.scaling import YarnScaling, frequencies
from ropekit.theory import base_bound

runner = CliRunner()


def run_json(*args: str) -> dict:
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.output)


def test_bound_json_fields_and_values():
    data = run_json("bound", "--target-length", "1k", "--rotary-dim", "128")
    expected = base_bound(1024, 128)
    assert data["context_length"] == 1024
    assert data["smallest_base"] == pytest.approx(expected.smallest_base, rel=1e-12)
    assert data["robust_base"] == pytest.approx(expected.robust_base, rel=1e-12)
    assert data["islands"] == [list(pair) for pair in expected.islands]
    assert data["island_count"] == len(expected.islands)
    assert data["published"]["paper"] == {"base": 4300.0, "first_negative": None, "satisfied": True}


def test_bound_without_robust_has_null_robust_fields():
    data = run_json("bound", "--target-length", "4096", "--no-robust")
    assert data["smallest_base"] == pytest.approx(26952.339, rel=1e-8)
    assert data["robust_base"] is None and data["islands"] is None
    assert data["published"]["paper"]["first_negative"] == 4079


@pytest.mark.parametrize(("text", "length"), [("128k", 131072), ("131072", 131072), ("1M", 1 << 20)])
def test_bound_accepts_length_suffixes(monkeypatch, text, length):
    """The length is parsed exactly; the (minutes-long) computation at these lengths is replaced by a recorder."""
    import ropekit.theory.bound as bound_module

    seen = []
    monkeypatch.setattr(bound_module, "smallest_feasible_base", lambda n, d: seen.append((n, d)) or 123.0)
    data = run_json("bound", "--target-length", text, "--rotary-dim", "64")
    assert seen == [(length, 64)]
    assert data["context_length"] == length and data["smallest_base"] == 123.0
    assert data["robust_base"] is None and data["islands"] is None  # above 65536 the robust bound is off by default


def test_bound_robust_above_the_island_limit_is_b_alone(monkeypatch):
    """Above the islands' limit, --robust computes (B) by the downward sweep: the same value, islands null."""
    import ropekit._costs as costs

    monkeypatch.setattr(costs, "ROBUST_AUTO_LIMIT", 1024)
    data = run_json("bound", "--target-length", "2048", "--rotary-dim", "64", "--robust")
    expected = base_bound(2048, 64)
    assert data["robust_base"] == pytest.approx(expected.robust_base, rel=1e-12)
    assert data["smallest_base"] == pytest.approx(expected.smallest_base, rel=1e-12)
    assert data["islands"] is None and data["certified"] is True


def test_bound_islands_above_the_limit_walks_them(monkeypatch):
    """--islands walks the islands at any L (here above a lowered limit): the full base_bound, islands included."""
    import ropekit._costs as costs

    monkeypatch.setattr(costs, "ROBUST_AUTO_LIMIT", 1024)
    expected = base_bound(2048, 64)
    for extra in (["--islands"], ["--robust", "--islands"]):
        data = run_json("bound", "--target-length", "2048", "--rotary-dim", "64", *extra)
        assert data["robust_base"] == pytest.approx(expected.robust_base, rel=1e-12)
        assert data["island_count"] == len(expected.islands) > 1
        for (low, high), (a, b) in zip(data["islands"], expected.islands, strict=True):
            assert low == pytest.approx(a, rel=1e-12) and high == pytest.approx(b, rel=1e-12)


def test_bound_islands_with_no_robust_is_an_error():
    result = runner.invoke(app, ["bound", "--target-length", "2048", "--islands", "--no-robust"])
    assert result.exit_code == 2
    assert "--islands" in result.output and "--no-robust" in result.output


def test_bound_table_output_mentions_both_definitions():
    result = runner.invoke(app, ["bound", "--target-length", "1k"])
    assert result.exit_code == 0, result.output
    for text in ("smallest feasible", "robust", "Men et al., Table 1", "Su"):
        assert text in result.output


def test_bound_help_imports_neither_torch_nor_matplotlib_nor_numpy():
    code = (
        "import sys\n"
        "from ropekit.cli.app import app\n"
        "try:\n"
        "    app(['bound', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(sorted(m for m in ('torch', 'matplotlib', 'numpy') if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "Usage" in out
    assert out.strip().splitlines()[-1] == "[]"


def test_inspect_json_for_yarn():
    data = run_json(
        "inspect", "--head-dim", "128", "--base", "10000", "--train-length", "4k", "--scaling", "yarn", "--factor", "4"
    )
    assert data["periodic_dims"] == 92 and data["critical_dimension"] == 92
    assert data["extrapolation_limit"] == pytest.approx(4711.7, abs=0.05)
    assert data["max_context_length"] == 1707
    rope = RopeConfig(128, base=10000.0)
    expected = (
        frequencies(rope.replace(scaling=YarnScaling(factor=4.0, original_max_position_embeddings=4096))).inv_freq
        / frequencies(rope).inv_freq
    )
    np.testing.assert_allclose(data["methods"]["yarn"]["ratio"], expected, rtol=1e-12)
    assert data["methods"]["yarn"]["attention_factor"] == pytest.approx(0.1 * np.log(4) + 1)


def test_inspect_factor_alone_compares_four_methods():
    data = run_json("inspect", "--head-dim", "16", "--train-length", "1k", "--factor", "2")
    assert list(data["methods"]) == ["linear", "ntk", "yarn", "llama3"]
    np.testing.assert_allclose(data["methods"]["linear"]["ratio"], 0.5, rtol=1e-14)


def test_inspect_table_output():
    result = runner.invoke(
        app, ["inspect", "--head-dim", "16", "--train-length", "1k", "--scaling", "linear", "--factor", "2"]
    )
    assert result.exit_code == 0, result.output
    assert "critical dimension" in result.output and "linear ratio" in result.output


def test_plan_json_fields():
    data = run_json(
        "plan",
        "--head-dim",
        "128",
        "--base",
        "10000",
        "--original-length",
        "1k",
        "--target-length",
        "4k",
        "--no-robust",
    )
    for key in (
        "factor",
        "first_negative",
        "clears_bound",
        "smallest_base",
        "robust_base",
        "suggested_base",
        "methods",
        "why",
    ):
        assert key in data
    assert data["factor"] == 4.0 and data["first_negative"] == 1707 and data["clears_bound"] is False
    ntk = next(m for m in data["methods"] if m["name"] == "ntk")
    assert round(ntk["parameters"]["base"]) == 40890


def test_plan_text_output():
    result = runner.invoke(app, ["plan", "--head-dim", "64", "--original-length", "256", "--target-length", "1k"])
    assert result.exit_code == 0, result.output
    assert "Why:" in result.output and "yarn" in result.output


@pytest.mark.parametrize(
    ("args", "suffix"),
    [
        (["scaling"], ".png"),
        (["wavelengths", "--rotary-dim", "32"], ".svg"),
        (["decay", "--max-distance", "2k"], ".svg"),
        (["bound", "--max-context", "2k", "--robust-up-to", "1k"], ".png"),
    ],
)
def test_plot_writes_png_and_svg(tmp_path, args, suffix):
    path = tmp_path / f"figure{suffix}"
    result = runner.invoke(app, ["plot", *args, "-o", str(path), "--json"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["bytes"] == path.stat().st_size > 1000
    head = path.read_bytes()[:200]
    if suffix == ".png":
        assert head.startswith(b"\x89PNG\r\n\x1a\n")
    else:
        assert b"<svg" in path.read_bytes() and head.startswith(b"<?xml")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["bound", "--target-length", "12q"], "length must look like"),
        (["bound", "--target-length", "1k", "--rotary-dim", "7"], "--rotary-dim must be even"),
        (["plan", "--original-length", "4k", "--target-length", "1k"], "--target-length must be >= --original-length"),
        (["plan", "--base", "1", "--original-length", "1k", "--target-length", "2k"], "base must be > 1"),
        (["inspect", "--head-dim", "15", "--train-length", "1k"], "must be even"),
        (["plot", "nonsense", "-o", "x.png"], "kind must be one of"),
        (["plot", "scaling", "-o", "x.jpg"], "--out must end in .png or .svg"),
        (["inspect", "--train-length", "4k", "--scaling", "yarn"], "--scaling yarn needs --factor"),
    ],
)
def test_bad_input_is_a_clear_error(args, message):
    result = runner.invoke(app, args)
    assert result.exit_code != 0
    assert message in " ".join(result.output.split()), result.output


@pytest.mark.parametrize(
    "args",
    [
        ["bound", "--target-length", "1k", "--head-dim", "64"],
        ["plot", "decay", "-o", "x.svg", "--head-dim", "64"],
        ["plot", "decay", "--output", "x.svg"],
    ],
)
def test_theory_commands_have_no_hidden_aliases(args):
    """``--head-dim`` is the head size (``plan``, ``inspect``), never another name for ``--rotary-dim``; ``--out``
    has one spelling (one CLI vocabulary)."""
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "No such option" in result.output
