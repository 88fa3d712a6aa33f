"""The one row builder (importer/rows.py, issue #23): what it derives from a message's blocks, the
options a kind passes (``preview_else``, ``truncated``), and that no other module builds a
``messages`` or ``tool_calls`` row by hand."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from importer import rows as R
from importer import schema
from importer import vocabulary as V

REPO = Path(__file__).resolve().parent.parent
# Columns only the row builder writes: a reader naming one in a dict or an assignment builds a row by hand.
DERIVED = frozenset({"first_tool_call", "tool_call_count", "tool_calls_json", "has_tool_calls", "has_thinking",
                     "thinking_text", "block_index"})


def _blocks() -> list:
    return [
        {"type": "thinking", "thinking": "first thought"},
        {"type": "text", "text": "<b>hello</b> there"},
        {"type": "toolCall", "id": "c1", "name": "exec", "arguments": {"command": "ls -la"}},
        {"type": "thinking", "thinking": "second thought"},
        {"type": "toolCall", "id": "c2", "name": "read", "arguments": {"path": "a.txt", "command": "not a shell"}},
    ]


def test_a_row_has_every_column_the_builder_owns_and_derives_them_from_the_blocks():
    blocks = _blocks()
    row = R.message_row("m1", V.ASSISTANT, blocks=blocks, native_role="assistant", timestamp="t", seq=3)
    assert set(row) == set(R.MESSAGE_COLUMNS)
    tools = [b for b in blocks if b["type"] == "toolCall"]
    assert row["first_tool_call"] == "exec"
    assert row["tool_call_count"] == 2 and row["has_tool_calls"] == 1
    assert json.loads(row["tool_calls_json"]) == tools
    assert row["thinking_text"] == "first thought" and row["has_thinking"] == 1
    assert json.loads(row["content_blocks"]) == blocks
    assert row["text_preview"] == "hello there"  # the first text block, its HTML stripped
    assert row["is_context"] == 0
    assert R.message_row("m2", V.SYSTEM, blocks=[])["is_context"] == 1


def test_widths_flags_and_strings_follow_the_schema():
    widths = {c: int(t.split(":")[1]) for c, t in schema.TABLES["messages"] if t.startswith("str:")}
    row = R.message_row("m", V.ASSISTANT, blocks=None, model="m" * 500, stop_reason=7, is_error="yes")
    assert len(row["model"]) == widths["model"]
    assert row["stop_reason"] is None  # a string column keeps a string or nothing
    assert row["is_error"] == 1
    with pytest.raises(TypeError):
        R.message_row("m", V.ASSISTANT, not_a_column=1)
    with pytest.raises(ValueError):
        R.message_row("m", "toolCall")


def test_preview_else_stands_for_a_message_whose_content_gives_no_preview():
    call = [{"type": "toolCall", "id": "c", "name": "shell", "arguments": {"command": "ls"}}]
    assert R.message_row("a", V.ASSISTANT, blocks=call, preview_else="<i>ls</i> -la")["text_preview"] == "ls -la"
    # an empty text gives an empty preview: what stands for it is used instead
    empty = [{"type": "text", "text": ""}]
    assert R.message_row("b", V.TOOL_RESULT, blocks=empty, preview_else="shell completed")["text_preview"] \
        == "shell completed"
    # a message with text of its own keeps it
    text = [{"type": "text", "text": "output"}]
    assert R.message_row("c", V.TOOL_RESULT, blocks=text, preview_else="shell completed")["text_preview"] == "output"
    assert R.message_row("d", V.ASSISTANT, blocks=None)["text_preview"] is None
    long = "x" * (R.PREVIEW_CHARS * 3)
    assert R.message_row("e", V.ASSISTANT, blocks=None, preview_else=long)["text_preview"] == long[:R.PREVIEW_CHARS]


def test_tool_call_rows_one_per_call_a_command_for_shell_calls_only_and_the_truncated_ones():
    blocks = _blocks()
    calls = R.tool_call_rows(blocks, "t", frozenset({"exec"}), truncated={"c2"})
    expected = [(i, b["id"], b["name"]) for i, b in enumerate(blocks) if b["type"] == "toolCall"]
    assert [(c["block_index"], c["call_id"], c["tool_name"]) for c in calls] == expected
    assert [c["command"] for c in calls] == ["ls -la", None]
    assert [c["is_truncated"] for c in calls] == [0, 1]
    assert [json.loads(c["arguments"]) for c in calls] == [b["arguments"] for b in blocks if b["type"] == "toolCall"]
    # a command the kind reads itself (a list, another key) replaces arguments.command
    assert R.tool_call_rows(blocks, "t", frozenset({"exec"}), {2: "echo hi"})[0]["command"] == "echo hi"
    assert R.tool_call_rows(blocks, "t", frozenset({"exec"}), {2: None})[0]["command"] is None
    assert [c["is_truncated"] for c in R.tool_call_rows(blocks, "t", frozenset())] == [0, 0]


def test_a_tool_call_is_on_an_assistant_row_only():
    """docs/vocabulary.md: a tool call is on the assistant row that made it; a toolCall block in a
    row of another role stays in its content and is no call."""
    blocks = _blocks()
    for role in (V.USER, V.TOOL_RESULT, V.SYSTEM):
        row = R.message_row("m", role, blocks=blocks)
        assert (row["first_tool_call"], row["tool_call_count"], row["tool_calls_json"], row["has_tool_calls"]) \
            == (None, 0, None, 0), role
        assert json.loads(row["content_blocks"]) == blocks
        assert R.tool_call_rows(blocks, "t", frozenset({"exec"}), role=role) == []
    assert len(R.tool_call_rows(blocks, "t", frozenset({"exec"}), role=V.ASSISTANT)) == 2


def test_no_reader_builds_a_messages_or_tool_calls_row_by_hand():
    """The kinds (sources/) and OpenClaw's parser name no derived column: rows.py makes them."""
    found = []
    for path in sorted((REPO / "importer" / "sources").rglob("*.py")) + [REPO / "importer" / "parser.py"]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            keys = set()
            if isinstance(node, ast.Dict):
                keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
            elif isinstance(node, ast.Assign):
                keys = {t.slice.value for t in node.targets
                        if isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant)}
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update":
                keys = {k.arg for k in node.keywords}
            if keys & DERIVED:
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {sorted(keys & DERIVED)}")
    assert found == []


def test_every_column_a_kind_gives_lands_in_its_own_column():
    """message_row hands its named columns to the setter made from the schema (rows._given_setter)
    by position: each one given alone is found in its own column, made what the column holds."""
    code = R.message_row.__code__
    named = code.co_varnames[code.co_argcount:code.co_argcount + code.co_kwonlyargcount]
    given = [n for n in named if n in R.MESSAGE_COLUMNS and n not in R._DERIVED and n not in R._OPTIONS]
    assert len(given) > 20 and "is_error" in given and "cost_usd" in given and "model" in given
    for i, name in enumerate(given):
        check = R._CHECKS.get(name)
        value, stored = ((True, 1) if check == 0 else ("x" * 300, "x" * (check if check > 0 else 300))
                         if check is not None else (1000 + i, 1000 + i))
        row = R.message_row("u", "assistant", **{name: value})
        assert row[name] == stored, name
        assert all(row[other] == R._DEFAULTS[other] for other in given if other != name), name
        if check is not None and check != 0:  # anything but a string: None
            assert R.message_row("u", "assistant", **{name: 5})[name] is None
