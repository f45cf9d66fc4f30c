"""Writes openenv/seccomp.json: Docker's default seccomp profile plus exactly what bubblewrap needs to build its
sandboxes as a non-root user in the container, each added rule tagged with a ``comment`` starting "colbench:".

    python3 openenv/make_seccomp.py DEFAULT_JSON > openenv/seccomp.json

DEFAULT_JSON is moby's profiles/seccomp/default.json (openenv/seccomp.json was made from moby/moby
b985e2313a8676e18072b442911fc8f64f17d440, vendor/github.com/moby/profiles/seccomp/default.json). Each rule was
measured (tests/integrations/test_openenv_image.py): without it bubblewrap fails, with them all the attack tests
pass. ``--security-opt systempaths=unconfined`` is still needed beside it (the kernel will not mount a new /proc
while Docker masks parts of the container's).
"""

from __future__ import annotations

import json
import sys
from typing import Any

CLONE_NEWUSER = 0x10000000
TAG = "colbench: "

WHY = {
    "clone": "bubblewrap makes its namespaces in one clone() that includes a new user namespace; Docker's default "
    "refuses clone() with any namespace flag. Allowed only with CLONE_NEWUSER set: no namespace can be made in the "
    "container's own user namespace",
    "unshare": "bubblewrap enters a second user namespace (unshare(CLONE_NEWUSER)) to map the sandbox to uid 65534; "
    "that flag alone is allowed",
    "mount": "bubblewrap builds the sandbox's file system (bind mounts, /proc, /dev, tmpfs, read-only remounts) in "
    "its own mount namespace",
    "umount2": "bubblewrap detaches the old root after pivot_root",
    "pivot_root": "bubblewrap makes the new file system the sandbox's root; Docker's default never allows it",
}


def added_rules() -> list[dict[str, Any]]:
    """The rules bubblewrap needs, in the profile's format (``SCMP_CMP_MASKED_EQ``: ``value`` is the mask,
    ``valueTwo`` what the masked argument must equal)."""
    needs_user = {"value": CLONE_NEWUSER, "valueTwo": CLONE_NEWUSER, "op": "SCMP_CMP_MASKED_EQ"}
    s390 = ["s390", "s390x"]
    return [
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, **needs_user}],
            "comment": TAG + WHY["clone"],
            "excludes": {"arches": s390},
        },
        {
            "names": ["clone"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 1, **needs_user}],
            "comment": TAG + WHY["clone"] + " (s390 orders clone's arguments differently)",
            "includes": {"arches": s390},
        },
        {
            "names": ["unshare"],
            "action": "SCMP_ACT_ALLOW",
            "args": [{"index": 0, "value": CLONE_NEWUSER, "op": "SCMP_CMP_EQ"}],
            "comment": TAG + WHY["unshare"],
        },
        *({"names": [name], "action": "SCMP_ACT_ALLOW", "comment": TAG + WHY[name]} for name in ("mount", "umount2")),
        {"names": ["pivot_root"], "action": "SCMP_ACT_ALLOW", "comment": TAG + WHY["pivot_root"]},
    ]


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: make_seccomp.py DEFAULT_JSON > seccomp.json", file=sys.stderr)
        return 2
    with open(argv[1]) as handle:
        profile = json.load(handle)
    profile["syscalls"] += added_rules()
    print(json.dumps(profile, indent="\t"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
