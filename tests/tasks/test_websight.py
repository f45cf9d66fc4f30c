"""WebSight frontend splits, offline: tiny WebSight-like parquet shards in a real Hugging Face cache layout in
tmp_path, read through the real ``hf_hub_download``. Only the repository listing (one hub API call) is faked."""

from __future__ import annotations

import dataclasses
import fnmatch
import io
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import hub_cache
import pytest
from hub_cache import sha

from colbench.errors import ConfigError, DataError, InfraError
from colbench.tasks import content_id, load_jsonl, manifest, pins, sources, websight

hf_constants = pytest.importorskip(
    "huggingface_hub.constants", reason="huggingface_hub (the colbench[hub] extra) is not installed"
)
pa = pytest.importorskip("pyarrow", reason="pyarrow (the colbench[hub] extra) is not installed")
pq = pytest.importorskip("pyarrow.parquet")

REPO_ID = "HuggingFaceM4/WebSight"
REPO_DIR = "datasets--HuggingFaceM4--WebSight"
COMMIT_A = "a" * 8 + "0123456789abcdef0123456789abcdef"
COMMIT_B = "b" * 8 + "0123456789abcdef0123456789abcdef"
ROWS_PER_SHARD = 4100  # 5 shards = 20500 rows: enough for every packaged range
NUM_SHARDS = 5
SHARDS = [f"v0.2/train-{i:05d}-of-{NUM_SHARDS:05d}-{i:016x}.parquet" for i in range(NUM_SHARDS)]
LISTING_KEY = f"dataset:{REPO_ID}:v0.2/train-*.parquet"


pytestmark = pytest.mark.usefixtures("offline_hub")  # every test runs with the hub out of reach


def idea(i: int, tag: str = "") -> str:
    return f"Site {i}{tag}: a landing page with a hero image, a navigation bar and a footer."


def page(i: int) -> str:
    return (
        '<html>\n<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css" rel="stylesheet">\n'
        f'<body><h1 class="text-3xl">Site {i}</h1>\n'
        f'<img src="https://source.unsplash.com/random/{800 + i % 7}x600/?real-estate" alt="hero">\n'
        '<img src="https://picsum.photos/300/200" alt="logo"></body>\n</html>'
    )


def shard_bytes(first: int, n: int, *, tag: str = "", columns: dict[str, list[Any]] | None = None) -> bytes:
    """A WebSight v0.2-like shard: image (struct, here null), text (HTML), llm_generated_idea; small row groups."""
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    data = columns or {
        "text": [page(i) for i in range(first, first + n)],
        "llm_generated_idea": [idea(i, tag) for i in range(first, first + n)],
    }
    table = pa.table({"image": pa.array([None] * n, type=image_type), **{k: pa.array(v) for k, v in data.items()}})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=1000)
    return out.getvalue()


def put_snapshot(hf_cache: Path, commit: str, files: dict[str, bytes], *, ref: str | None = "main") -> Path:
    return hub_cache.put_snapshot(hf_cache, REPO_DIR, commit, files, ref=ref)


def make_shards(n: int = NUM_SHARDS, tag: str = "") -> dict[str, bytes]:
    return {name: shard_bytes(i * ROWS_PER_SHARD, ROWS_PER_SHARD, tag=tag) for i, name in enumerate(SHARDS[:n])}


@pytest.fixture(scope="module")
def shards() -> dict[str, bytes]:
    return make_shards()


