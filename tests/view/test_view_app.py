"""The viewer's routes through Starlette's TestClient: pages, JSON, live updates, and every attack on them."""

from __future__ import annotations

import json
import os
import re
import struct
import zlib
from html import unescape as html_unescape
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient
from view_runs import RUN_DIRS, append, backend_record, infra_record, write_run

from colbench.view.app import make_app

HOSTILE = [
    "<script>alert(1)</script>",
    '<img src=x onerror="alert(2)">',
    "<svg onload=alert(3)><use href='data:x'/></svg>",
    "<style>body{display:none}</style>",
    '"><a href="javascript:alert(4)">x</a>',
    "NUL\x00byte",
    "{{ 7*7 }} {% raw %}",
]


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = b"".join(b"\x00" + b"\xff" * (3 * width) for _ in range(height))
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def client(make_site: Any, *dirs: Path, token: str | None = None) -> TestClient:
    return TestClient(make_app(make_site(*dirs), token=token))


def test_pages_and_json(tmp_path: Path, make_site: Any) -> None:
    a = write_run(tmp_path / "a", [backend_record("t1"), backend_record("t2", passed=1), infra_record("t3")])
    b = write_run(tmp_path / "b", [backend_record("t1", passed=0), backend_record("t2"), backend_record("t3")])
    web = client(make_site, a, b)
    runs = web.get("/api/runs").json()
    assert [r["done"] for r in runs] == [3, 3] and runs[0]["infra"] == 1
    assert runs[1]["success"]["value"] == pytest.approx(2 / 3) and runs[1]["success"]["low"] is not None
    assert runs[0]["compare"][0]["href"] == "/compare/0/1"
    assert web.get("/").status_code == 200 and "Runs" in web.get("/").text
    page = web.get("/api/runs/0/episodes", params={"filter": "failed"}).json()
    assert [r["task_id"] for r in page["rows"]] == ["t2"] and page["rows"][0]["href"].startswith("/runs/0/episode?")
    assert "t1" in web.get("/runs/0").text or web.get("/runs/0").status_code == 200
    compare = web.get("/compare/0/1").text
    assert "McNemar" in compare and "/runs/1/episode?task=t1&amp;trial=0" in compare
    assert web.get("/runs/9").status_code == 404 and web.get("/compare/0/7").status_code == 404


def test_new_episodes_show_up_in_the_json_the_page_polls(tmp_path: Path, make_site: Any) -> None:
    run = write_run(tmp_path / "live", [backend_record("t1")])
    web = client(make_site, run)
    assert web.get("/api/runs/0/episodes").json()["total"] == 1
    append(run, [backend_record(f"n{i}") for i in range(3)])
    assert web.get("/api/runs/0/episodes").json()["total"] == 4
    assert web.get("/api/runs").json()[0]["done"] == 4


def test_pagination_is_bounded_and_bad_queries_are_one_line_400s(tmp_path: Path, make_site: Any) -> None:
    run = write_run(tmp_path / "many", [backend_record(f"t{i:04}") for i in range(130)])
    web = client(make_site, run)
    second = web.get("/api/runs/0/episodes", params={"page": 1, "size": 100}).json()
    assert len(second["rows"]) == 30 and second["total"] == 130
    for params in ({"size": 10_000}, {"size": 0}, {"page": -1}, {"page": "x"}, {"sort": "1; DROP"}, {"filter": "x"}):
        response = web.get("/api/runs/0/episodes", params=params)
        assert response.status_code == 400 and "\n" not in response.text.strip(), params
    assert web.get("/runs/0/episode", params={"task": "t0000", "trial": "a"}).status_code == 400
    assert web.get("/runs/0/episode", params={"task": "nope", "trial": 0}).status_code == 404


