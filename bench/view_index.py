"""``colbench view`` on a run of 100 episodes and on one of 10,000: does the big run open as fast?

For each size, a fresh process (as a user starting ``colbench view``) opens the run with the index already in the
cache (warm: the usual case, a run looked at before or being followed live) and asks for what the first screen
needs: the runs index line (summary with confidence intervals) and the first page of the episodes table. The cold
build of the index (first look at a run) is timed too. Prints absolute seconds, the 10,000/100 ratio, and the
process's peak memory (RSS). Usage: python3 bench/view_index.py [--sizes 100,10000]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO / "tests" / "view"))  # before tests/: its conftest writes the run directories


def child(run: Path, cache: Path) -> None:
    """One viewer process: open the run, build the first screen; print seconds and peak RSS."""
    from starlette.testclient import TestClient

    from colbench.view.app import make_app
    from colbench.view.site import Site

    start = time.perf_counter()
    site = Site([run], cache)
    web = TestClient(make_app(site))
    assert web.get("/api/runs").status_code == 200
    assert len(web.get("/api/runs/0/episodes").json()["rows"]) == 50
    assert web.get("/runs/0").status_code == 200
    seconds = time.perf_counter() - start
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": seconds, "rss_mib": rss_mib}))


def measure(run: Path, cache: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, __file__, "--child", str(run), str(cache)], capture_output=True, text=True, check=True
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="100,10000")
    parser.add_argument("--child", nargs=2, metavar=("RUN", "CACHE"))
    args = parser.parse_args()
    if args.child:
        child(Path(args.child[0]), Path(args.child[1]))
        return
    from conftest import backend_record, write_run  # the tests' hand-written records, in the run format

    sizes = [int(s) for s in args.sizes.split(",")]
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for size in sizes:
            run = write_run(Path(tmp) / f"run{size}", [backend_record(f"t{i:05}", passed=i % 3) for i in range(size)])
            cache = Path(tmp) / f"cache{size}"
            cold = measure(run, cache)
            warm = min((measure(run, cache) for _ in range(5)), key=lambda r: r["seconds"])
            results[size] = (cold, warm)
            print(
                f"{size:>6} episodes: cold (index built) {cold['seconds']:.2f} s, "
                f"warm open + first page {warm['seconds']:.2f} s, peak RSS {warm['rss_mib']:.0f} MiB "
                f"(cold {cold['rss_mib']:.0f} MiB)"
            )
    small, big = results[sizes[0]][1], results[sizes[-1]][1]
    print(
        f"ratio {sizes[-1]}/{sizes[0]}: warm open {big['seconds'] / small['seconds']:.2f}x, "
        f"RSS {big['rss_mib'] / small['rss_mib']:.2f}x"
    )


if __name__ == "__main__":
    main()
