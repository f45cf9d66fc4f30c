"""Does the frontend reward fall as a page is damaged? ColBench-Frontend-v1's reward and each of its parts, and v0's CLIP
similarity, on reference pages damaged in known ways, in one run.

    python bench/frontend_damage.py [TASKS.jsonl] [--limit N] [--jobs N] [--embedder test] [--seed S]

Each reference page of the sample (default: the 150-page frontend sample in ../shared, else the bundled sample) is
damaged three ways at three levels (``LEVELS``: the share of the page's words, colours or blocks touched):

* ``words``: words of the visible text replaced by other words of the same page's vocabulary or of a fixed list;
* ``colors``: Tailwind colour classes (``text-``, ``bg-``, ``border-`` and their shades) and inline colours replaced by
  other colours;
* ``blocks``: elements that show something (headings, paragraphs, list items, links, buttons, images, table cells)
  removed with what they hold.

plus an ``unrelated`` page (the next page of the sample) and an ``empty`` page. All are scored against the reference
with the test embedder in the CLIP term (no weights offline). Reported, for the reward, each part and v0's similarity
(the plain CLIP cosine of the same screenshots):

* ``monotone``: the share of (page, kind of damage) pairs whose score never rises from one level to the next (from
  the undamaged page through the three levels) and falls from the undamaged page to the heaviest level;
* ``unrelated below light``: the share of pages where the unrelated page scores below every lightly damaged one;
* the mean score at each level, and of the unrelated and empty pages.

The damage is random but seeded (``--seed``) and nested: each level damages what the lighter one did and more (the
same spots, with the same replacements). ``--variant 2`` draws a second, differently made damage (other word
lists, colour choices and block picks) to check that a formula was not fitted to one generator.
"""

from __future__ import annotations

import argparse
import itertools
import random
import re
import statistics
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from bs4 import BeautifulSoup, NavigableString, Tag

from colbench.domains.frontend.scorer import FrontendScore, FrontendScorer
from colbench.domains.frontend.visual_metrics import SUBSCORES
from colbench.tasks import Task, load_jsonl

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data" / "colbench" / "frontend_test_sample.jsonl"
BUNDLED = Path(__file__).resolve().parents[1] / "tasks" / "samples" / "frontend-sample.jsonl"
LEVELS = (0.15, 0.4, 0.8)
KINDS = ("words", "colors", "blocks")
EMPTY = "<html><body></body></html>"
METRICS = ("reward", *SUBSCORES, "v0 similarity")
EPS = 1e-6
_T = TypeVar("_T")

WORDS = {
    1: "apple river stone cloud lamp forest engine garden silver window market violet harbor pencil",
    2: "quartz meadow rocket ticket candle desert mirror puzzle shadow tunnel velvet wizard yellow zebra",
}
COLORS = ("red", "orange", "yellow", "green", "teal", "blue", "indigo", "purple", "pink", "gray")
SHADES = ("100", "300", "500", "700", "900")
COLOR_CLASS = re.compile(r"^(text|bg|border|from|to|via)-(?:[a-z]+)-(\d{2,3})$")
SHOWING = ("h1", "h2", "h3", "h4", "h5", "h6", "p", "li", "a", "button", "img", "td", "th", "span", "label", "svg")
SKIP = frozenset({"script", "style", "title", "head", "noscript", "template"})


def _first(spots: list[_T], share: float, rng: random.Random) -> list[_T]:
    """The first ``share`` of ``spots`` in an order ``rng`` draws: the same ``rng`` state gives nested damage, so each
    level damages what the lighter one did and more."""
    order = list(spots)
    rng.shuffle(order)
    return order[: round(share * len(order))]


def damage_words(html: str, share: float, rng: random.Random, variant: int) -> str:
    soup = BeautifulSoup(html, "html.parser")
    strings = [s for s in soup.find_all(string=True) if _visible(s)]
    vocabulary = WORDS[variant].split()
    spots = [(i, j) for i, s in enumerate(strings) for j, w in enumerate(s.split()) if w]
    chosen = {spot: vocabulary[hash_index(spot, len(vocabulary), variant)] for spot in _first(spots, share, rng)}
    for i, string in enumerate(strings):
        words = string.split()
        if any((i, j) in chosen for j in range(len(words))):
            string.replace_with(NavigableString(" ".join(chosen.get((i, j), w) for j, w in enumerate(words))))
    return str(soup)


def damage_colors(html: str, share: float, rng: random.Random, variant: int) -> str:
    soup = BeautifulSoup(html, "html.parser")
    spots: list[tuple[Tag, int]] = []
    for tag in soup.find_all(True):
        for k, name in enumerate(tag.get("class") or []):
            if COLOR_CLASS.match(name):
                spots.append((tag, k))
    colors = COLORS if variant == 1 else tuple(reversed(COLORS))
    for n, (tag, k) in enumerate(_first(spots, share, rng)):
        classes = list(tag.get("class") or [])
        found = COLOR_CLASS.match(classes[k])
        assert found is not None
        prefix, shade = found.group(1), found.group(2)
        old = classes[k].split("-")[1]
        others = [c for c in colors if c != old]
        new_shade = SHADES[(SHADES.index(shade) + 2) % len(SHADES)] if shade in SHADES else SHADES[n % len(SHADES)]
        classes[k] = f"{prefix}-{others[hash_index((n, k), len(others), variant)]}-{new_shade}"
        tag["class"] = classes
    if not spots:  # a page coloured by inline styles only: recolour them
        styled = [t for t in soup.find_all(style=True) if "color" in str(t["style"])]
        for n, tag in enumerate(_first(styled, share, rng)):
            tag["style"] = str(tag["style"]) + f";color:#{(0x9E3779 * (n + variant)) % (1 << 24):06x}"
    return str(soup)


