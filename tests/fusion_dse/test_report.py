"""`fusion-dse report`: one self-contained HTML page per store, its figures' data the store's,
checked in the page itself and in headless Chromium (loads, runs its script without an error,
sorts the table and shows a plan from its address, screenshots non-empty).

The browser tests need Chromium (Debian: ``apt-get install -y chromium``; Google Chrome works
too): they are skipped, saying so, where none is installed. Screenshots are written to
``$FUSION_DSE_TEST_ARTIFACTS`` when it is set (CI uploads that folder), else to pytest's
temporary folder.
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from fusion_dse.report import point_rows, write_report
from fusion_dse.sweep import load_sweep
from fusion_dse.sweep.plots import budget_data, compare_data, pareto_data, tradeoff_data
from fusion_dse.sweep.point import run_point
from fusion_dse.sweep.spec import SweepSpec, expand
from fusion_dse.sweep.store import SweepStore, keyed_config, point_key

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("report")
    store = root / "r.sqlite"
    spec = SweepSpec(axes={"model": "squeezenet1_0", "buffer": "64KiB,256KiB",
                           "scheme": "lbdf,brr,lbl", "search": "ls", "seed": 0, "budget": 15},
                     include=[{"scheme": "lbdf", "buffer": "256KiB", "seed": 0,
                               "search": "nsga2", "objectives": "dram,mbu"}])
    with SweepStore(store) as opened:
        for p in expand(spec):
            opened.write(p, keyed_config(p), run_point(p, point_key(p)), "r")
    return store, write_report(store, root / "r.html")


def _embedded(text: str, name: str):
    found = re.search(rf'<script type="application/json" id="data-{name}">(.*?)</script>',
                      text, re.S)
    assert found, name
    return json.loads(found[1])


def _records(frame) -> list[dict]:
    return json.loads(frame.to_json(orient="records"))


def test_page_embeds_every_figure_with_its_data(page):
    store, out = page
    text = out.read_text()
    frame = load_sweep(store, blobs=True)
    trade = tradeoff_data(frame)
    assert _embedded(text, "tradeoff") == {k: _records(v) for k, v in trade.items()}
    assert _embedded(text, "compare") == _records(compare_data(frame))
    assert _embedded(text, "budget") == _records(budget_data(frame))
    assert _embedded(text, "pareto") == _records(pareto_data(frame))
    rows = _embedded(text, "points")
    assert rows == json.loads(json.dumps(point_rows(frame)))
    assert len(rows) == len(frame) and text.count("<tr id=\"row-") == len(frame)
    plans = {r["plan"] for r in rows if r["plan"]}
    assert len(plans) >= 2 and all(f'id="plan-{d}"' in text for d in plans)
    assert text.count("<svg") == 4 + len(plans)  # the four views and every plan


def test_page_needs_no_network(page):
    text = page[1].read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", text)
    assert "<link" not in text and "@import" not in text and "url(http" not in text


def test_report_command(cli, page, tmp_path):
    store, _ = page
    out = tmp_path / "p.html"
    code, text, err = cli("report", str(store), "--out", str(out))
    assert code == 0, err
    assert str(out) in text and out.read_text().startswith("<!DOCTYPE html>")
    code, text, err = cli("report", str(tmp_path / "none.sqlite"))
    assert code == 2 and "no sweep store" in err and len(err.strip().splitlines()) == 1
    code, _, err = cli("report", str(store), "--out", str(tmp_path / "x.png"))
    assert code == 2 and "use one of html, htm" in err


def _browser() -> str:
    found = next((shutil.which(b) for b in BROWSERS if shutil.which(b)), None)
    if found is None:
        pytest.skip("no headless Chromium (apt-get install -y chromium, or Google Chrome): "
                    "the report is not checked in a browser here")
    return found


def _artifacts(tmp_path: Path) -> Path:
    folder = Path(os.environ.get("FUSION_DSE_TEST_ARTIFACTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _chromium(browser: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                           "--no-first-run", "--disable-extensions", "--enable-logging=stderr",
                           "--v=0", *args], capture_output=True, text=True, timeout=120,
                          check=False)


def test_page_in_headless_chromium(page, tmp_path):
    browser = _browser()
    store, out = page
    rows = point_rows(load_sweep(store, blobs=True))
    chosen = next(r for r in rows if r["plan"])
    address = f"{out.resolve().as_uri()}#sort=-dram_mib&plan={chosen['id']}"
    run = _chromium(browser, "--virtual-time-budget=5000", "--dump-dom", address)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    console = [line for line in run.stderr.splitlines() if "CONSOLE" in line]
    assert not [line for line in console if "rror" in line or "Uncaught" in line], console
    assert 'data-ready="1"' in dom  # the script ran to its end
    assert re.search(r'<pre id="errors" hidden="">\s*</pre>', dom)  # no script error
    order = re.findall(r'<tr id="row-([0-9a-f]+)"[^>]*>', dom)
    by_dram = sorted((r for r in rows if r["dram_mib"] is not None),
                     key=lambda r: -r["dram_mib"])
    assert order[:len(by_dram)] == [r["id"] for r in by_dram]  # sorted, descending
    shown = re.findall(r'<figure id="plan-([0-9a-f]+)" class="plan"( hidden="")?>', dom)
    assert [d for d, hidden in shown if not hidden] == [chosen["plan"]]
    assert f'id="row-{chosen["id"]}"' in dom and 'class="chosen"' in dom
    folder = _artifacts(tmp_path)
    for name, target in (("report-top.png", address),
                         ("report-plan.png", f"{address}&focus=plans")):
        shot = folder / name
        run = _chromium(browser, "--window-size=1400,1600", f"--screenshot={shot}",
                        "--virtual-time-budget=5000", target)
        assert run.returncode == 0, run.stderr[-2000:]
        assert shot.stat().st_size > 20_000, html.escape(name)  # a page, not a blank


def test_two_plans_compared_in_headless_chromium(page):
    from fusion_dse.report import plan_groups

    browser = _browser()
    store, out = page
    frame = load_sweep(store, blobs=True)
    rows = point_rows(frame)
    a = next(r for r in rows if r["scheme"] == "LBDF" and r["plan"])
    b = next(r for r in rows if r["scheme"] == "BRR" and r["buffer"] == a["buffer"]
             and r["plan"])
    groups = plan_groups(frame, rows)
    in_a = {tuple(g["ops"]) for g in groups[a["plan"]]}
    in_b = {tuple(g["ops"]) for g in groups[b["plan"]]}
    address = f"{out.resolve().as_uri()}#plan={a['id']}&diff={b['id']}"
    run = _chromium(browser, "--virtual-time-budget=5000", "--dump-dom", address)
    assert run.returncode == 0, run.stderr[-2000:]
    dom = run.stdout
    assert re.search(r'<pre id="errors" hidden="">\s*</pre>', dom)
    assert (f"{len(in_a & in_b)} groups the same, {len(in_a - in_b)} only in A, "
            f"{len(in_b - in_a)} only in B") in dom
    assert dom.count('data-side="A"') == len(in_a - in_b)
    assert dom.count('data-side="B"') == len(in_b - in_a)
