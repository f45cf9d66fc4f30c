"""``colbench view --bundle OUT RUN_DIR...``: the viewer's pages written as a static site that opens from disk.

A page opened with ``file://`` may not fetch, so the episodes table reads its rows from small JavaScript files
(``runs/<i>/data/<k>.js``, :data:`CHUNK` rows each) loaded one after another, and filters them in the browser.
Nothing refers to anything outside the folder: no request leaves the machine. Screenshots the records name are
copied (only PNG files inside the run directory). Live updates and full-text search are the server's alone.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from colbench.errors import ConfigError
from colbench.runs import safe_relative
from colbench.view.site import STATIC, BundleLinks, Site, episode_file

CHUNK = 1000


def _js(value: object) -> str:
    """JSON as a JavaScript expression in a .js file (``<`` escaped all the same, harmless and safer)."""
    return json.dumps(value, ensure_ascii=True).replace("<", "\\u003c")


def write_bundle(site: Site, out: Path) -> int:
    """Write the site into ``out`` (missing or empty); the number of pages written."""
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ConfigError(f"--bundle {out}: exists and is not an empty directory")
    out.mkdir(parents=True, exist_ok=True)
    shutil.copytree(STATIC, out / "static")
    pages = 0
    top = BundleLinks(0)
    (out / "runs.js").write_text(f"window.COLBENCH_RUNS = {_js(site.runs_json(BundleLinks(0)))};\n")
    (out / "index.html").write_text(site.render("runs.html", top, runs=site.runs_json(top)))
    pages += 1
    for rid, index in enumerate(site.indexes):
        folder = out / "runs" / str(rid)
        (folder / "data").mkdir(parents=True)
        (folder / "episodes").mkdir()
        # rows link from the run page (depth 2) to episodes/..., so the chunks hold that page's links
        links = BundleLinks(2)
        chunk: list[dict[str, object]] = []
        chunks = 0
        episode_links = BundleLinks(3)
        for row in index.rows():
            item = row.as_json()
            item["href"] = f"episodes/{episode_file(row.task_id, row.trial)}"
            chunk.append(item)
            if len(chunk) == CHUNK:
                _write_chunk(folder, chunks, chunk)
                chunks, chunk = chunks + 1, []
            episode = site.episode(rid, row.task_id, row.trial)
            if episode is None:
                continue
            html = site.render("episode.html", episode_links, rid=rid, ep=episode)
            (folder / "episodes" / episode_file(row.task_id, row.trial)).write_text(html)
            pages += 1
            shots = [episode.screenshot, episode.reference_screenshot, *(t.screenshot for t in episode.turns)]
            for name in shots:
                _copy(index.run_dir, name, folder / "files")
        if chunk:
            _write_chunk(folder, chunks, chunk)
            chunks += 1
        (folder / "index.html").write_text(site.run_page(rid, links, chunks=chunks))
        pages += 1
    for a in range(len(site.indexes)):
        for b in range(len(site.indexes)):
            if a == b or site.indexes[a].config.domain != site.indexes[b].config.domain:
                continue
            pair, error, changes = site.comparison(a, b)
            (out / "compare").mkdir(exist_ok=True)
            html = site.render("compare.html", BundleLinks(1), a=a, b=b, pair=pair, error=error, changes=changes)
            (out / "compare" / f"{a}-{b}.html").write_text(html)
            pages += 1
    return pages


def _write_chunk(folder: Path, number: int, rows: list[dict[str, object]]) -> None:
    (folder / "data" / f"{number}.js").write_text(f"colbenchChunk({number}, {_js(rows)});\n")


def _copy(run_dir: Path, name: str | None, files: Path) -> None:
    if not name or not name.lower().endswith(".png") or not safe_relative(name, run_dir):
        return
    target = files / name
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(run_dir / name, target)