@pytest.fixture
def listing(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fake the hub listing (the one network call of a first build): the repository at COMMIT_A holds SHARDS
    plus files the glob must leave out; returns the log of requested revisions."""
    calls: list[str] = []
    repo_files = [*SHARDS, "v0.2/README.md", "data/train-00000-of-00071-x.parquet", "README.md"]

    def fake(spec: manifest.Split, revision: str) -> tuple[str | None, list[str]]:
        calls.append(revision)
        return COMMIT_A, sorted(f for f in repo_files if fnmatch.fnmatchcase(f, spec.data_files))

    monkeypatch.setattr(websight, "_list_shards", fake)
    return calls


def patch_spec(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    """Change every WebSight split of the packaged manifest (e.g. a verified revision or explicit shards)."""
    splits = manifest.load_manifest()
    for name, spec in splits.items():
        if spec.kind == manifest.HF_WEBSIGHT:
            splits[name] = dataclasses.replace(spec, **changes)
    monkeypatch.setattr(manifest, "load_manifest", lambda: splits)


def pins_file() -> dict[str, Any]:
    return json.loads(pins.pins_path().read_text())  # type: ignore[no-any-return]


# --------------------------------------------------------------------------------------------- the mapping


def test_image_urls_are_rewritten_like_the_colbench_release() -> None:
    html = (
        '<img src="https://source.unsplash.com/random/1600x400/?real-estate">'
        '<img src="https://source.unsplash.com/random/300x200/?food,drink">'
        '<img src="https://picsum.photos/640/480"><img src="https://picsum.photos/id/48/10/20">'
        '<a href="https://example.com/1/2">x</a>'
    )
    assert websight.colbench_image_urls(html) == (
        '<img src="https://picsum.photos/id/48/1600/400-estate">'  # the release's own quirk, kept on purpose
        '<img src="https://picsum.photos/id/48/300/200,drink">'
        '<img src="https://picsum.photos/id/48/640/480"><img src="https://picsum.photos/id/48/10/20">'
        '<a href="https://example.com/1/2">x</a>'
    )
    row = websight.frontend_row("An idea.", html)
    assert list(row) == ["problem_description", "ground_truth"] and row["problem_description"] == "An idea."


def test_real_colbench_rows_are_fixed_points_of_the_mapping() -> None:
    """The bundled rows are the release's output: mapping them again changes nothing (incl. '-estate' URLs)."""
    tasks = sources.load("frontend-sample")
    assert all(websight.colbench_image_urls(t.ground_truth) == t.ground_truth for t in tasks)
    assert any("picsum.photos/id/48/" in t.ground_truth for t in tasks)


# ------------------------------------------------------------------------------------------------ manifest


def test_packaged_manifest_has_the_frontend_splits() -> None:
    splits = manifest.load_manifest()
    expected = {
        "frontend-test": (10000, 10500, 500),
        "frontend-test-full": (10000, 20000, 10000),
        "frontend-train": (0, 10000, 10000),
    }
    assert websight.websight_splits() == list(expected)
    for name, (start, stop, rows) in expected.items():
        spec = splits[name]
        assert (spec.kind, spec.domain, spec.repo_id, spec.repo_type) == (
            manifest.HF_WEBSIGHT,
            "frontend",
            REPO_ID,
            "dataset",
        )
        assert (spec.config, spec.data_files, spec.shards, spec.revision) == ("v0.2", "v0.2/train-*.parquet", (), None)
        assert (spec.start, spec.stop, spec.expected_rows, spec.shard_sha256) == (start, stop, rows, ())
        assert "CC-BY 4.0" in spec.license and "CC-BY-NC" in spec.license
        assert spec.pin_key == LISTING_KEY


def test_manifest_validation_of_websight_entries() -> None:
    entry: dict[str, Any] = {
        "kind": "hf-websight",
        "domain": "frontend",
        "repo_id": REPO_ID,
        "config": "v0.2",
        "data_files": "v0.2/train-*.parquet",
        "rows": [0, 10],
        "license": "l",
    }

    def parse(**changes: Any) -> manifest.Split:
        return manifest.parse_manifest({"format": 1, "splits": {"x": {**entry, **changes}}})["x"]

    assert parse().shards == () and parse().filename == ""
    spec = parse(shards=SHARDS[:2], sha256={SHARDS[0]: "0" * 64})
    assert spec.shards == tuple(SHARDS[:2]) and spec.shard_sha256 == ((SHARDS[0], "0" * 64),) and spec.sha256 is None
    for changes, field in [
        ({"config": None}, "config"),
        ({"data_files": ""}, "data_files"),
        ({"shards": ["data/train-00000.parquet"]}, "shards"),
        ({"shards": [SHARDS[0], SHARDS[0]]}, "shards"),
        ({"sha256": "0" * 64}, "sha256"),
        ({"sha256": {SHARDS[0]: "xyz"}}, f"sha256.{SHARDS[0]}"),
        ({"revision": "main"}, "revision"),
    ]:
        with pytest.raises(DataError, match=rf"split 'x': field '{field}'"):
            parse(**changes)


# ------------------------------------------------------------------------------- building, pinning, checks


def test_first_build_lists_pins_and_reads_the_paper_rows(
    shards: dict[str, bytes], hf_cache: Path, listing: list[str]
) -> None:
    put_snapshot(hf_cache, COMMIT_A, shards)
    with pytest.warns(pins.UnverifiedPinWarning, match=rf"pinned {REPO_ID} .* to commit {COMMIT_A} .*first use"):
        tasks = sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)
    assert listing == ["main"] and len(tasks) == 500
    assert all(t.domain == "frontend" and t.test_cases == () for t in tasks)
    assert tasks[0].problem_description == idea(10000) and tasks[-1].problem_description == idea(10499)
    assert tasks[0].source == f"frontend-test:{SHARDS[2]}: row 10000"
    assert tasks[0].ground_truth == websight.colbench_image_urls(page(10000)) != page(10000)
    assert "picsum.photos/id/48/" in tasks[0].ground_truth and "unsplash" not in tasks[0].ground_truth
    assert tasks[0].hidden_information == tasks[0].ground_truth
    rows = [websight.frontend_row(idea(i), page(i)) for i in range(10000, 10500)]
    assert [t.task_id for t in tasks] == [content_id("frontend", row) for row in rows]

    recorded = pins_file()["files"]
    assert recorded[LISTING_KEY]["pinned"] == COMMIT_A
    assert recorded[LISTING_KEY]["commits"][COMMIT_A]["files"] == SHARDS
    for shard in SHARDS[:3]:  # rows 10000-10499 lie in the third shard: three shards read, hashed and pinned
        record = recorded[f"dataset:{REPO_ID}:{shard}"]["commits"][COMMIT_A]
        assert record == {**record, "sha256": sha(shards[shard]), "rows": ROWS_PER_SHARD}
    assert f"dataset:{REPO_ID}:{SHARDS[3]}" not in recorded

    # later builds: pinned commit and list, no listing call, no warning, same tasks, fully offline
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=True)
    assert listing == ["main"] and [t.task_id for t in again] == [t.task_id for t in tasks]

    # the full test split reads two more shards: their hashes are pinned on first use, the rest checked
    with pytest.warns(pins.UnverifiedPinWarning, match=r"\(2 shard sha256\)"):
        full = sources.load_split("frontend-test-full", cache_dir=str(hf_cache))
    assert len(full) == 10000 and [t.task_id for t in full[:500]] == [t.task_id for t in tasks]
    assert (
        full[-1].problem_description == idea(19999) and full[-1].source == f"frontend-test-full:{SHARDS[4]}: row 19999"
    )
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        train = sources.load_split("frontend-train", cache_dir=str(hf_cache))
    assert [t.problem_description for t in train[:2]] == [idea(0), idea(1)] and len(train) == 10000
    assert not {t.task_id for t in train} & {t.task_id for t in full}


