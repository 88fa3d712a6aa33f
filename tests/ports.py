"""Loopback ports for the servers tests and benchmarks start (tests/conftest.py, bench/)."""

from __future__ import annotations

import random
import socket
from pathlib import Path


def free_port() -> int:
    """A free loopback port outside the range the kernel takes the local ends of connections from:
    a client that connects before its server listens is never given that same port for its own
    end (a TCP self-connection, which succeeds and answers a request with the request itself)."""
    try:
        lo, hi = (int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999  # (Linux's default; elsewhere, the same idea)
    spans = [(a, b) for a, b in ((10000, lo), (hi + 1, 65536)) if b - a >= 1000]
    rng = random.Random()
    for _ in range(200 if spans else 0):
        port = rng.randrange(*rng.choice(spans))
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
