"""The one cost policy (``ropekit._costs``): every command and the report decide "robust bound by default" alike.

Oracles: the rule written out (L <= 64k and d <= 128), and recorders standing in for the exact bound, so that a
runaway computation shows up as a recorded call instead of minutes of CPU.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

import ropekit.theory as theory
from ropekit import _costs
from ropekit.cli.app import app
from ropekit.config import RopeConfig

runner = CliRunner()


@pytest.mark.parametrize(
    ("length", "dim", "expected"),
    [(4096, 128, True), (65536, 128, True), (65537, 128, False), (4096, 256, False), (1024, 64, True)],
)
def test_robust_by_default_is_small_length_and_small_dim(length, dim, expected):
    assert _costs.robust_by_default(length, dim) is expected
    assert expected == (length <= _costs.ROBUST_AUTO_LIMIT and dim <= _costs.ROBUST_AUTO_DIM)


def test_bound_work_allows_one_million_tokens_at_d_128():
    assert _costs.MAX_BOUND_WORK == _costs.MAX_CONTEXT * 128
    assert _costs.MAX_CONTEXT == 1 << 20


def _record_bounds(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int, int]]:
    """Replace the exact bound by recorders (the call sites import it from ropekit.theory / theory.bound)."""
    import ropekit.theory.bound as bound
    import ropekit.theory.planning as planning

    calls: list[tuple[str, int, int]] = []

    def full(length, dim, **kwargs):
        calls.append(("base_bound", length, dim))
        return SimpleNamespace(smallest_base=2.0, robust_base=3.0, islands=[(2.0, 2.5)], certified=True)

    def smallest(length, dim):
        calls.append(("smallest_feasible_base", length, dim))
        return 2.0

    for module in (theory, bound, planning):
        monkeypatch.setattr(module, "base_bound", full)
        monkeypatch.setattr(module, "smallest_feasible_base", smallest)
    return calls


def test_report_theory_view_skips_the_robust_bound_for_large_heads(monkeypatch):
    """d = 256 at 4k: (A) only; the report used to run the full bound up to 64k at any head size."""
    from ropekit.eval.report import theory_view

    calls = _record_bounds(monkeypatch)
    model = SimpleNamespace(rope=RopeConfig(256, base=1e4), train_length=1024)
    view = theory_view(model, [2048, 4096])
    assert calls == [("smallest_feasible_base", 2048, 256), ("smallest_feasible_base", 4096, 256)]
    assert all(row["robust_base"] is None and row["base_clears_bound"] is None for row in view["bound_rows"])

    calls.clear()
    theory_view(SimpleNamespace(rope=RopeConfig(128, base=1e4), train_length=1024), [4096, 1 << 17])
    assert calls == [("base_bound", 4096, 128), ("smallest_feasible_base", 1 << 17, 128)]


def test_plan_follows_the_same_rule(monkeypatch):
    calls = _record_bounds(monkeypatch)
    theory.plan(256, 1e4, 1024, 4096)
    assert [name for name, _, _ in calls] == ["smallest_feasible_base"]
    calls.clear()
    theory.plan(128, 1e4, 1024, 4096)
    assert [name for name, _, _ in calls] == ["base_bound"]


@pytest.mark.parametrize(("dim", "robust"), [("64", True), ("256", False)])
def test_bound_command_follows_the_same_rule(monkeypatch, dim, robust):
    calls = _record_bounds(monkeypatch)
    result = runner.invoke(app, ["bound", "--target-length", "4k", "--rotary-dim", dim, "--json"])
    assert result.exit_code == 0, result.output
    assert [name for name, _, _ in calls] == (["base_bound"] if robust else ["smallest_feasible_base"])
    assert (json.loads(result.output)["robust_base"] is not None) is robust


def test_help_quotes_the_policy():
    """No stale cut-off in the help (plan said 16k while the library used 64k)."""
    for command in ("plan", "bound"):
        text = " ".join(runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"}).output.split())
        assert "64k" in text or "65,536" in text, (command, text)
        assert "16k" not in text
