"""Hub split loading, offline: a real Hugging Face cache layout in tmp_path, read by huggingface_hub."""

from __future__ import annotations

import copy
import dataclasses
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import hub_cache
import pytest
from hub_cache import sha
from paths import REPO

from colbench._util import storage
from colbench.errors import ConfigError, DataError, InfraError
from colbench.tasks import hub, load_jsonl, manifest, pins, sources

hf_constants = pytest.importorskip(
    "huggingface_hub.constants", reason="huggingface_hub (the colbench[hub] extra) is not installed"
)

REPO_ID = "facebook/collaborative_agent_bench"
REPO_DIR = "datasets--facebook--collaborative_agent_bench"
TEST_FILE = "backend_tasks/test.jsonl"
COMMIT_A = "a" * 8 + "0123456789abcdef0123456789abcdef"
COMMIT_B = "b" * 8 + "0123456789abcdef0123456789abcdef"
SAMPLE_NAME = "backend_test_sample.jsonl"


pytestmark = pytest.mark.usefixtures("offline_hub")  # every test runs with the hub out of reach


def _sample_path() -> Path | None:
    root = REPO
    for folder in (root.parent / "shared" / "data" / "colbench", Path("/work/shared/data/colbench")):
        if (folder / SAMPLE_NAME).is_file():
            return folder / SAMPLE_NAME
    return None


@pytest.fixture(scope="module")
def sample_rows() -> list[dict[str, Any]]:
    path = _sample_path()
    if path is None:
        pytest.skip(f"sample data ../shared/data/colbench/{SAMPLE_NAME} is absent (needed to build a fake hub cache)")
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    assert len(rows) >= 100
    return rows


def make_rows(sample: list[dict[str, Any]], n: int = 1005, tag: str = "") -> list[dict[str, Any]]:
    """``n`` distinct rows: the sample repeated, each repetition with a small change to the text."""
    out = []
    for i in range(n):
        row = copy.deepcopy(sample[i % len(sample)])
        variant = i // len(sample)
        if variant or tag:
            row["problem_description"] += f" (variant {variant}{tag})"
        out.append(row)
    return out


def jsonl(rows: list[Any]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode("utf-8")


def put_snapshot(hf_cache: Path, commit: str, files: dict[str, bytes], *, ref: str | None = "main") -> Path:
    return hub_cache.put_snapshot(hf_cache, REPO_DIR, commit, files, ref=ref)


@pytest.fixture
def test_file(sample_rows: list[dict[str, Any]], hf_cache: Path) -> bytes:
    data = jsonl(make_rows(sample_rows))
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: data})
    return data


def verified_manifest(monkeypatch: pytest.MonkeyPatch, **changes: Any) -> None:
    splits = manifest.load_manifest()
    for name, spec in splits.items():
        if spec.filename == TEST_FILE:
            splits[name] = dataclasses.replace(spec, **changes)
    monkeypatch.setattr(manifest, "load_manifest", lambda: splits)


# ------------------------------------------------------------------------------------------------ manifest


def test_packaged_manifest_names_the_paper_splits() -> None:
    splits = manifest.load_manifest()
    assert {"backend-test", "backend-train", "backend-test-full"} <= set(splits)
    test = splits["backend-test"]
    assert (test.repo_id, test.repo_type, test.filename) == (REPO_ID, "dataset", TEST_FILE)
    assert (test.start, test.stop, test.expected_rows, test.domain) == (0, 1000, 1000, "backend")
    assert splits["backend-train"].filename == "backend_tasks/train.jsonl"
    assert splits["backend-train"].stop is None
    for spec in splits.values():
        if spec.kind == manifest.BUNDLED:
            assert spec.path.startswith("samples/") and spec.name.endswith("-sample")
            continue
        assert spec.kind == (manifest.HF_FILE if spec.domain == "backend" else manifest.HF_WEBSIGHT)
        assert spec.revision is None or len(spec.revision) == 40
        assert spec.sha256 is None or len(spec.sha256) == 64
        assert "CC-BY-NC" in spec.license
    assert manifest.known_splits() == list(splits)


