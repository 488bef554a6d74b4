"""Every ``--html`` page opened in a real headless Chromium (the Debian package, no download): no JavaScript
error, and every plot rendered (a non-empty plotly SVG or canvas). Run by ``.ci/browser``; not collected by
the unit suite (``testpaths = ["tests"]``).

To add a page: one row in ``PAGES`` (name, the command's argv without ``--html``) and, where the command
needs files made first, a row in ``SETUP``. ``{tmp}`` is replaced by the test's temporary directory.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PAGES = [
    ("validate", ["validate"]),
    ("plan", ["plan", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "256", "--top", "8"]),
    ("scale", ["scale", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--global-batch", "256", "--gpus", "8:8192"]),
    ("simulate", ["simulate", "all-reduce", "--gpus", "256", "--radix", "32", "--fail-links", "4"]),
    ("sweep", ["sweep", "show", "{tmp}/sweep"]),
    ("goodput", ["goodput", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "256", "--global-batch", "256",
                 "--runs", "20"]),
    ("serve", ["serve", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "8", "--tp", "8",
               "--input-len", "2000", "--output-len", "256"]),
    ("design", ["design", "--model", "llama3.1-8b", "--gpus", "1024"]),
    ("trend", ["trend", "--model", "llama3.1-8b", "--gpus", "1024"]),
    ("design-domain-sweep", ["design", "--model", "llama3.1-8b", "--gpus", "1024", "--domain-sweep"]),
    ("design-power", ["design", "--model", "llama3.1-8b", "--power", "20MW"]),
    ("bandwidth", ["bandwidth", "--model", "llama3.1-70b", "--cluster", "dgx-h100", "--gpus", "1024"]),
    ("serve-simulate", ["serve", "--model", "llama3.1-8b", "--cluster", "dgx-h100", "--gpus", "1", "--simulate",
                        "--rate", "5", "--requests", "300"]),
    ("validate-serving", ["validate", "--serving"]),
]
"""(name, argv of the command that writes the page; ``--html {tmp}/NAME.html`` is appended)."""

SETUP = {
    "sweep": [["sweep", "run", str(ROOT / "examples" / "sweep" / "grid.yaml"), "--out", "{tmp}/sweep"]],
}
"""Commands run before a page's command (name -> list of argv)."""

CHROMIUM = os.environ.get("TIERWISE_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("TIERWISE_CHROMEDRIVER", "/usr/bin/chromedriver")
SCREENSHOTS = os.environ.get("TIERWISE_SCREENSHOTS")
"""A directory to save each page's screenshot in (docs/img/ comes from here)."""

_COLLECT_ERRORS = """
window.__tierwiseErrors = [];
window.addEventListener('error', function (e) {
  window.__tierwiseErrors.push(String(e.message || e.type) + ' at ' + (e.filename || '') + ':' + (e.lineno || ''));
}, true);
window.addEventListener('unhandledrejection', function (e) {
  window.__tierwiseErrors.push('unhandled rejection: ' + String(e.reason));
});
"""

_PLOTS = """
var out = [];
document.querySelectorAll('.js-plotly-plot').forEach(function (gd) {
  var svg = gd.querySelector('svg.main-svg');
  var r = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  var marks = gd.querySelectorAll('g.trace, g.point, .heatmaplayer image, path.bars, .scatterlayer path').length;
  var titles = Array.from(gd.querySelectorAll('.g-xtitle text, .g-ytitle text, .g-y2title text'))
    .map(function (t) { return t.textContent; });
  out.push({id: gd.id, width: r.width, height: r.height, marks: marks, canvases: gd.querySelectorAll('canvas').length,
            traces: (gd._fullData || []).length, titles: titles});
});
return out;
"""


def _tierwise(argv: list[str], tmp: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OMP_NUM_THREADS": "1"}
    args = [a.replace("{tmp}", str(tmp)) for a in argv]
    proc = subprocess.run([sys.executable, "-m", "tierwise", *args], capture_output=True, text=True, env=env,
                          timeout=600)
    assert proc.returncode == 0, f"tierwise {' '.join(args)} failed: {proc.stderr[-2000:]}"


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(f"no Chromium at {CHROMIUM} / chromedriver at {CHROMEDRIVER}; apt-get install chromium "
                    "chromium-driver (or set TIERWISE_CHROMIUM / TIERWISE_CHROMEDRIVER)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                "--disable-background-networking", "--disable-component-update", "--disable-sync",
                "--disable-dev-shm-usage", "--window-size=1400,1000",
                f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    drv = webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
    drv.set_page_load_timeout(120)
    drv.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": _COLLECT_ERRORS})
    yield drv
    drv.quit()


@pytest.mark.parametrize("name,argv", PAGES, ids=[p[0] for p in PAGES])
def test_page_renders_without_errors(name, argv, driver, tmp_path):
    for setup in SETUP.get(name, []):
        _tierwise(setup, tmp_path)
    page = tmp_path / f"{name}.html"
    _tierwise([*argv, "--html", str(page)], tmp_path)
    assert page.stat().st_size > 100_000  # plotly.js inlined: the page works offline
    assert "<script src" not in page.read_text(encoding="utf-8")  # nothing fetched: works offline
    driver.get_log("browser")  # drop what earlier pages logged
    driver.get(page.as_uri())
    driver.execute_script("return document.readyState")
    plots = driver.execute_script(_PLOTS)
    errors = driver.execute_script("return window.__tierwiseErrors || []")
    severe = [e["message"] for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
    assert not errors, f"{name}: JavaScript errors {errors}"
    assert not severe, f"{name}: console errors {severe}"
    assert plots, f"{name}: no plotly plot on the page"
    for p in plots:
        assert p["traces"] > 0 and p["width"] > 100 and p["height"] > 100, f"{name}: plot {p} is empty"
        assert p["marks"] > 0 or p["canvases"] > 0, f"{name}: plot {p['id']} drew nothing"
        # issue 32: the axes are drawn with their titles (units: tests/report/test_page_labels.py)
        assert len([t for t in p["titles"] if t.strip()]) >= 2, f"{name}: plot {p['id']} axis titles {p['titles']}"
    if SCREENSHOTS:
        Path(SCREENSHOTS).mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(Path(SCREENSHOTS) / f"{name}.png"))


def test_a_javascript_error_is_caught(driver, tmp_path):
    """The check can fail: a page that throws is reported."""
    bad = tmp_path / "bad.html"
    bad.write_text("<!DOCTYPE html><html><body><script>undefinedFunction();</script></body></html>")
    driver.get(bad.as_uri())
    errors = driver.execute_script("return window.__tierwiseErrors || []")
    assert errors and "undefinedFunction" in errors[0]