def test_tampered_shard_is_a_sha256_mismatch_naming_the_shard(
    shards: dict[str, bytes], hf_cache: Path, listing: list[str]
) -> None:
    put_snapshot(hf_cache, COMMIT_A, shards)
    with pytest.warns(pins.UnverifiedPinWarning):
        sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)
    tampered = shard_bytes(ROWS_PER_SHARD, ROWS_PER_SHARD, tag=" (edited)")
    (hf_cache / REPO_DIR / "blobs" / sha(shards[SHARDS[1]])).write_bytes(tampered)
    with pytest.raises(DataError) as info:
        sources.load_split("frontend-test", cache_dir=str(hf_cache))
    message = str(info.value)
    assert f"{REPO_ID}:{SHARDS[1]}@{COMMIT_A}" in message and "\n" not in message
    assert sha(shards[SHARDS[1]]) in message and sha(tampered) in message and str(pins.pins_path()) in message


def test_verified_manifest_values_are_checked_and_need_no_pins(
    shards: dict[str, bytes], hf_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_snapshot(hf_cache, COMMIT_A, shards, ref=None)  # a verified commit needs no branch ref
    sums = tuple((name, sha(data)) for name, data in shards.items())
    patch_spec(monkeypatch, revision=COMMIT_A, shards=tuple(SHARDS), shard_sha256=sums)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tasks = sources.load_split("frontend-test", cache_dir=str(hf_cache))  # HF_HUB_OFFLINE: local files, no listing
    assert len(tasks) == 500 and not pins.pins_path().exists()

    patch_spec(monkeypatch, revision=COMMIT_A, shards=tuple(SHARDS), shard_sha256=((SHARDS[0], "0" * 64),))
    with pytest.raises(DataError, match=rf"{SHARDS[0]}@{COMMIT_A} .*expected 0{{64}} \(from the packaged manifest"):
        sources.load_split("frontend-test", cache_dir=str(hf_cache))


def test_manifest_shards_build_offline_and_pin_the_commit_on_first_use(
    shards: dict[str, bytes], hf_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    put_snapshot(hf_cache, COMMIT_A, shards)
    patch_spec(monkeypatch, shards=tuple(SHARDS))
    with pytest.warns(pins.UnverifiedPinWarning, match=r"the default commit, 3 shard sha256"):
        tasks = sources.load_split("frontend-test", cache_dir=str(hf_cache))  # refs/main -> COMMIT_A, no listing
    assert len(tasks) == 500 and pins_file()["files"][LISTING_KEY]["pinned"] == COMMIT_A

    # the branch moves: the pinned commit is still what loads; an explicit revision is pinned beside it
    put_snapshot(hf_cache, COMMIT_B, make_shards(tag=" (b)"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [t.task_id for t in sources.load_split("frontend-test", cache_dir=str(hf_cache))] == [
            t.task_id for t in tasks
        ]
    with pytest.warns(pins.UnverifiedPinWarning, match=COMMIT_B):
        other = sources.load_split("frontend-test", revision=COMMIT_B, cache_dir=str(hf_cache))
    assert other[0].problem_description == idea(10000, " (b)")
    assert pins_file()["files"][LISTING_KEY]["pinned"] == COMMIT_A


def test_missing_column_names_the_shard_and_the_column(hf_cache: Path, listing: list[str]) -> None:
    files = make_shards()
    n = ROWS_PER_SHARD
    renamed = {"html": [page(i) for i in range(n)], "llm_generated_idea": [idea(i) for i in range(n)]}
    files[SHARDS[1]] = shard_bytes(0, n, columns=renamed)
    put_snapshot(hf_cache, COMMIT_A, files)
    with pytest.raises(DataError) as info:
        sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)
    message = str(info.value)
    assert f"{REPO_ID}:{SHARDS[1]}@{COMMIT_A}: missing column 'text'" in message
    assert "image, html, llm_generated_idea" in message and "\n" not in message
    assert not pins.pins_path().exists()  # nothing is trusted from a build that failed


def test_bad_values_and_duplicates_name_the_row(hf_cache: Path, listing: list[str]) -> None:
    files = make_shards(3)
    n = ROWS_PER_SHARD
    ideas: list[Any] = [idea(i) for i in range(2 * n, 3 * n)]
    ideas[10003 - 2 * n] = None
    pages = [page(i) for i in range(2 * n, 3 * n)]
    files[SHARDS[2]] = shard_bytes(0, n, columns={"text": pages, "llm_generated_idea": ideas})
    put_snapshot(hf_cache, COMMIT_A, files)
    expected = (
        rf"^frontend-test:{SHARDS[2]}: row 10003: column 'llm_generated_idea': expected a non-empty string, got null$"
    )
    with pytest.raises(DataError, match=expected):
        sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)

    ideas[10003 - 2 * n] = idea(10001)  # the same page and idea as row 10001
    pages[10003 - 2 * n] = page(10001)
    files[SHARDS[2]] = shard_bytes(0, n, columns={"text": pages, "llm_generated_idea": ideas})
    put_snapshot(hf_cache, COMMIT_A, files)
    with pytest.raises(
        DataError, match=rf"row 10003: duplicate task_id .* \(first at frontend-test:{SHARDS[2]}: row 10001\)"
    ):
        sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)


def test_too_few_rows_and_no_shards_are_data_errors(
    hf_cache: Path, listing: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    put_snapshot(hf_cache, COMMIT_A, make_shards(2))
    patch_spec(monkeypatch, shards=tuple(SHARDS[:2]))
    with pytest.raises(DataError, match=r"wants rows \[10000, 10500\) but the 2 shards at .* hold only 8200 rows"):
        sources.load_split("frontend-test", cache_dir=str(hf_cache))
    patch_spec(monkeypatch, shards=(), data_files="v0.3/train-*.parquet")
    with pytest.raises(DataError, match=r"no file of HuggingFaceM4/WebSight@.* matches 'v0.3/train-\*.parquet'"):
        sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)


def test_offline_without_a_pinned_shard_list_is_infra_error(hf_cache: Path) -> None:
    with pytest.raises(InfraError) as info:
        sources.load_split("frontend-test", cache_dir=str(hf_cache))
    message = str(info.value)
    assert "shard list" in message and "HF_HUB_OFFLINE" in message and "\n" not in message


def test_the_real_listing_call_offline_is_infra_error() -> None:
    """The unfaked listing with huggingface_hub in offline mode: refused before any request, as an InfraError."""
    with pytest.raises(InfraError, match=r"cannot list the files of HuggingFaceM4/WebSight@main: OfflineModeIsEnabled"):
        websight._list_shards(manifest.get_split("frontend-test"), "main")


def test_missing_pyarrow_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(ConfigError, match=r"needs pyarrow: pip install 'colbench\[hub\]'"):
        sources.load_split("frontend-test")


# -------------------------------------------------------------------------------------- JSONL file + CLI


def test_build_frontend_writes_the_release_format(
    shards: dict[str, bytes], hf_cache: Path, listing: list[str], tmp_path: Path
) -> None:
    put_snapshot(hf_cache, COMMIT_A, shards)
    out = tmp_path / "out" / "frontend_test.jsonl"
    with pytest.warns(pins.UnverifiedPinWarning):
        tasks = websight.build_frontend("frontend-test", out, cache_dir=str(hf_cache), local_files_only=False)
    lines = out.read_text(encoding="utf-8").splitlines(keepends=True)
    assert len(lines) == 500
    assert lines[0] == json.dumps(websight.frontend_row(idea(10000), page(10000))) + "\n"  # the original's json.dumps
    assert [t.task_id for t in load_jsonl(out)] == [t.task_id for t in tasks]
    assert {t.domain for t in load_jsonl(out)} == {"frontend"}
    with pytest.raises(
        ConfigError, match=r"'backend-test' is not built from WebSight .*frontend-test, frontend-test-full"
    ):
        websight.build_frontend("backend-test", out)


def colbench(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "colbench", *args], capture_output=True, text=True, timeout=300, env=env
    )


