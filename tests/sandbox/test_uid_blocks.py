"""The uid blocks that keep pools on one machine apart (``pool.claim_uid_block``): distinct while held, free again
once closed or once their process is gone, never reached through a link."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from colbench.errors import SandboxError
from colbench.sandbox import pool
from colbench.sandbox.pool import UID_BLOCK, claim_uid_block


@pytest.fixture
def locks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    where = tmp_path / "colbench-uid-blocks"
    monkeypatch.setattr(pool, "UID_LOCKS", str(where))
    monkeypatch.setattr(pool, "UID_BLOCKS", 2)
    return where


def test_held_blocks_are_distinct_and_a_closed_one_is_free_again(locks: Path) -> None:
    first, first_fd = claim_uid_block("bwrap")
    second, second_fd = claim_uid_block("bwrap")
    try:
        assert (first, second) == (0, UID_BLOCK)
        with pytest.raises(SandboxError, match="all 2 blocks of bwrap sandbox uids are held"):
            claim_uid_block("bwrap")
        other, other_fd = claim_uid_block("docker")  # each runtime has blocks of its own
        os.close(other_fd)
        assert other == 0
        os.close(first_fd)
        again, first_fd = claim_uid_block("bwrap")
        assert again == first
    finally:
        os.close(first_fd)
        os.close(second_fd)
    assert oct(locks.stat().st_mode & 0o7777) == oct(0o1777)  # any user's pools may claim blocks there


def test_a_block_held_by_another_process_is_skipped_until_that_process_is_gone(locks: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time\nfrom colbench.sandbox import pool\npool.UID_LOCKS = sys.argv[1]\n"
            "print(pool.claim_uid_block('bwrap')[0], flush=True)\ntime.sleep(60)\n",
            str(locks),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "0"
        block, fd = claim_uid_block("bwrap")
        os.close(fd)
        assert block == UID_BLOCK
    finally:
        holder.kill()
        holder.wait()
    deadline = time.monotonic() + 10
    while True:  # the kernel drops a dead process's lock as it closes its files
        block, fd = claim_uid_block("bwrap")
        os.close(fd)
        if block == 0 or time.monotonic() > deadline:
            break
    assert block == 0


def test_a_link_planted_for_a_block_is_not_followed(locks: Path, tmp_path: Path) -> None:
    locks.mkdir(mode=0o1777)
    target = tmp_path / "elsewhere"
    target.write_text("keep")
    (locks / "bwrap-0").symlink_to(target)
    with pytest.raises(SandboxError, match=r"cannot claim sandbox uids in .*colbench-uid-blocks"):
        claim_uid_block("bwrap")
    assert target.read_text() == "keep"


def test_more_workers_than_a_block_holds_is_one_clear_error() -> None:
    from colbench.sandbox.bwrap import BwrapSandbox

    if os.geteuid() != 0:
        pytest.skip("uids are handed out only when the harness runs as root")
    with pytest.raises(SandboxError, match="400 workers are more than one block of sandbox uids holds"):
        BwrapSandbox(workers=400)