def test_only_pngs_inside_the_run_directory_are_served(tmp_path: Path, make_site: Any) -> None:
    run = write_run(tmp_path / "fe", [], source="frontend-a")
    outside = tmp_path / "secret.png"
    outside.write_bytes(png(2, 2))
    (run / "screens" / "link.png").symlink_to(outside)
    (tmp_path / "fe-evil").mkdir()
    (tmp_path / "fe-evil" / "x.png").write_bytes(png(1, 1))
    web = client(make_site, run)
    assert web.get("/runs/0/files/screens/f1.0.png").status_code == 200
    for attack in [
        "/runs/0/files/../../secret.png",
        "/runs/0/files/%2e%2e/secret.png",
        "/runs/0/files/screens/%2e%2e/%2e%2e/secret.png",
        "/runs/0/files/screens%2f..%2f..%2fsecret.png",
        "/runs/0/files/" + str(outside),
        "/runs/0/files//" + str(outside),
        "/runs/0/files/screens/link.png",
        "/runs/0/files/../fe-evil/x.png",
        "/runs/0/files/run.json",
        "/runs/0/files/episodes.jsonl",
        "/runs/0/files/screens/f1.0.png%00.txt",
    ]:
        response = web.get(attack)
        assert response.status_code == 404, attack
        assert not response.content.startswith(b"\x89PNG"), attack


