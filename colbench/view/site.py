"""What the server and the static bundle share: the runs being viewed, the templates, and the links between pages.

The two differ only in their :class:`Links` (URLs of a live server, or relative file paths of a bundle opened from
disk), so every page is the same template either way.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

from colbench.errors import ConfigError, DataError
from colbench.report.compare import Paired, paired
from colbench.report.html_pages import environment
from colbench.runs import RUN_JSON, Run, load_run
from colbench.view.episode import Episode, build_episode
from colbench.view.index import FILTERS, SORTS, RunIndex
from colbench.view.summary import summarize

HERE = Path(__file__).parent
TEMPLATES = HERE / "templates"
STATIC = HERE / "static"
PAGE_SIZE = 50
BUSY = 5
"""A growing run's statistics take at most about 1 / (1 + BUSY) of the server's time."""
RESCAN_S = 2.0
"""A folder of runs is looked through for new runs at most this often (the runs index polls every few seconds)."""
ROOT_DEPTH = 3
"""How deep under a folder of runs a run directory is looked for (``runs/<model>/<date>/run.json``)."""


class Links:
    """URLs of a live server."""

    bundle = False

    def home(self) -> str:
        return "/"

    def run(self, rid: int) -> str:
        return f"/runs/{rid}"

    def episode(self, rid: int, task_id: str, trial: int) -> str:
        return f"/runs/{rid}/episode?" + urlencode({"task": task_id, "trial": trial})

    def file(self, rid: int, name: str) -> str:
        return f"/runs/{rid}/files/" + quote(name)

    def compare(self, a: int, b: int) -> str:
        return f"/compare/{a}/{b}"

    def static(self, name: str) -> str:
        return f"/static/{name}"

    def api(self, rid: int | None = None) -> str:
        return "/api/runs" if rid is None else f"/api/runs/{rid}/episodes"


def episode_file(task_id: str, trial: int) -> str:
    """A bundle's file name for an episode: task ids are untrusted text, so the name is a hash of it."""
    return f"{hashlib.sha256(task_id.encode()).hexdigest()[:20]}.{trial}.html"


class BundleLinks(Links):
    """Relative paths inside a bundle, from a page ``depth`` folders below its root."""

    bundle = True

    def __init__(self, depth: int) -> None:
        self.root = "../" * depth

    def home(self) -> str:
        return f"{self.root}index.html"

    def run(self, rid: int) -> str:
        return f"{self.root}runs/{rid}/index.html"

    def episode(self, rid: int, task_id: str, trial: int) -> str:
        return f"{self.root}runs/{rid}/episodes/{episode_file(task_id, trial)}"

    def file(self, rid: int, name: str) -> str:
        return f"{self.root}runs/{rid}/files/" + quote(name)

    def compare(self, a: int, b: int) -> str:
        return f"{self.root}compare/{a}-{b}.html"

    def static(self, name: str) -> str:
        return f"{self.root}static/{name}"

    def api(self, rid: int | None = None) -> str:
        return f"{self.root}runs/{rid}/data/" if rid is not None else f"{self.root}runs.js"


@dataclass
class TaskChange:
    task_id: str
    trials_a: list[tuple[int, float | None, bool | None]]
    trials_b: list[tuple[int, float | None, bool | None]]
    mean_a: float | None
    mean_b: float | None

    @property
    def changed(self) -> bool:
        return self.mean_a != self.mean_b


