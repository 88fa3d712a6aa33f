"""Property tests: no byte input makes the parser raise, and every
well-formed line comes out as an entry (hypothesis)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings, strategies as st

from importer import parser as P

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | st.text(alphabet=st.characters(codec="utf-8") | st.sampled_from("\u2028\u2029\u0085\n\r\"\\<>")),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)
entry_objects = st.fixed_dictionaries(
    {"type": st.sampled_from(["message", "model_change", "custom", "compaction", "weird"])},
    optional={
        "id": st.text(min_size=1, max_size=10),
        "parentId": st.none() | st.text(max_size=10),
        "timestamp": st.text(max_size=30) | st.integers(),
        "message": json_values | st.fixed_dictionaries({
            "role": st.sampled_from(["user", "assistant", "toolResult", "bashExecution"]) | json_values,
            "content": json_values | st.lists(st.fixed_dictionaries({
                "type": st.sampled_from(["text", "thinking", "toolCall", "image", "toolResult"])},
                optional={"text": json_values, "thinking": json_values, "name": json_values,
                          "arguments": json_values, "id": json_values, "content": json_values}), max_size=4),
            "usage": json_values, "details": json_values, "provider": json_values, "model": json_values,
            "isError": json_values, "stopReason": json_values,
        }),
        "summary": json_values, "content": json_values,
    },
)


def run_all(data: bytes, name: str = "x.jsonl"):
    """Feed ``data`` in two arbitrary pieces the way the pipeline does and build every row."""
    out = []
    parser = P.TranscriptParser(name)
    leftover = b""
    for piece, final in ((data[: len(data) // 2], False), (data[len(data) // 2:], False), (b"", True)):
        buf = leftover + piece
        result = parser.feed(buf, final=final)
        leftover = buf[result.consumed:]
        for entry in result.entries:
            if entry.type == "message":
                row = P.message_row(entry)
                P.tool_call_rows(entry, row, frozenset({"exec", "bash"}))
            else:
                P.entry_row(entry)
            out.append(entry)
    return out


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=2000))
def test_no_byte_input_raises(data):
    run_all(data)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(entry_objects.map(lambda o: ("good", o)),
                          st.binary(max_size=40).map(lambda b: ("noise", b))), max_size=12))
def test_every_well_formed_line_comes_out(items):
    lines = []
    expected = []
    for kind, value in items:
        if kind == "good":
            raw = json.dumps(value, ensure_ascii=False).encode("utf-8", "surrogatepass")
            lines.append(raw)
            expected.append(value)
        else:
            noise = value.replace(b"\n", b" ")
            try:
                obj = json.loads(noise)
            except (ValueError, UnicodeDecodeError):
                obj = None
            if isinstance(obj, dict):  # noise that happens to be an object is a line too
                expected.append(obj)
            lines.append(noise)
    data = b"\n".join(lines) + b"\n"
    entries = run_all(data)
    got = [e.obj for e in entries]
    # Headers are not entries: drop a leading session line from the expectation.
    if expected and lines and isinstance(expected[0], dict) and expected[0].get("type") == "session":
        expected = expected[1:]
    assert len(got) == len(expected)
    for obj, want in zip(got, expected):
        assert obj.get("type") == want.get("type")
        if isinstance(want.get("id"), str) and want["id"]:
            assert obj["id"] == want["id"]