def test_manifest_validation_names_split_and_field() -> None:
    raw: dict[str, Any] = {
        "format": 1,
        "splits": {
            "x": {
                "kind": "hf-file",
                "domain": "backend",
                "repo_id": REPO_ID,
                "filename": TEST_FILE,
                "revision": "main",
                "license": "l",
            }
        },
    }
    with pytest.raises(DataError, match=r"split 'x': field 'revision'"):
        manifest.parse_manifest(raw)
    raw["splits"]["x"]["revision"] = None
    raw["splits"]["x"]["rows"] = [5, 5]
    with pytest.raises(DataError, match=r"split 'x': field 'rows'"):
        manifest.parse_manifest(raw)


def test_other_kinds_are_listed_but_not_loaded(monkeypatch: pytest.MonkeyPatch) -> None:
    raw: dict[str, Any] = {
        "format": 1,
        "splits": {
            "frontend-test": {
                "kind": "websight-build",
                "domain": "frontend",
                "repo_id": "HuggingFaceM4/WebSight",
                "revision": "v0.2",
                "rows": [10000, 10500],
                "expected_rows": 500,
                "license": "CC-BY 4.0",
            }
        },
    }
    splits = manifest.parse_manifest(raw)
    assert splits["frontend-test"].domain == "frontend" and splits["frontend-test"].start == 10000
    monkeypatch.setattr(manifest, "load_manifest", lambda: splits)
    assert manifest.known_splits() == ["frontend-test"]
    with pytest.raises(ConfigError, match=r"kind 'websight-build'.*cannot load"):
        sources.load_split("frontend-test")


def test_unknown_split_is_config_error_listing_known_splits() -> None:
    with pytest.raises(ConfigError, match=r"unknown split 'backend-tset'; known splits: .*backend-test"):
        sources.load_split("backend-tset")


