"""Benchmark trees: synthetic OpenClaw trees of a given size or file count, written
with the demo's generator (importer/demo.py: ``Corpus``, ``Plan``, ``Session``, ``TreeWriter``).
Made-up text only; the same seed writes byte-identical files.

Used by the benchmarks (``sys.path`` holds ``bench/`` there) and by tests that need a tree
larger than the demo (``tests/conftest.py`` puts ``bench/`` on ``sys.path``):

- :func:`generate_tree`: a benchmark-sized tree (500 MB by default);
- :func:`generate_file_count_tree`: many tiny files, for the no-change rerun.
"""

from __future__ import annotations

import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from importer.demo import (  # noqa: E402
    DAY_MS, DEFAULT_AGENTS, DEFAULT_SERVERS, END_MS, KIB, MIB, Corpus, Plan, Profile, Session, TreeWriter,
)

__all__ = ["generate_tree", "generate_file_count_tree", "MIB"]

PROFILE = Profile()
PROFILE_BIG = Profile(big_p=0.10, mid_p=0.15, max_steps=10)
PROFILE_TINY = Profile(image_p=0.0, big_p=0.0, mid_p=0.0, small_cap=300, max_steps=1, answer=(20, 160),
                         think=(30, 120), sig_bytes=(32, 64), turn_gap_ms=(5_000, 60_000), max_turns=1,
                         think_p=0.4, prefix=False, parallel_p=0.0, extras=False, note=(10, 40))


def _agent_weights(agents) -> list:
    return [3 if i == 0 else 1 for i in range(len(agents))]


def generate_tree(root, target_bytes: int = 500 * MIB, seed: int = 0, servers=DEFAULT_SERVERS,
                  agents=DEFAULT_AGENTS) -> dict:
    """Write a benchmark tree of about `target_bytes` under `root`; return a summary dict.

    Size mix: file sizes log-normal around a median of ~85 KB (3 KB .. 2 MB), about 1 file in 150
    of 3-5 MB (at least one when target_bytes >= 20 MB), tool results up to ~440 KB per line,
    base64 PNG-like images of 20-150 KB in some user messages. About 10% of the sessions exist only
    as a `.jsonl.reset.<ts>` rename, ~3% as `-topic-<n>.jsonl`; each agent folder gets a sessions.json.
    """
    rnd = random.Random(seed)
    corpus = Corpus(rnd)
    w = TreeWriter(root, rnd)
    weights = _agent_weights(agents)
    window = 150 * DAY_MS
    i = 0
    while w.bytes < target_bytes:
        remaining = target_bytes - w.bytes
        server = rnd.choice(servers)
        agent, = rnd.choices(agents, weights=weights)
        r_big = rnd.random()
        big = (i == 1 and target_bytes >= 20 * MIB) or (i != 1 and r_big < 1 / 150 and remaining > 3 * MIB)
        if big:
            target = rnd.randint(3 * MIB, 5 * MIB)
        else:
            # median 78 KiB planned: files overshoot their plan by part of a turn, landing near 85 KB
            target = int(min(max(rnd.lognormvariate(math.log(78 * KIB), 0.9), 3 * KIB), 2 * MIB))
            target = max(3 * KIB, min(target, remaining))
        start = END_MS - window + rnd.randrange(window - DAY_MS)
        plan = Plan(rnd, agent, start, target, PROFILE_BIG if big else PROFILE)
        r_kind = rnd.random()
        kind = "reset" if r_kind < 0.10 else "topic" if r_kind < 0.13 else "normal"
        session = Session(corpus, plan)
        session.fill()
        w.write(server, session, kind)
        i += 1
    return w.finish(sessions=i)



def generate_file_count_tree(root, files: int = 10_000, seed: int = 0, servers=DEFAULT_SERVERS,
                             agents=DEFAULT_AGENTS) -> dict:
    """Write `files` small (~1-3 KB, one or two turns) session files spread over servers/agents;
    for the no-change rerun benchmark. About 10% are .reset renames. No sessions.json."""
    rnd = random.Random(seed)
    corpus = Corpus(rnd)
    w = TreeWriter(root, rnd)
    weights = _agent_weights(agents)
    window = 150 * DAY_MS
    for _ in range(files):
        server = rnd.choice(servers)
        agent, = rnd.choices(agents, weights=weights)
        start = END_MS - window + rnd.randrange(window - DAY_MS)
        plan = Plan(rnd, agent, start, rnd.randint(1_000, 2_600), PROFILE_TINY)
        plan.branch_p = plan.compaction_p = plan.switch_p = 0.0
        session = Session(corpus, plan)
        session.fill()
        w.write(server, session, "reset" if rnd.random() < 0.10 else "normal", index_p=0.0)
    return w.finish(sessions=files)
