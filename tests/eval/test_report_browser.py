"""The generated report in a real browser: headless Chromium (Debian's ``chromium`` package) loads index.html,
every <img> decodes (naturalWidth > 0), and the screenshot shows drawn pixels where each image sits.

Oracles: the browser's own image decoding (read back through a copy of the page with a probe script, dumped with
``--dump-dom``) and the pixels of its screenshot. Skipped when /usr/bin/chromium is absent.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from ropekit.eval.models import load_eval_model
from ropekit.eval.report import write_report
from ropekit.eval.sweep import SweepSettings, run_sweep

CHROMIUM = Path("/usr/bin/chromium")
WIDTH, HEIGHT = 1200, 3000

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium (apt-get install -y chromium)"),
]

PROBE = """<script>
window.addEventListener("load", () => {
  const images = [...document.images].map((img) => {
    const box = img.getBoundingClientRect();
    return {src: img.getAttribute("src"), complete: img.complete, naturalWidth: img.naturalWidth,
            naturalHeight: img.naturalHeight, left: box.left, top: box.top, width: box.width, height: box.height};
  });
  document.body.setAttribute("data-probe", JSON.stringify(images));
});
</script>"""


def chromium(*args: str, profile: Path) -> subprocess.CompletedProcess:
    command = [
        str(CHROMIUM),
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--hide-scrollbars",
        "--force-device-scale-factor=1",
        f"--user-data-dir={profile}",
        f"--window-size={WIDTH},{HEIGHT}",
        *args,
    ]
    return subprocess.run(command, capture_output=True, text=True, timeout=180, check=False)


@pytest.fixture(scope="module")
def report(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    settings = SweepSettings(
        methods=("none", "linear", "ntk", "yarn"),
        multiples=(1, 2, 4),
        passkey_multiples=(1, 2),
        depths=(0.0, 0.5, 1.0),
        trials=2,
        max_tokens=512,
    )
    model = load_eval_model(tiny_checkpoint)
    return write_report(model, settings, run_sweep(model, settings), tmp_path_factory.mktemp("report"), 1.0)


def probe(report: Path, profile: Path) -> list[dict]:
    """Image states as the browser sees them, from a copy of the page with a probe script appended."""
    page = report.with_name("probe.html")
    page.write_text(report.read_text().replace("</body>", PROBE + "</body>"))
    done = chromium("--virtual-time-budget=10000", "--dump-dom", page.as_uri(), profile=profile)
    match = re.search(r'data-probe="([^"]*)"', done.stdout)
    assert match is not None, done.stderr[-2000:]
    return json.loads(match.group(1).replace("&quot;", '"').replace("&amp;", "&"))


def test_report_renders_with_visible_images(report: Path, tmp_path: Path) -> None:
    from PIL import Image

    images = probe(report, tmp_path / "profile-probe")
    assert sorted(i["src"] for i in images) == ["passkey.png", "perplexity.png", "wavelengths.png"]
    for image in images:
        assert image["complete"] and image["naturalWidth"] > 100 and image["naturalHeight"] > 100, image
        assert image["width"] > 100 and image["height"] > 100, image
        assert image["top"] + image["height"] <= HEIGHT, f"{image['src']} is below the screenshot"

    shot = tmp_path / "report.png"
    done = chromium(f"--screenshot={shot}", report.as_uri(), profile=tmp_path / "profile-shot")
    assert shot.is_file(), done.stderr[-2000:]
    with Image.open(shot) as screenshot:
        pixels = np.asarray(screenshot.convert("L"), dtype=np.float64)
    assert pixels.shape == (HEIGHT, WIDTH)
    drawn = pixels < 200
    assert drawn.mean() > 0.02, "the page is almost blank"
    for image in images:
        left, top = int(image["left"]), int(image["top"])
        region = drawn[top : top + int(image["height"]), left : left + int(image["width"])]
        # a rendered plot: axes, lines, labels (and for heatmaps filled cells) — not an empty frame
        assert region.mean() > 0.03, (image["src"], region.mean())
        assert pixels[top : top + int(image["height"]), left : left + int(image["width"])].std() > 20, image["src"]
    kept = Path(shutil.copy(shot, report.parent / "screenshot.png"))
    print(f"screenshot: {kept}")