class Site:
    """The runs given on the command line, indexed, and the pages made of them.

    Each path is a run directory (it holds ``run.json``) or a folder of runs, as Inspect reads a log directory:
    every run directory under it, at most ``ROOT_DEPTH`` folders down (a run directory's own folders are not looked
    in), labelled by its path below the folder. A folder of runs is looked through again (at most every
    ``RESCAN_S`` seconds) whenever the runs index is asked for, so runs that appear while the viewer is open are
    listed; runs keep their numbers, a new one is added at the end.
    """

    def __init__(self, paths: list[Path], cache: Path | None = None) -> None:
        if not paths:
            raise ConfigError("colbench view: give at least one run directory or folder of runs")
        self.cache = cache
        self.indexes: list[RunIndex] = []
        self.labels: list[str] = []
        self._roots: list[Path] = []
        self._seen: set[Path] = set()
        self._scanned = -RESCAN_S
        self._lock = threading.Lock()
        self._discovering = threading.Lock()
        for path in paths:
            if not path.is_dir():
                raise ConfigError(f"colbench view: {path} is not a directory")
            if (path / RUN_JSON).is_file():
                self._add(path, path.resolve().name or str(path))
            else:
                self._roots.append(path)
        self.discover()
        self.env = environment(TEMPLATES)
        self._runs: dict[int, tuple[int, Run]] = {}
        self._computed: dict[int, tuple[float, float, dict[str, Any]]] = {}  # when, how long, what

    def _add(self, run_dir: Path, label: str) -> None:
        resolved = run_dir.resolve()
        if resolved in self._seen:
            return
        index = RunIndex(run_dir, self.cache)
        self._seen.add(resolved)
        self.indexes.append(index)
        self.labels.append(label)

    def discover(self) -> None:
        """Add the run directories that appeared under the folders of runs since the last look (rate-limited). A
        folder that holds no run yet is not an error: its runs may be on their way."""
        if not self._roots:
            return
        with self._discovering:
            now = time.monotonic()
            if now - self._scanned < RESCAN_S:
                return
            self._scanned = now
            for root in self._roots:
                for run_dir in run_dirs_under(root):
                    try:
                        self._add(run_dir, str(run_dir.relative_to(root)))
                    except DataError:  # a run.json being written, or not colbench's: looked at again next time
                        continue

    def index(self, rid: int) -> RunIndex:
        if rid >= len(self.indexes):
            self.discover()
        if not 0 <= rid < len(self.indexes):
            raise DataError(f"no run number {rid}")
        return self.indexes[rid]

    def summary(self, rid: int) -> dict[str, Any]:
        """The run's summary as JSON (what the runs index shows), computed once per state of its log: a viewer
        opening a run looked at before does not bootstrap 10,000 tasks again. While a big run grows, the page
        polls faster than its statistics are worth recomputing: they are recomputed when the time since the last
        computation is :data:`BUSY` times what it took (a small run's are always fresh), the episode count always."""
        index = self.index(rid)
        index.refresh()
        with self._lock:
            summary = index.saved("summary")
            if summary is not None:
                return dict(summary)
            last = self._computed.get(rid)
            now = time.monotonic()
            if last is not None and now - last[0] < BUSY * last[1]:
                return dict(last[2], done=index.count(), stale=True)
            summary = summarize(index).as_json()
            index.save("summary", summary)
            self._computed[rid] = (time.monotonic(), time.monotonic() - now, summary)
        return dict(summary)

    def runs_json(self, links: Links) -> list[dict[str, Any]]:
        """The runs index's rows (what the page shows and polls)."""
        out = []
        self.discover()
        summaries = [self.summary(i) for i in range(len(self.indexes))]
        for i, summary in enumerate(summaries):
            others = {s["env_id"] for s in summaries if s["domain"] == summary["domain"]} - {summary["env_id"]}
            row = summary
            row.update(
                id=i,
                label=self.labels[i],
                href=links.run(i),
                not_comparable=sorted(others),
                compare=[
                    {"label": self.labels[j], "href": links.compare(i, j)}
                    for j, other in enumerate(summaries)
                    if j != i and other["domain"] == summary["domain"]
                ],
            )
            out.append(row)
        return out

    def episodes_json(self, rid: int, links: Links, **query: Any) -> dict[str, Any]:
        index = self.index(rid)
        index.refresh()
        page = index.page(**query)
        rows = []
        for row in page.rows:
            item = row.as_json()
            item["href"] = links.episode(rid, row.task_id, row.trial)
            rows.append(item)
        return {"rows": rows, "total": page.total, "page": page.page, "size": page.size, "done": index.count()}

    def episode(self, rid: int, task_id: str, trial: int) -> Episode | None:
        index = self.index(rid)
        index.refresh()
        record = index.record(task_id, trial)
        return None if record is None else build_episode(index, record)

    def run(self, rid: int) -> Run:
        """The whole run read (for the paired statistics of ``colbench compare``), cached until it grows."""
        index = self.index(rid)
        index.refresh()
        with self._lock:
            cached = self._runs.get(rid)
            if cached is None or cached[0] != index.version:
                cached = (index.version, load_run(index.run_dir))
                self._runs[rid] = cached
        return cached[1]

    def comparison(self, a: int, b: int) -> tuple[Paired | None, str | None, list[TaskChange]]:
        """The paired statistics (or why there are none) and each common task's trials in both runs."""
        stats_error = None
        pair: Paired | None = None
        try:
            pair = paired(self.run(a), self.run(b), self.labels[a], self.labels[b])
        except DataError as exc:
            stats_error = str(exc)
        trials_a = _by_task(self.index(a))
        trials_b = _by_task(self.index(b))
        changes = []
        for task in sorted(set(trials_a) & set(trials_b)):
            ta, tb = trials_a[task], trials_b[task]
            changes.append(TaskChange(task, ta, tb, _mean(ta), _mean(tb)))
        changes.sort(key=lambda c: (not c.changed, c.task_id))
        return pair, stats_error, changes

    def render(self, template: str, links: Links, **context: Any) -> str:
        return self.env.get_template(template).render(links=links, labels=self.labels, **context)

    def run_page(self, rid: int, links: Links, **context: Any) -> str:
        """A run's page (``run.html``): its summary and its episodes table's filters, sorts and page size, served
        or bundled (the bundle adds ``chunks``, the number of its data files)."""
        return self.render(
            "run.html",
            links,
            rid=rid,
            summary=self.summary(rid),
            filters=FILTERS,
            sorts=list(SORTS),
            page_size=PAGE_SIZE,
            **context,
        )


def run_dirs_under(root: Path) -> list[Path]:
    """The run directories under ``root`` (see :class:`Site`), in path order."""
    found = []
    for folder, subfolders, files in os.walk(root):
        here = Path(folder)
        if RUN_JSON in files and here != root:
            found.append(here)
            subfolders.clear()  # a run's own folders (screens, pages) hold no runs
            continue
        if len(here.relative_to(root).parts) >= ROOT_DEPTH:
            subfolders.clear()
        subfolders.sort()
    return sorted(found)


def _by_task(index: RunIndex) -> dict[str, list[tuple[int, float | None, bool | None]]]:
    out: dict[str, list[tuple[int, float | None, bool | None]]] = {}
    for row in index.rows():
        out.setdefault(row.task_id, []).append((row.trial, row.reward, None if row.failed is None else not row.failed))
    return out


def _mean(trials: list[tuple[int, float | None, bool | None]]) -> float | None:
    values = [r for _, r, _ in trials if r is not None]
    return sum(values) / len(values) if values else None