def test_cli_build_frontend_and_ls_frontend_sample(
    shards: dict[str, bytes], hf_cache: Path, listing: list[str], tmp_path: Path, offline_hub: Path
) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(hf_cache), "COLBENCH_HOME": str(offline_hub)}
    out = tmp_path / "ft.jsonl"
    res = colbench("tasks", "build-frontend", "--split", "frontend-test", "--out", str(out), env=env)
    assert res.returncode == 3 and "infrastructure error" in res.stderr and "shard list" in res.stderr
    assert res.stderr.count("\n") == 1 and not out.exists()

    put_snapshot(hf_cache, COMMIT_A, shards)
    with pytest.warns(pins.UnverifiedPinWarning):  # first use (needs the hub listing, faked here) pins the list
        tasks = sources.load_split("frontend-test", cache_dir=str(hf_cache), local_files_only=False)
    res = colbench("tasks", "build-frontend", "--split", "frontend-test", "--out", str(out), env=env)
    assert res.returncode == 0, res.stderr
    assert "500 frontend tasks" in res.stdout and str(out) in res.stdout
    assert [t.task_id for t in load_jsonl(out)] == [t.task_id for t in tasks]

    res = colbench("tasks", "build-frontend", "--split", "backend-test", "--out", str(out), env=env)
    assert res.returncode == 2 and "not built from WebSight" in res.stderr

    res = colbench("tasks", "ls", "frontend-sample", "--ids", env=env)
    assert res.returncode == 0 and res.stdout.split() == [t.task_id for t in sources.load("frontend-sample")]
    res = colbench("tasks", "ls", "frontend-sample", env=env)
    assert res.stdout.count("\tfrontend\t0 tests\t") == 20