def test_colbench_home(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    assert storage.colbench_home() == tmp_path / "colbench-home"
    assert pins.pins_path() == tmp_path / "colbench-home" / pins.PINS_FILENAME
    monkeypatch.delenv("COLBENCH_HOME")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert storage.colbench_home() == tmp_path / "xdg" / "colbench"
    monkeypatch.delenv("XDG_CACHE_HOME")
    assert storage.colbench_home() == Path.home() / ".cache" / "colbench"


# ------------------------------------------------------------------------------------------------- pinning


def test_verified_pin_loads_1000_tasks_with_load_tasks_ids(
    test_file: bytes, hf_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    verified_manifest(monkeypatch, revision=COMMIT_A, sha256=sha(test_file))
    (hf_cache / REPO_DIR / "refs" / "main").unlink()  # a pinned commit needs no ref
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tasks = sources.load_split("backend-test", cache_dir=str(hf_cache), local_files_only=True)
    assert len(tasks) == 1000
    first = tmp_path / "first1000.jsonl"
    first.write_bytes(b"".join(test_file.splitlines(keepends=True)[:1000]))
    assert [t.task_id for t in tasks] == [t.task_id for t in load_jsonl(first)]
    assert [t.task_id for t in tasks] == [
        t.task_id for t in sources.load_split("backend-test", cache_dir=str(hf_cache))
    ]
    assert all(t.domain == "backend" and len(t.test_cases) == 10 for t in tasks)
    assert tasks[6].source == f"backend-test:{TEST_FILE}:7"
    assert not pins.pins_path().exists()  # verified values need no trust-on-first-use record
    full = sources.load_split("backend-test-full", cache_dir=str(hf_cache))
    assert len(full) == 1005 and [t.task_id for t in full[:1000]] == [t.task_id for t in tasks]


def test_verified_pin_mismatch_names_file_and_both_hashes(
    test_file: bytes, hf_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wrong = "0" * 64
    verified_manifest(monkeypatch, revision=COMMIT_A, sha256=wrong)
    with pytest.raises(DataError) as info:
        sources.load_split("backend-test", cache_dir=str(hf_cache))
    message = str(info.value)
    assert TEST_FILE in message and wrong in message and sha(test_file) in message and "manifest" in message


def test_trust_on_first_use_records_then_enforces(test_file: bytes, hf_cache: Path) -> None:
    with pytest.warns(pins.UnverifiedPinWarning, match="recorded on first use, not verified"):
        first = sources.load_split("backend-test", cache_dir=str(hf_cache))
    recorded = json.loads(pins.pins_path().read_text())
    entry = recorded["files"][f"dataset:{REPO_ID}:{TEST_FILE}"]
    assert entry["pinned"] == COMMIT_A
    assert entry["commits"][COMMIT_A]["sha256"] == sha(test_file)
    assert entry["commits"][COMMIT_A]["rows"] == 1005

    with warnings.catch_warnings():  # second load: pin known, no warning, same tasks
        warnings.simplefilter("error")
        second = sources.load_split("backend-test", cache_dir=str(hf_cache))
        # a split sharing the file shares the pin
        assert len(sources.load_split("backend-test-full", cache_dir=str(hf_cache))) == 1005
    assert [t.task_id for t in second] == [t.task_id for t in first]

    blob = hf_cache / REPO_DIR / "blobs" / sha(test_file)
    tampered = test_file.replace(b"Write a Python function", b"Write a Python functiom", 1)
    blob.write_bytes(tampered)
    with pytest.raises(DataError) as info:
        sources.load_split("backend-test", cache_dir=str(hf_cache))
    message = str(info.value)
    assert TEST_FILE in message and sha(test_file) in message and sha(tampered) in message
    assert str(pins.pins_path()) in message


def test_pinned_commit_is_used_after_the_branch_moves(
    sample_rows: list[dict[str, Any]], test_file: bytes, hf_cache: Path
) -> None:
    with pytest.warns(pins.UnverifiedPinWarning):
        pinned = sources.load_split("backend-test", cache_dir=str(hf_cache))
    put_snapshot(hf_cache, COMMIT_B, {TEST_FILE: jsonl(make_rows(sample_rows, tag="-b"))})  # refs/main -> B
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = sources.load_split("backend-test", cache_dir=str(hf_cache))
    assert [t.task_id for t in again] == [t.task_id for t in pinned]

    # an explicit revision wins; its hash is pinned on first use too, without moving the default pin
    with pytest.warns(pins.UnverifiedPinWarning, match=COMMIT_B):
        other = sources.load_split("backend-test", revision=COMMIT_B, cache_dir=str(hf_cache))
    assert not {t.task_id for t in other} & {t.task_id for t in pinned}
    entry = json.loads(pins.pins_path().read_text())["files"][f"dataset:{REPO_ID}:{TEST_FILE}"]
    assert entry["pinned"] == COMMIT_A and set(entry["commits"]) == {COMMIT_A, COMMIT_B}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert len(sources.load_split("backend-test", revision="main", cache_dir=str(hf_cache))) == 1000


def test_revision_not_cached_offline_is_infra_error(test_file: bytes, hf_cache: Path) -> None:
    with pytest.raises(InfraError, match=r"not in the local Hugging Face cache.*local JSONL file"):
        sources.load_split("backend-test", revision=COMMIT_B, cache_dir=str(hf_cache))


def test_offline_with_nothing_cached_is_infra_error(hf_cache: Path) -> None:
    with pytest.raises(InfraError) as info:
        sources.load_split("backend-test", cache_dir=str(hf_cache))
    message = str(info.value)
    assert "HF_HUB_OFFLINE" in message and "backend-test" in message and "\n" not in message


def test_missing_huggingface_hub_is_config_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)
    with pytest.raises(ConfigError, match=r"pip install 'colbench\[hub\]'"):
        sources.load_split("backend-test")


def test_corrupt_pins_file_is_data_error(test_file: bytes, hf_cache: Path) -> None:
    pins.pins_path().parent.mkdir(parents=True)
    pins.pins_path().write_text("{not json")
    with pytest.raises(DataError, match="delete it"):
        sources.load_split("backend-test", cache_dir=str(hf_cache))


def test_hf_hub_offline_env_means_local_files_only(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hub.offline_default() is True
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setattr(hf_constants, "HF_HUB_OFFLINE", False)
    assert hub.offline_default() is False


# ------------------------------------------------------------------------------------------ row validation


def test_bad_row_names_split_file_line_and_field(sample_rows: list[dict[str, Any]], hf_cache: Path) -> None:
    rows: list[Any] = make_rows(sample_rows)
    rows[6]["problem_description"] = 42
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: jsonl(rows)})
    with pytest.raises(DataError, match=rf"backend-test:{TEST_FILE}:7: field 'problem_description'"):
        sources.load_split("backend-test", cache_dir=str(hf_cache))
    assert not pins.pins_path().exists()  # a file that fails validation is not trusted


def test_rows_outside_the_range_are_not_validated(sample_rows: list[dict[str, Any]], hf_cache: Path) -> None:
    rows: list[Any] = make_rows(sample_rows)
    del rows[1002]["test_cases"]
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: jsonl(rows)})
    with pytest.warns(pins.UnverifiedPinWarning):
        assert len(sources.load_split("backend-test", cache_dir=str(hf_cache))) == 1000
    with pytest.raises(DataError, match=rf"backend-test-full:{TEST_FILE}:1003: field 'test_cases'"):
        sources.load_split("backend-test-full", cache_dir=str(hf_cache))