def test_every_response_has_the_csp_and_a_token_guards_other_hosts(tmp_path: Path, make_site: Any) -> None:
    run = write_run(tmp_path / "a", [backend_record("t1")])
    web = client(make_site, run)
    for url in ["/", "/runs/0", "/api/runs", "/static/view.js", "/nothing", "/runs/0/files/x.png"]:
        csp = web.get(url).headers["content-security-policy"]
        assert "default-src 'none'" in csp and "script-src 'self'" in csp and "unsafe-inline" not in csp, url
    local = TestClient(make_app(make_site(run), hosts=["127.0.0.1", "localhost"]), base_url="http://127.0.0.1:8765")
    assert local.get("/api/runs").status_code == 200
    assert local.get("/api/runs", headers={"Host": "evil.example:8765"}).status_code == 400  # DNS rebinding
    guarded = client(make_site, run, token="s3cret")
    assert guarded.get("/api/runs").status_code == 401
    assert guarded.get("/api/runs", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert guarded.get("/api/runs", headers={"Authorization": "Bearer s3cret"}).status_code == 200
    first = guarded.get("/", params={"token": "s3cret"})
    assert first.status_code == 200 and guarded.get("/api/runs").status_code == 200  # the cookie it set


def _no_live_markup(html: str) -> None:
    body = html.split("<main>", 1)[1].split("</main>", 1)[0]
    assert "<script" not in body.lower() and "<img src=x" not in body and "<svg onload" not in body
    assert "<style>" not in body and 'href="javascript' not in body and "\x00" not in body
    assert re.search(r"<[a-z]+[^>]*\son[a-z]+=", body) is None


def test_hostile_transcripts_are_escaped(tmp_path: Path, make_site: Any) -> None:
    dialogue = []
    for text in HOSTILE:
        dialogue += [
            {"role": "agent", "text": text},
            {
                "role": "human",
                "text": text,
                "leak_spans": [[0, 5]],
                "leak_score": 0.9,
                "leak": True,
                "leak_action": "shown",
            },
        ]
    big = "<script>x</script>" + "A" * 5_000_000
    record = backend_record(
        HOSTILE[0],
        dialogue=dialogue,
        answer=big,
        termination=HOSTILE[1],
        error=None,
        score={
            "tests": [{"name": HOSTILE[2], "expression": HOSTILE[0], "passed": False, "detail": HOSTILE[3]}],
            "x": HOSTILE[4],
        },
    )
    long_line = backend_record("long", dialogue=[{"role": "agent", "text": "w" * 300_000}])
    run = write_run(
        tmp_path / "evil",
        [record, long_line],
        tasks=[
            {
                "task_id": HOSTILE[0],
                "problem_description": HOSTILE[1],
                "ground_truth": HOSTILE[2],
                "hidden_information": HOSTILE[5],
            }
        ],
    )
    web = client(make_site, run)
    page = web.get("/runs/0/episode", params={"task": HOSTILE[0], "trial": 0})
    assert page.status_code == 200 and len(page.text) < 1_000_000  # 5 MB answer cut, and said so
    assert "more characters not shown" in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    assert "{{ 7*7 }}" in page.text  # data is never a template
    _no_live_markup(page.text)
    assert '<mark class="leak">&lt;scri</mark>' in page.text
    rows = web.get("/api/runs/0/episodes").json()["rows"]
    assert rows[0]["task_id"] == HOSTILE[0]  # JSON carries text; the page sets it as textContent
    for url in ["/", "/runs/0"]:
        _no_live_markup(web.get(url).text)
    assert "more characters" in web.get("/runs/0/episode", params={"task": "long", "trial": 0}).text


def test_leak_spans_redacted_replies_snapshot_and_what_older_runs_lack(tmp_path: Path, make_site: Any) -> None:
    dialogue = [
        {"role": "agent", "text": "what is the formula?"},
        {
            "role": "human",
            "text": "[redacted]",
            "leak_score": 0.8,
            "leak": True,
            "leak_action": "redacted",
            "leak_scores": [0.8],
            "withheld": ["it is return x * 42 exactly"],
            "leak_spans": [[6, 19]],
        },
        {"role": "agent", "text": "I WANT TO ANSWER: ..."},
    ]
    task = {
        "task_id": "t1",
        "problem_description": "write f",
        "ground_truth": "def f(x): return x*42",
        "hidden_information": "multiply by 42",
        "test_cases": {"f(1)": "42"},
    }
    run = write_run(tmp_path / "new", [backend_record("t1", dialogue=dialogue, leaks=1, passed=1)], tasks=[task])
    old = write_run(
        tmp_path / "old",
        [
            backend_record(
                "t1",
                dialogue=[
                    {"role": "agent", "text": "q"},
                    {"role": "human", "text": "a", "leak_score": 0.1, "leak": False},
                ],
            )
        ],
    )
    web = client(make_site, run, old)
    html = web.get("/runs/0/episode", params={"task": "t1", "trial": 0}).text
    assert "as the agent saw it" in html and "[redacted]" in html
    assert '<mark class="leak">return x * 42</mark>' in html
    assert "multiply by 42" in html and '<details class="task">' in html  # collapsed: it is the answer
    assert "expected 1, got None" in html and "f(1)" in html
    older = web.get("/runs/1/episode", params={"task": "t1", "trial": 0}).text
    assert "no leak spans" in older and "no task snapshot" in older
    assert any("no task snapshot" in m for m in web.get("/api/runs").json()[1]["missing"])


def test_frontend_blocks_overlay_and_per_turn_pages(tmp_path: Path, make_site: Any) -> None:
    run = write_run(tmp_path / "fe", [], source="frontend-a", env_id="ColBench-Frontend-v1")
    (run / "screens" / "reference").mkdir()
    (run / "screens" / "reference" / "f9.png").write_bytes(png(40, 30))
    (run / "screens" / "turns").mkdir()
    (run / "screens" / "turns" / "f9.0.1.png").write_bytes(png(40, 30))
    (run / "screens" / "f9.0.png").write_bytes(png(40, 30))
    blocks = {
        "reference": [
            ["text", 1, 2, 10, 5, "Hello", "#000000", "#ffffff"],
            ["image", 5, 5, 20, 10, "", "#000000", "#ffffff"],
        ],
        "answer": [["text", 1, 3, 10, 5, "Hello", "#000000", "#ffffff"]],
        "matches": [[0, 0, 1.0]],
    }
    record = {
        "task_id": "f9",
        "trial": 0,
        "status": "ok",
        "reward": 0.7,
        "success": False,
        "turns": 1,
        "score": {
            "reward": 0.7,
            "similarity": 0.8,
            "success": False,
            "embedder": "test",
            "subscores": {"block_match": 0.5, "text": 1.0, "position": 0.9, "color": 1.0, "clip": 0.8},
            "blocks": blocks,
        },
        "dialogue": [
            {"role": "agent", "text": "<html>draft</html>", "screenshot": "screens/turns/f9.0.1.png"},
            {"role": "human", "text": "bigger"},
        ],
        "answer": "<html><script>alert(1)</script></html>",
        "answer_html": "<html><script>alert(1)</script></html>",
        "screenshot": "screens/f9.0.png",
        "reference_screenshot": "screens/reference/f9.png",
    }
    append(run, [record, dict(record, trial=1, screenshot="../../etc/passwd.png", reference_screenshot="/etc/x.png")])
    web = client(make_site, run)
    html = web.get("/runs/0/episode", params={"task": "f9", "trial": 0}).text
    assert html.count('class="matched"') == 2 and html.count('class="unmatched"') == 1
    assert 'viewBox="0 0 40 30"' in html and "block_match" in html and "screens/turns/f9.0.1.png" in html
    _no_live_markup(html)
    bad = web.get("/runs/0/episode", params={"task": "f9", "trial": 1}).text
    assert "passwd" not in bad and "/etc/x.png" not in bad


def test_the_cli_refuses_other_hosts_without_a_token_and_writes_bundles(tmp_path: Path, capsys: Any) -> None:
    from colbench.cli.main import main

    run = write_run(tmp_path / "a", [backend_record("t1")])
    assert main(["view", str(run), "--host", "0.0.0.0"]) != 0
    assert "--host 0.0.0.0 is reachable from other machines" in capsys.readouterr().err
    os.environ.pop("NO_SUCH_TOKEN_VAR", None)
    assert main(["view", str(run), "--host", "0.0.0.0", "--token-env", "NO_SUCH_TOKEN_VAR"]) != 0
    assert "NO_SUCH_TOKEN_VAR is not set" in capsys.readouterr().err
    code = main(
        [
            "view",
            str(run),
            str(RUN_DIRS / "backend-b"),
            "--bundle",
            str(tmp_path / "site"),
            "--cache",
            str(tmp_path / "c"),
        ]
    )
    assert code in (0, None) and (tmp_path / "site" / "index.html").is_file()
    assert json.loads((tmp_path / "site" / "runs.js").read_text().split("=", 1)[1].rstrip(";\n"))[0]["done"] == 1


def test_the_bundle_refers_to_nothing_outside_itself(tmp_path: Path, make_site: Any) -> None:
    from colbench.view.bundle import write_bundle

    fe = write_run(tmp_path / "fe", [], source="frontend-a")
    append(fe, [json.loads(line) for line in (RUN_DIRS / "frontend-a" / "episodes.jsonl").read_text().splitlines()])
    evil = write_run(tmp_path / "evil", [backend_record("../../x<script>", answer=HOSTILE[0])])
    out = tmp_path / "site"
    pages = write_bundle(make_site(fe, evil), out)
    files = [p for p in out.rglob("*") if p.is_file()]
    assert pages == len([p for p in files if p.suffix == ".html"]) and (out / "runs/0/files/screens/f1.0.png").is_file()
    assert all(p.resolve().is_relative_to(out.resolve()) for p in files)
    for path in files:
        if path.suffix in (".html", ".js"):
            text = path.read_text()
            assert re.search(r"""(src|href)=["']?(https?:|//|/)""", text) is None, path
            if path.suffix == ".js" and path.parent.name == "data":
                assert "<" not in text, path  # the rows' text is escaped in the data files too
            if path.suffix == ".html":
                assert "<script>alert" not in text, path
    with pytest.raises(Exception, match="not an empty directory"):
        write_bundle(make_site(fe), out)


def test_runs_of_other_env_versions_are_marked_and_trials_give_pass_k(tmp_path: Path, make_site: Any) -> None:
    v0 = write_run(tmp_path / "v0", [backend_record("t1", 0), backend_record("t1", 1, passed=1)], trials=2)
    v1 = write_run(tmp_path / "v1", [backend_record("t1")], env_id="ColBench-Backend-v1")
    fe = write_run(tmp_path / "fe", [], source="frontend-a")
    runs = client(make_site, v0, v1, fe).get("/api/runs").json()
    assert runs[0]["not_comparable"] == ["ColBench-Backend-v1"] and runs[1]["not_comparable"] == ["ColBench-Backend-v0"]
    assert runs[2]["not_comparable"] == [] and runs[2]["compare"] == []  # another domain: nothing to compare with
    assert runs[0]["pass_k"] == [[1, 0.5], [2, 0.0]] and runs[0]["total"] == 8


def test_a_growing_runs_statistics_catch_up_while_its_count_is_live(
    tmp_path: Path, make_site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from colbench.view import site as site_module

    run = write_run(tmp_path / "live", [backend_record("t1")])
    site = make_site(run)
    assert site.summary(0)["stale"] is False
    monkeypatch.setattr(site_module, "BUSY", 1e9)  # as if computing took forever: wait for the next round
    append(run, [backend_record("t2", passed=0)])
    waiting = site.summary(0)
    assert waiting["stale"] is True and waiting["done"] == 2 and waiting["success"]["value"] == 1.0
    monkeypatch.setattr(site_module, "BUSY", 0)
    fresh = site.summary(0)
    assert fresh["stale"] is False and fresh["done"] == 2 and fresh["success"]["value"] == 0.5


def test_a_real_eval_with_a_leaking_human_is_highlighted_where_it_leaked(tmp_path: Path, make_site: Any) -> None:
    """The spans come from the detector during the eval (not from hand-written records) and the episode page marks
    exactly them in the withheld reply: the pasted code, not the words around it."""
    import subprocess
    import sys

    out = tmp_path / "run"
    res = subprocess.run(
        [
            sys.executable, "-m", "colbench", "eval", "--env", "ColBench-Backend-v2", "--agent", "scripted:ask",
            "--simulator", "scripted:leaky", "--tasks", "backend-sample", "--limit", "1", "--max-turns", "2",
            "--sandbox", "bwrap", "--leak-policy", "redact", "--out", str(out), "--quiet",
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    record = json.loads((out / "episodes.jsonl").read_text().splitlines()[0])
    human = record["dialogue"][1]
    (start, end), *_ = human["leak_spans"]
    leaked = human["withheld"][0][start:end]
    html = client(make_site, out).get("/runs/0/episode", params={"task": record["task_id"], "trial": 0}).text
    marked = re.findall(r'<mark class="leak">(.*?)</mark>', html, re.S)
    assert marked and marked[0].startswith("def ") and leaked.startswith("def ")
    assert html_unescape(marked[0]) == leaked


def test_a_folder_of_runs_lists_every_run_below_it_and_new_ones_as_they_appear(
    tmp_path: Path, make_site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import colbench.view.site as site_module

    monkeypatch.setattr(site_module, "RESCAN_S", 0.0)
    root = tmp_path / "runs"
    write_run(root / "mini", [backend_record("t1")])
    write_run(root / "gpt" / "2026-11-28", [backend_record("t1", passed=0)])
    (root / "notes").mkdir()  # a folder without a run is no error
    (root / "mini" / "screens").mkdir()  # a run's own folders are not looked in
    web = client(make_site, root)
    runs = web.get("/api/runs").json()
    assert [r["label"] for r in runs] == ["gpt/2026-11-28", "mini"]
    assert runs[0]["compare"][0]["href"] == "/compare/0/1" and web.get("/runs/1").status_code == 200
    write_run(root / "late", [backend_record("t1"), backend_record("t2")])  # a run that starts while we look
    runs = web.get("/api/runs").json()
    assert [r["label"] for r in runs] == ["gpt/2026-11-28", "mini", "late"] and runs[2]["done"] == 2
    assert web.get("/runs/2").status_code == 200 and web.get("/api/runs/2/episodes").json()["total"] == 2


def test_an_empty_folder_of_runs_waits_for_runs_and_a_missing_path_is_one_line(
    tmp_path: Path, make_site: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    import colbench.view.site as site_module
    from colbench.errors import ConfigError

    monkeypatch.setattr(site_module, "RESCAN_S", 0.0)
    root = tmp_path / "empty"
    root.mkdir()
    web = client(make_site, root)
    assert web.get("/api/runs").json() == [] and web.get("/").status_code == 200
    write_run(root / "first", [backend_record("t1")])
    assert [r["label"] for r in web.get("/api/runs").json()] == ["first"]
    with pytest.raises(ConfigError, match="is not a directory"):
        make_site(tmp_path / "nope")