def damage_blocks(html: str, share: float, rng: random.Random, variant: int) -> str:
    soup = BeautifulSoup(html, "html.parser")
    names = SHOWING if variant == 1 else ("p", "li", "img", "h1", "h2", "h3", "a", "button")
    candidates = list(soup.find_all(names))
    # leaves first: removing a container and then one of its children would count the child twice
    candidates = [t for t in candidates if not any(c in candidates for c in t.find_all(True))] or candidates
    for tag in _first(candidates, share, rng):
        tag.decompose()
    return str(soup)


def hash_index(key: object, n: int, variant: int) -> int:
    """A stable choice among ``n`` for ``key`` (the same spot gets the same replacement at every level)."""
    return zlib.crc32(f"{variant}/{key}".encode()) % n


DAMAGE: dict[str, Callable[[str, float, random.Random, int], str]] = {
    "words": damage_words,
    "colors": damage_colors,
    "blocks": damage_blocks,
}


def _visible(string: NavigableString) -> bool:
    parent = string.parent
    return bool(string.strip()) and parent is not None and not any(p.name in SKIP for p in [parent, *parent.parents])


def value(score: FrontendScore, metric: str) -> float:
    if metric == "v0 similarity":
        return score.similarity
    assert score.visual is not None
    return score.reward if metric == "reward" else float(score.visual.subscores[metric])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("tasks", nargs="?", type=Path)
    parser.add_argument("--limit", type=int)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--embedder", default="test")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--variant", type=int, choices=(1, 2), default=1)
    args = parser.parse_args(argv)
    source = args.tasks or (SHARED if SHARED.is_file() else BUNDLED)
    tasks: list[Task] = list(load_jsonl(source))[: args.limit]
    if len(tasks) < 2:
        print(f"{source}: needs at least 2 frontend tasks", file=sys.stderr)
        return 2
    print(
        f"{len(tasks)} pages from {source}; damage variant {args.variant}, seed {args.seed}; embedder {args.embedder}"
    )

    labels = ["original", *(f"{kind}@{level}" for kind in KINDS for level in LEVELS), "unrelated", "empty"]
    jobs: list[tuple[Task, str]] = []
    for i, task in enumerate(tasks):
        pages = [task.ground_truth]
        for kind in KINDS:
            seed = f"{args.seed}/{args.variant}/{task.task_id}/{kind}"
            pages += [DAMAGE[kind](task.ground_truth, level, random.Random(seed), args.variant) for level in LEVELS]
        pages += [tasks[(i + 1) % len(tasks)].ground_truth, EMPTY]
        jobs += [(task, f"I WANT TO ANSWER:\n{page}") for page in pages]

    started = time.perf_counter()
    with FrontendScorer(embedder=args.embedder, reward="visual", concurrency=args.jobs) as scorer:
        scores = scorer.score_many(jobs)
    seconds = time.perf_counter() - started
    failed = [s for s in scores if not s.judged]
    if failed:
        print(f"{len(failed)} answers not judged, e.g. {failed[0].error}", file=sys.stderr)
        return 3
    per_page = [
        dict(zip(labels, scores[i * len(labels) : (i + 1) * len(labels)], strict=True)) for i in range(len(tasks))
    ]

    print(f"scored {len(jobs)} pages in {seconds:.0f} s ({len(jobs) / seconds:.1f}/s)")
    unequal = [(t.task_id, page["original"]) for t, page in zip(tasks, per_page, strict=True)]
    unequal = [(task_id, s) for task_id, s in unequal if s.reward < 1 - EPS]
    print(f"references scoring below 1 against themselves: {len(unequal)}")
    for task_id, s in unequal[:5]:
        print(f"  {task_id}: reward {s.reward:.4f}, similarity {s.similarity:.4f}, {s.visual and s.visual.subscores}")
    print()
    header = f"{'metric':15s} {'monotone':>9s} {'unrel<light':>11s}  " + " ".join(
        f"{m:>8s}" for m in ("orig", "light", "medium", "heavy", "unrel", "empty")
    )
    print(header)
    for metric in METRICS:
        monotone = 0
        for page in per_page:
            for kind in KINDS:
                series = [value(page["original"], metric)] + [value(page[f"{kind}@{lv}"], metric) for lv in LEVELS]
                steady = all(b <= a + EPS for a, b in itertools.pairwise(series))
                monotone += steady and series[-1] < series[0] - EPS
        below = sum(
            value(page["unrelated"], metric) < min(value(page[f"{k}@{LEVELS[0]}"], metric) for k in KINDS) - EPS
            for page in per_page
        )
        means = [
            statistics.fmean(value(page["original"], metric) for page in per_page),
            *(statistics.fmean(value(page[f"{k}@{lv}"], metric) for page in per_page for k in KINDS) for lv in LEVELS),
            statistics.fmean(value(page["unrelated"], metric) for page in per_page),
            statistics.fmean(value(page["empty"], metric) for page in per_page),
        ]
        pairs = len(per_page) * len(KINDS)
        print(
            f"{metric:15s} {100 * monotone / pairs:8.1f}% {100 * below / len(per_page):10.1f}%  "
            + " ".join(f"{m:8.3f}" for m in means)
        )
    print("\nreward by kind of damage (mean at light / medium / heavy):")
    for kind in KINDS:
        levels = [statistics.fmean(page[f"{kind}@{lv}"].reward for page in per_page) for lv in LEVELS]
        print(f"  {kind:7s} " + " / ".join(f"{m:.3f}" for m in levels))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
