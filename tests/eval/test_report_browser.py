"""The generated report in a real browser: headless Chromium (Debian's ``chromium`` package) loads index.html at
1200 px; every <img> decodes (naturalWidth > 0), the DevTools console stays free of errors (console.error, uncaught
exceptions, failed loads), nothing is wider than the viewport, and the screenshot shows drawn pixels where each
image sits.

Oracles: the browser's own image decoding, layout and console, read over the DevTools protocol
(``benchmarks/report_screenshot.py``), and the pixels of its screenshot. The checks are shown to fail on a page
built to break each of them. Skipped when /usr/bin/chromium is absent (CI installs it: ``.ci/run``).
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from ropekit.eval.loader import load_eval_model
from ropekit.eval.report import write_sweep_report
from ropekit.eval.sweep import SweepSettings, run_sweep

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "report_screenshot.py"
CHROMIUM = Path("/usr/bin/chromium")

pytestmark = pytest.mark.skipif(
    not CHROMIUM.is_file(), reason="needs Debian's chromium at /usr/bin/chromium (apt-get install -y chromium)"
)


def _client() -> ModuleType:
    spec = importlib.util.spec_from_file_location("ropekit_report_screenshot", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def client() -> ModuleType:
    return _client()


@pytest.fixture(scope="module")
def browser(client: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> Iterator:
    with client.Chromium(tmp_path_factory.mktemp("chromium") / "profile") as chromium:
        yield chromium


@pytest.fixture(scope="module")
def report(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A small report with all three figures (wavelengths, perplexity, passkey) and every table."""
    settings = SweepSettings(
        methods=("none", "linear", "yarn"),
        multiples=(1, 2),
        passkey_multiples=(1, 2),
        depths=(0.0, 1.0),
        trials=1,
        max_tokens=256,
    )
    model = load_eval_model(tiny_checkpoint)
    return write_sweep_report(model, settings, run_sweep(model, settings), tmp_path_factory.mktemp("report"), 1.0)


def test_report_at_1200px_decodes_every_image_without_console_errors_or_overflow(client, browser, report, tmp_path):
    from PIL import Image

    browser.problems.clear()
    browser.open(report.as_uri(), width=1200)
    page = browser.evaluate(client.PROBE)
    assert browser.problems == []
    images = page["images"]
    assert sorted(i["src"] for i in images) == ["passkey.png", "perplexity.png", "wavelengths.png"]
    for image in images:
        assert image["complete"] and image["naturalWidth"] > 100 and image["naturalHeight"] > 100, image
        assert 100 < image["width"] <= 1200 and image["height"] > 100, image
    # readable at 1200 px: no horizontal scrolling, no element past the right edge, body text at least 12 px
    assert (page["clientWidth"], page["scrollWidth"]) == (1200, 1200)
    assert page["overflowing"] == []
    assert page["smallestFontPx"] >= 12

    shot = browser.screenshot(tmp_path / "report.png")
    with Image.open(shot) as screenshot:
        pixels = np.asarray(screenshot.convert("L"), dtype=np.float64)
    assert pixels.shape == (page["scrollHeight"], 1200)
    drawn = pixels < 200
    assert drawn.mean() > 0.02, "the page is almost blank"
    for image in images:
        left, top = int(image["left"]), int(image["top"])
        region = pixels[top : top + int(image["height"]), left : left + int(image["width"])]
        # a rendered plot: axes, lines, labels (and for heatmaps filled cells), not an empty frame
        assert (region < 200).mean() > 0.03, (image["src"], (region < 200).mean())
        assert region.std() > 20, image["src"]


def test_the_checks_fail_on_a_broken_page(client, browser, tmp_path):
    """A missing image, a console error, an exception and a 2000 px table: each is caught."""
    page_file = tmp_path / "broken.html"
    page_file.write_text(
        "<!doctype html><html><body><p>broken</p><img src='missing.png'>"
        "<table><tr><td style='min-width:2000px'>wide</td></tr></table>"
        "<script>console.error('boom'); setTimeout(() => { throw new Error('late'); });</script></body></html>"
    )
    browser.problems.clear()
    browser.open(page_file.as_uri(), width=1200)
    page = browser.evaluate(client.PROBE)
    browser.evaluate("new Promise((done) => setTimeout(done, 50))")  # let the timer's exception arrive
    (image,) = page["images"]
    assert image["naturalWidth"] == 0
    problems = "\n".join(browser.problems)
    assert "console.error: boom" in problems
    assert "late" in problems
    assert "missing.png" in problems
    assert page["scrollWidth"] > 1200
    assert any(entry.startswith("table") for entry in page["overflowing"])
