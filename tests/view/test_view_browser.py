"""The viewer in headless Chromium: served live while episodes are appended, and the bundle opened from disk.
No console error, and no request to anything but the viewer's own server (or the bundle's own files)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from view_runs import append, backend_record, infra_record, write_run

from colbench.view.app import make_app
from colbench.view.bundle import write_bundle

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def chromium() -> str:
    pytest.importorskip("playwright")
    from colbench.errors import ConfigError
    from colbench.render import find_chromium

    try:
        return find_chromium()
    except ConfigError as exc:
        pytest.skip(str(exc))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def served(tmp_path: Path, make_site: Any) -> Iterator[tuple[str, Path]]:
    import uvicorn

    a = write_run(tmp_path / "a", [backend_record(f"t{i}", passed=i % 3) for i in range(8)] + [infra_record("down")])
    b = write_run(tmp_path / "b", [backend_record(f"t{i}", passed=2) for i in range(8)])
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(make_app(make_site(a, b)), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}", a
    server.should_exit = True
    thread.join(10)


def _watch(page: Any, allowed: str) -> tuple[list[str], list[str]]:
    errors: list[str] = []
    outside: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: None if r.url.startswith(allowed) else outside.append(r.url))
    return errors, outside


def test_served_viewer_follows_a_live_run(chromium: str, served: tuple[str, Path]) -> None:
    from playwright.sync_api import expect, sync_playwright

    base, run = served
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        errors, outside = _watch(page, base + "/")
        page.goto(base + "/")
        expect(page.locator("#runs tbody tr")).to_have_count(2)
        expect(page.locator("#runs tbody tr").first).to_contain_text("9 / 4")
        page.click("#runs tbody tr >> nth=0 >> a >> nth=0")
        expect(page.locator("#episodes tbody tr")).to_have_count(9)
        page.check("input[value=failed]")
        expect(page.locator("#episodes tbody tr")).to_have_count(6)  # t2 and t5 passed both tests
        page.uncheck("input[value=failed]")
        page.check("input[value=infra]")
        expect(page.locator("#episodes tbody tr")).to_have_count(1)
        page.uncheck("input[value=infra]")
        page.fill("input[name=q]", "question about t5")
        expect(page.locator("#episodes tbody tr")).to_have_count(1)
        page.fill("input[name=q]", "")
        append(run, [backend_record(f"new{i}") for i in range(3)])  # the eval writes on
        expect(page.locator("#episodes tbody tr")).to_have_count(12, timeout=10_000)
        expect(page.locator("#done")).to_have_text("12")
        page.click("text=new2")
        expect(page.locator("h1")).to_contain_text("task new2")
        expect(page.locator(".turn")).to_have_count(3)
        page.goto(base + "/compare/0/1")
        expect(page.locator("#changes tbody tr")).to_have_count(8)
        page.click("#changes tbody tr >> nth=0 >> a >> nth=1")
        expect(page.locator("h1")).to_contain_text("trial 0")
        browser.close()
    assert errors == [] and outside == []


def test_bundle_opens_from_disk_with_no_network(chromium: str, tmp_path: Path, make_site: Any) -> None:
    from playwright.sync_api import expect, sync_playwright

    from colbench.view import bundle

    records = [backend_record(f"t{i:04}", passed=i % 3) for i in range(bundle.CHUNK + 30)]
    run = write_run(tmp_path / "big", records)
    out = tmp_path / "site"
    write_bundle(make_site(run), out)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium)
        page = browser.new_page()
        errors, outside = _watch(page, "file://" + str(out) + "/")
        page.goto((out / "index.html").as_uri())
        expect(page.locator("#runs tbody tr")).to_have_count(1)
        page.click("#runs tbody tr a >> nth=0")
        expect(page.locator("#count")).to_have_text(f"{len(records)} episodes match")  # both chunks loaded
        page.check("input[value=failed]")
        failed = sum(1 for r in records if not r["success"])
        expect(page.locator("#count")).to_have_text(f"{failed} episodes match")
        page.click("#next")
        expect(page.locator("#pageno")).to_contain_text("page 2")
        page.click("#episodes tbody tr a >> nth=0")
        expect(page.locator(".turn")).to_have_count(3)
        expect(page.locator("table.tests tbody tr")).to_have_count(2)
        browser.close()
    assert errors == [] and outside == []
