"""Which addresses a server may bind without a token: one rule for every server colbench starts (``colbench serve``,
``colbench view``)."""

from __future__ import annotations

import ipaddress


def needs_token(host: str) -> bool:
    """Whether binding ``host`` exposes the server beyond this machine (anything but loopback)."""
    if host == "localhost":
        return False
    try:
        return not ipaddress.ip_address(host).is_loopback
    except ValueError:
        return True
