"""Self-tests of the oracle (tests/oracle.py) on the synthetic tree; no importer involved."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import oracle  # noqa: E402
import synthetic  # noqa: E402


def _u(inp, out, cache_read, cache_write, total, cost):
    return {"input": inp, "output": out, "cacheRead": cache_read, "cacheWrite": cache_write,
            "totalTokens": total, "cost_total": cost}


def _s(messages, roles, tool_calls, exec_calls, thinking, usage):
    return {"sessions": 1, "messages": messages, "messages_by_role": roles, "tool_calls": tool_calls,
            "exec_calls": exec_calls, "messages_with_thinking": thinking, "usage": usage}


# Worked out by hand from synthetic.py (see the comments there):
# A: live file lines 2,3,4,7,8,10,12 are messages (line 13 is pending, 5 and 9 bad); the .bak adds
#    a00000b1; the checkpoint adds nothing. a0000006 repeats a0000005's call: its usage counts once,
#    and so do its two tool calls (toolu_2, toolu_3): 3 calls (toolu_1 exec, toolu_2 bash, toolu_3).
# A in agent "ops": the live file alone.
# A2: header-less, five messages, the last line complete without "\n"; b0000003 and b0000005 share a
#    timestamp but not their usage, so both calls count.
# D: file named after C, header says D. E: header-less <ISO>_<uuid> name.
# G: two calls with equal usage but different timestamps: both count.
# H: v1 entries without ids; its .bak copy is identical, so nothing doubles.
EXPECTED_SYNTHETIC = {
    ("synth-one", "main"): {
        "bad_lines": 2, "pending_lines": 1,
        "per_session": {
            synthetic.A: _s(8, {"user": 3, "assistant": 4, "toolResult": 1}, 3, 2, 1,
                            _u(17, 8, 100, 20, 145, 0.0015)),
            synthetic.A2: _s(5, {"user": 1, "assistant": 3, "toolResult": 1}, 1, 1, 0,
                             _u(9, 4, 0, 0, 0, 0)),
            synthetic.D: _s(2, {"user": 1, "assistant": 1}, 0, 0, 1, _u(1, 2, 3, 4, 10, 0.25)),
            synthetic.E: _s(2, {"user": 1, "assistant": 1}, 0, 0, 0, _u(1, 1, 0, 0, 2, 0)),
            synthetic.F: _s(4, {"user": 1, "assistant": 1, "toolResult": 2}, 2, 1, 0,
                            _u(100, 50, 0, 0, 150, 0.01)),
        },
    },
    ("synth-one", "ops"): {
        "bad_lines": 2, "pending_lines": 1,
        "per_session": {
            synthetic.A: _s(7, {"user": 2, "assistant": 4, "toolResult": 1}, 3, 2, 1,
                            _u(17, 8, 100, 20, 145, 0.0015)),
        },
    },
    ("synth-two", "main"): {
        "bad_lines": 0, "pending_lines": 0,
        "per_session": {
            synthetic.G: _s(4, {"user": 1, "assistant": 2, "toolResult": 1}, 1, 1, 1,
                            _u(40, 20, 0, 0, 60, 0.004)),
            synthetic.H: _s(4, {"user": 1, "assistant": 1, "toolResult": 1, "bashExecution": 1}, 1, 1, 0,
                            _u(3, 4, 5, 6, 18, 0.5)),
        },
    },
}


@pytest.fixture(scope="module")
def synthetic_root(tmp_path_factory):
    return synthetic.build(tmp_path_factory.mktemp("synthetic"))


def _approx_usage(usage):
    usage = dict(usage)
    usage["cost_total"] = pytest.approx(usage["cost_total"], rel=1e-9, abs=1e-12)
    return usage


def test_groups_and_files(synthetic_root):
    groups = oracle.group_files(synthetic_root)
    assert sorted(groups) == sorted(EXPECTED_SYNTHETIC)
    names = sorted(p.name for files in groups.values() for p in files)
    assert not [n for n in names if "9999" in n], "non-transcript files were listed"
    assert len(names) == 11


@pytest.mark.parametrize("group", sorted(EXPECTED_SYNTHETIC))
def test_synthetic_counts(synthetic_root, group):
    result = oracle.count_files(oracle.group_files(synthetic_root)[group])
    expected = EXPECTED_SYNTHETIC[group]
    assert result["bad_lines"] == expected["bad_lines"]
    assert result["pending_lines"] == expected["pending_lines"]
    assert sorted(result["per_session"]) == sorted(expected["per_session"])
    for session_id, want in expected["per_session"].items():
        got = result["per_session"][session_id]
        assert {k: v for k, v in got.items() if k != "usage"} == {k: v for k, v in want.items() if k != "usage"}, session_id
        assert got["usage"] == _approx_usage(want["usage"]), session_id
    assert result["sessions"] == len(expected["per_session"])
    assert result["messages"] == sum(s["messages"] for s in expected["per_session"].values())


def test_sum_counts(synthetic_root):
    totals = oracle.sum_counts(oracle.count_files(files) for files in oracle.group_files(synthetic_root).values())
    assert totals["sessions"] == 8
    assert totals["messages"] == 8 + 5 + 2 + 2 + 4 + 7 + 4 + 4
    assert totals["bad_lines"] == 4 and totals["pending_lines"] == 2
    assert totals["usage"]["input"] == 17 + 9 + 1 + 1 + 100 + 17 + 40 + 3


def test_order_of_files_does_not_matter(synthetic_root):
    files = oracle.group_files(synthetic_root)[("synth-one", "main")]
    assert oracle.count_files(files) == oracle.count_files(list(reversed(files)))


@pytest.mark.parametrize("name, expected", [
    ("X.jsonl", "X"),
    ("X.jsonl.reset.2026-04-24T16-09-14.281Z", "X"),
    ("X.jsonl.deleted.2026-04-24T16-09-14.281Z", "X"),
    ("X.jsonl.bak-123-1777000000000", "X"),
    ("X.jsonl.bak.2026-05-01T00-00-00.000Z", "X"),
    ("X.checkpoint.0badc0de-0000-4000-8000-00000000000c.jsonl", "X"),
    ("X-topic-42.jsonl", "X-topic-42"),
    ("2026-04-02T10-00-00-000Z_0a1b2c3d-0000-4000-8000-000000000005.jsonl",
     "0a1b2c3d-0000-4000-8000-000000000005"),
])
def test_stem_session_id(name, expected):
    assert oracle.stem_session_id(name) == expected


@pytest.mark.parametrize("name, expected", [
    ("X.jsonl", True),
    ("X-topic-1.jsonl", True),
    ("X.jsonl.reset.2026-04-24T16-09-14.281Z", True),
    ("X.jsonl.deleted.2026-04-24T16-09-14.281Z", True),
    ("X.jsonl.bak-1-2", True),
    ("X.checkpoint.u.jsonl", True),
    ("X.trajectory.jsonl", False),
    ("X.acp-stream.jsonl", False),
    ("X.jsonl.lock", False),
    ("X.jsonl.tmp", False),
    ("X.jsonl.deleted.2026-11-30T10-49-41.860Z.409be3ea.zst", False),
    ("X.jsonl.corrupt-1777000000000", False),
    ("sessions.json", False),
    ("X.trajectory-path.json", False),
])
def test_is_transcript_name(name, expected):
    assert oracle.is_transcript_name(name) is expected


def test_split_on_newline_only(tmp_path):
    path = tmp_path / "s.jsonl"
    line = '{"type":"message","id":"x1","message":{"role":"user","content":"a\u2028b\u2029c\u0085d"}}'
    path.write_bytes(('{"type":"session","id":"s"}\n' + line + "\n").encode("utf-8"))
    parsed = oracle.read_file(path)
    assert parsed["session_id"] == "s"
    assert [e for e, _ in parsed["entries"]] == ["x1"]
    assert parsed["bad_lines"] == 0 and parsed["pending_lines"] == 0


def test_pending_and_bad(tmp_path):
    path = tmp_path / "p.jsonl"
    path.write_bytes(b'{"type":"session","id":"p"}\n{"type":"x","id":"1"}\nnot json\n\n"str"\n{"type":"x"')
    parsed = oracle.read_file(path)
    assert parsed["bad_lines"] == 2 and parsed["pending_lines"] == 1
    assert [e for e, _ in parsed["entries"]] == ["1"]
    path.write_bytes(b'{"type":"x"}\n{"type":"y"}')
    parsed = oracle.read_file(path)
    assert parsed["session_id"] == "p"  # header-less: file name stem
    assert [e for e, _ in parsed["entries"]] == ["@0", "@1"]
    assert parsed["bad_lines"] == 0 and parsed["pending_lines"] == 0
