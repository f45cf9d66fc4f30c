"""The human's false claims in headless Chromium: the "untrue" filter and column, served and in the bundle opened
from disk, the false claim marked with what was said and what the reference gives; no console error, no request
outside the viewer (or the bundle)."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
from test_view_browser import _free_port, _watch, chromium  # noqa: F401  (a fixture, used by name)
from view_runs import RUN_DIRS

from colbench.view.app import make_app
from colbench.view.bundle import write_bundle

pytestmark = pytest.mark.browser

CLAIMS = RUN_DIRS / "backend-claims"
OLD = RUN_DIRS / "backend-a"


def _check_pages(page: Any, expect: Any, home: str) -> None:
    page.goto(home)
    expect(page.locator("#runs tbody tr")).to_have_count(2)
    first = page.locator("#runs tbody tr").first
    expect(first).to_contain_text("gpt-4o (grounding exec)")
    expect(first).to_contain_text("50.0% [")
    expect(first).to_contain_text("3/4 (75.0%)")
    expect(page.locator("#runs tbody tr").nth(1)).not_to_contain_text("grounding")
    page.click("#runs tbody tr >> nth=0 >> a >> nth=0")
    expect(page.locator("#count")).to_have_text("6 episodes match")
    page.check("input[value=untrue]")
    expect(page.locator("#count")).to_have_text("3 episodes match")
    expect(page.locator("#episodes tbody tr td.untrue")).to_have_count(3)
    page.click("text=c3")
    mark = page.locator("mark.claim.false").first  # the shown draw; the two before it follow
    expect(mark).to_have_text("f(1, 1) it gives 3")
    expect(mark).to_have_attribute("title", "false: f(1, 1): said 3, the reference gives 2 (the reference returns 2)")
    expect(page.locator("mark.claim.false")).to_have_count(3)
    expect(page.locator("ul.claims li.false").first).to_contain_text("said 3, the reference gives 2")


def test_served_untrue_filter_and_marks(chromium: str, make_site: Any) -> None:  # noqa: F811
    import uvicorn
    from playwright.sync_api import expect, sync_playwright

    port = _free_port()
    app = make_app(make_site(CLAIMS, OLD))
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    base = f"http://127.0.0.1:{port}"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=chromium)
            page = browser.new_page()
            errors, outside = _watch(page, base + "/")
            _check_pages(page, expect, base + "/")
            browser.close()
    finally:
        server.should_exit = True
        thread.join(10)
    assert errors == [] and outside == []


def test_bundle_untrue_filter_and_marks(chromium: str, tmp_path: Path, make_site: Any) -> None:  # noqa: F811
    from playwright.sync_api import expect, sync_playwright

    out = tmp_path / "site"
    write_bundle(make_site(CLAIMS, OLD), out)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        errors, outside = _watch(page, "file://" + str(out) + "/")
        _check_pages(page, expect, (out / "index.html").as_uri())
        browser.close()
    assert errors == [] and outside == []