def test_bad_json_and_duplicates_name_the_line(sample_rows: list[dict[str, Any]], hf_cache: Path) -> None:
    data = jsonl(make_rows(sample_rows)).splitlines(keepends=True)
    broken = [*data[:3], b"{oops\n", *data[4:]]
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: b"".join(broken)})
    with pytest.raises(DataError, match=rf"backend-test:{TEST_FILE}:4: invalid JSON"):
        sources.load_split("backend-test", cache_dir=str(hf_cache))
    duplicated = [*data[:9], data[1], *data[10:]]
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: b"".join(duplicated)})
    with pytest.raises(
        DataError, match=rf"{TEST_FILE}:10: duplicate task_id .* \(first at backend-test:{TEST_FILE}:2\)"
    ):
        sources.load_split("backend-test", cache_dir=str(hf_cache))


def test_line_numbers_match_load_tasks_with_unicode_separators(
    sample_rows: list[dict[str, Any]], hf_cache: Path, tmp_path: Path
) -> None:
    rows: list[Any] = make_rows(sample_rows)
    rows[2]["problem_description"] += " line\u2028separator\x0cfeed"
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")
    assert "\u2028".encode() in data
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: data})
    with pytest.warns(pins.UnverifiedPinWarning):
        tasks = sources.load_split("backend-test", cache_dir=str(hf_cache))
    local = tmp_path / "same.jsonl"
    local.write_bytes(b"\n".join(data.split(b"\n")[:1000]) + b"\n")
    assert [t.task_id for t in tasks] == [t.task_id for t in load_jsonl(local)]
    assert [t.source.rsplit(":", 1)[1] for t in tasks[:4]] == ["1", "2", "3", "4"]


def test_short_file_is_data_error(sample_rows: list[dict[str, Any]], hf_cache: Path) -> None:
    put_snapshot(hf_cache, COMMIT_A, {TEST_FILE: jsonl(make_rows(sample_rows, n=500))})
    with pytest.raises(DataError, match=r"rows \[0, 1000\) but the file has only 500 rows"):
        sources.load_split("backend-test", cache_dir=str(hf_cache))


# ------------------------------------------------------------------------------------------- resolve_tasks


def test_resolve_tasks_file_split_and_unknown(
    test_file: bytes, hf_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local = tmp_path / "mine.jsonl"
    local.write_bytes(b"".join(test_file.splitlines(keepends=True)[:5]))
    assert [t.task_id for t in sources.load(str(local))] == [t.task_id for t in load_jsonl(local)]

    monkeypatch.setenv("HF_HUB_CACHE", str(hf_cache))  # resolve_tasks takes the HF default cache, as the CLI does
    monkeypatch.setattr(hf_constants, "HF_HUB_CACHE", str(hf_cache))
    with pytest.warns(pins.UnverifiedPinWarning):
        by_name = sources.load("backend-test")
    assert len(by_name) == 1000
    assert [t.task_id for t in sources.load(f"backend-test@{COMMIT_A}")] == [t.task_id for t in by_name]

    for bad in ("backend-tset", str(tmp_path / "missing.jsonl"), "backend-test@"):
        with pytest.raises(ConfigError, match=r"is not a file and not a split; known splits: .*backend-test"):
            sources.load(bad)
