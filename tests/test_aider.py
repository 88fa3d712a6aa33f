"""Aider (importer/sources/aider.py): the real chat histories in ../shared/other-samples-2/aider, and
made-up ones written here for the incremental reads and the traps (docs/aider.md).

Expected figures are established independently of the importer: :func:`oracle` reads the sample files
line by line and counts what docs/aider.md's rules say (it shares no code with the importer). The
samples are real people's data: assertions compare counts and booleans only, never their text.
"""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
from transcripts import do_import, dump, rows, scalar  # noqa: E402
from vocabulary_checks import assert_vocabulary  # noqa: E402

from importer.sources import Scope  # noqa: E402
from importer.sources import aider as A  # noqa: E402
from importer.sources.base import Discovery  # noqa: E402
from importer.sources.fs import LOCAL  # noqa: E402
from importer.store import open_store  # noqa: E402

REPO_ROOT = Path(__file__).resolve().parents[1]
SAMPLES = REPO_ROOT.parent / "shared" / "other-samples-2" / "aider"
KIND = "aider"
NAME = ".aider.chat.history.md"


def samples() -> Path:
    if not SAMPLES.is_dir():
        if os.environ.get("CI", "").strip().lower() == "true":
            pytest.fail(f"Aider samples missing under CI: {SAMPLES}")
        pytest.skip(f"no Aider samples at {SAMPLES}")
    return SAMPLES


# -- an independent counter -------------------------------------------------------------------
# From docs/aider.md's rules only: a session starts at each "# aider chat started at" line; a prompt is
# a run of consecutive "####" lines ending in two spaces (a command when it starts with "/"); Aider's output lines start
# with "> " (a message whose first line does not end in two spaces runs on to the line that does); a
# model call's usage is a "> Tokens:" line (k = 1,000, M = 1,000,000); a SEARCH/REPLACE edit is a
# "<<<<<<< SEARCH" line outside Aider's output; "Applied edit to" lines are results.


def _count(text: str) -> float:
    mult = {"k": 1000, "M": 1_000_000}.get(text[-1], 1)
    return round(float(text.rstrip("kM")) * mult)


def oracle(root: Path) -> dict:
    out = {"sessions": 0, "prompts": 0, "commands": 0, "calls_with_usage": 0, "sent": 0, "received": 0,
           "cost": 0.0, "search_edits": 0, "applied_lines": 0}
    for path in sorted(root.glob(f"*/{NAME}")):
        lines = path.read_text("utf-8").split("\n")
        previous_prompt = False
        inside_output = False
        for line in lines:
            if inside_output:
                inside_output = not line.endswith("  ")
                continue
            if line.startswith("# aider chat started at "):
                out["sessions"] += 1
            is_prompt = (line.startswith("#### ") or line == "####") and line.endswith("  ")  # (a reply's h4: no)
            if is_prompt and not previous_prompt:
                out["prompts"] += 1
                out["commands"] += line[5:].startswith("/")
            previous_prompt = is_prompt
            if line.startswith("> "):
                inside_output = not line.endswith("  ")
                m = re.match(r"> Tokens: ([\d.]+[kM]?) sent, ([\d.]+[kM]?) received\.(?: Cost: \$([\d.]+) message)?",
                             line)
                if m:
                    out["calls_with_usage"] += 1
                    out["sent"] += _count(m.group(1))
                    out["received"] += _count(m.group(2))
                    out["cost"] += float(m.group(3) or 0)
                out["applied_lines"] += line.startswith("> Applied edit to ")
            elif line.strip() == "<<<<<<< SEARCH":
                out["search_edits"] += 1
    return out


@pytest.fixture(scope="module")
def archive(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("aider") / "a.db"
    report = do_import(db, samples(), server="samples")
    assert (report.files_seen, report.files_imported, report.files_failed) == (2, 2, 0), report.failures
    return db


def test_samples_counts_equal_the_oracle(archive):
    want = oracle(samples())
    db = archive
    assert scalar(db, "SELECT COUNT(*) FROM sessions WHERE source = 'aider'") == want["sessions"]
    assert dict(rows(db, "SELECT native_role, COUNT(*) FROM messages WHERE role = 'user' GROUP BY 1")) == {
        "user": want["prompts"] - want["commands"], "command": want["commands"]}
    assert rows(db, "SELECT COUNT(*), SUM(input_tokens), SUM(output_tokens) FROM messages WHERE role = 'assistant' "
                    "AND output_tokens IS NOT NULL")[0] == (want["calls_with_usage"], want["sent"], want["received"])
    recorded = scalar(db, "SELECT SUM(cost_usd) FROM messages WHERE cost_source = 'recorded'")
    assert recorded == pytest.approx(want["cost"])
    # every reply's usage is rounded: flagged in raw_json, and its time is the run's start (approximate)
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE output_tokens IS NOT NULL AND "
                      "json_extract(raw_json, '$.usage_rounded') = 1") == want["calls_with_usage"]
    assert scalar(db, "SELECT MIN(time_approximate) FROM messages") == 1
    assert rows(db, "SELECT DISTINCT times_approximate FROM sessions") == [(1,)]
    assert scalar(db, "SELECT COUNT(*) FROM messages m JOIN sessions s ON s.id = m.session_id "
                      "WHERE m.timestamp IS NOT s.started_at") == 0
    # edits: each SEARCH/REPLACE block one call of the edit tool; each "Applied edit" line answers some
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE json_extract(arguments, '$.search') IS NOT NULL") == \
        want["search_edits"]
    assert rows(db, "SELECT DISTINCT tool_name FROM tool_calls") == [("edit",)]
    assert scalar(db, "SELECT COUNT(DISTINCT seq) FROM messages WHERE role = 'toolResult'") == want["applied_lines"]
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls WHERE command IS NOT NULL") == 0
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE has_thinking = 1") > 0  # <think> replies
    assert rows(db, "SELECT COUNT(*), COUNT(agent_version), COUNT(model), COUNT(cwd), COUNT(project) FROM sessions") == [
        (want["sessions"],) * 5]


def test_samples_stats_json_by_source(archive):
    want = oracle(samples())
    proc = ic.run_cli(["stats", "--json", "--db", f"sqlite:///{archive}"])
    assert proc.returncode == 0, ic.describe(proc, "stats --json")
    mine = json.loads(proc.stdout)["by_source"][KIND]
    # every reply is a model call; some have no usage line (interrupted, or the provider said none)
    replies = scalar(archive, "SELECT COUNT(*) FROM messages WHERE role = 'assistant'")
    assert replies >= want["calls_with_usage"]
    assert (mine["sessions"], mine["model_calls"], mine["shell_calls"]) == (want["sessions"], replies, 0)
    assert mine["messages_by_role"]["user"] == want["prompts"]
    assert mine["tool_calls"] == scalar(archive, "SELECT COUNT(*) FROM tool_calls")
    assert (mine["usage"]["input"], mine["usage"]["output"]) == (want["sent"], want["received"])


def test_samples_speak_the_vocabulary(archive):
    assert_vocabulary(archive, KIND, usage=True, shell_exit_codes=False, tool_results=True)


def test_samples_render_in_the_conversation_view(archive, tmp_path):
    from importer.snapshot import export_snapshot
    from test_explorer import Site

    store = open_store(f"sqlite:///{archive}")
    try:
        export_snapshot(store, tmp_path / "snapshot.db", timezone="UTC")
    finally:
        store.close()
    site = Site(tmp_path / "snapshot.db")
    sid = scalar(tmp_path / "snapshot.db", "SELECT id FROM sessions ORDER BY message_count DESC LIMIT 1")
    page = site.get(f"/-/agentbase/session/{sid}")
    assert page.status_code == 200 and "ab-turn-assistant" in page.text


# -- made-up histories ------------------------------------------------------------------------

RUN = """
# aider chat started at 2026-03-01 10:00:00

> aider --model sonnet  
> Aider v0.86.0  
> Main model: anthropic/claude-sonnet-4 with diff edit format, infinite output  
> Git repo: .git with 3 files  
> Repo-map: using 4096 tokens  

#### fix the bug  
#### in app.py  

I will fix it.

app.py
```python
<<<<<<< SEARCH
x = 1
=======
x = 2
>>>>>>> REPLACE
```

app.py
```python
<<<<<<< SEARCH
y = 1
=======
y = 2
>>>>>>> REPLACE
```

> Tokens: 2.5k sent, 1.2k cache write, 10k cache hit, 240 received. Cost: $0.0123 message, $0.0123 session.  
> Applied edit to app.py  
> Commit abc1234 fix: the bug  

#### /tokens  
> Approximate context window usage  
"""

SECOND_RUN = """
# aider chat started at 2026-03-02 09:00:00

> Aider v0.86.1  
> Model: ollama/qwen3 with whole edit format  

#### write hello.py  

<think>
a short plan
</think>
Here it is.

hello.py
```
print("hello")
```

> Tokens: 900 sent, 50 received.  
> Applied edit to hello.py  
"""


def write(folder: Path, text: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / NAME
    path.write_text(text, encoding="utf-8")
    return path


def test_a_made_up_run_maps_to_the_vocabulary(tmp_path):
    write(tmp_path / "projects" / "app", RUN)
    db = tmp_path / "a.db"
    report = do_import(db, tmp_path / "projects")  # a folder of projects
    assert report.files_imported == 1, report.failures
    assert rows(db, "SELECT role, native_role, seq FROM messages ORDER BY seq, message_uuid") == [
        ("user", "user", 9), ("assistant", "assistant", 12), ("toolResult", "output", 33),
        ("toolResult", "output", 33), ("user", "command", 36)]
    assert json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE role = 'user' AND seq = 9")) == [
        {"type": "text", "text": "fix the bug\nin app.py"}]
    blocks = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE role = 'assistant'"))
    assert [b["type"] for b in blocks] == ["text", "toolCall", "toolCall"]
    assert blocks[1]["arguments"] == {"path": "app.py", "search": "x = 1", "replace": "x = 2"}
    assert rows(db, "SELECT input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, total_tokens, "
                    "cost_usd, cost_source, model, provider FROM messages WHERE role = 'assistant'") == [
        (0, 240, 10000, 1200, 11440, 0.0123, "recorded", "anthropic/claude-sonnet-4", "anthropic")]
    assert rows(db, "SELECT COUNT(*), COUNT(result_message_id) FROM tool_calls") == [(2, 2)]
    assert rows(db, "SELECT session_uuid LIKE '20260301T100000-%', started_at, cwd, project, agent_version, "
                    "times_approximate FROM sessions") == [
        (1, "2026-03-01 10:00:00.000", str(tmp_path / "projects" / "app"), "app", "v0.86.0", 1)]
    assert [r[0] for r in rows(db, "SELECT entry_type FROM entries ORDER BY seq")] == ["run", "output", "output",
                                                                                      "output"]
    assert_vocabulary(db, KIND, usage=True, shell_exit_codes=False, tool_results=True)


def test_an_appended_run_reads_only_what_is_new(tmp_path):
    path = write(tmp_path / "app", RUN)
    db = tmp_path / "a.db"
    first = do_import(db, tmp_path / "app")
    before = set(rows(db, "SELECT message_uuid, raw_hash FROM messages"))
    with open(path, "a", encoding="utf-8") as f:
        f.write(SECOND_RUN)
    second = do_import(db, tmp_path / "app")
    assert second.files_imported == 1 and second.messages_added == 3  # prompt, reply, result
    # read from where the first read stopped (its unsettled last block), never the whole file again
    assert second.bytes_read < len(SECOND_RUN.encode()) + 2 * 1024 + 200
    after = set(rows(db, "SELECT message_uuid, raw_hash FROM messages"))
    assert before <= after and len(after - before) == 3
    assert scalar(db, "SELECT COUNT(*) FROM entry_revisions") == 0
    assert scalar(db, "SELECT COUNT(*) FROM sessions") == 2
    reply = json.loads(scalar(db, "SELECT content_blocks FROM messages WHERE role = 'assistant' AND seq > 40"))
    assert [b["type"] for b in reply] == ["thinking", "text", "toolCall"]
    assert reply[2]["arguments"] == {"path": "hello.py", "content": 'print("hello")'}
    assert rows(db, "SELECT model, agent_version FROM sessions ORDER BY started_at") == [
        ("anthropic/claude-sonnet-4", "v0.86.0"), ("ollama/qwen3", "v0.86.1")]
    third = do_import(db, tmp_path / "app")
    assert (third.files_imported, third.bytes_read) == (0, 0)
    assert first.files_imported == 1


def test_a_reply_caught_half_written_gets_its_usage_when_complete(tmp_path):
    cut = RUN.index("> Tokens:")
    path = write(tmp_path / "app", RUN[:cut - 30])  # inside the second edit block, mid-line
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "app")
    assert rows(db, "SELECT COUNT(*), SUM(output_tokens) FROM messages WHERE role = 'assistant'") == [(1, None)]
    path.write_text(RUN, encoding="utf-8")
    do_import(db, tmp_path / "app")
    assert rows(db, "SELECT COUNT(*), SUM(output_tokens) FROM messages WHERE role = 'assistant'") == [(1, 240)]
    assert rows(db, "SELECT COUNT(*), COUNT(result_message_id) FROM tool_calls") == [(2, 2)]
    fresh = tmp_path / "b.db"
    do_import(fresh, tmp_path / "app")
    got, want = dump(db), dump(fresh)
    for table in ("messages", "tool_calls"):
        assert got[table] == want[table], table


def test_a_multi_line_output_message_is_not_a_reply(tmp_path):
    text = RUN.replace("> Commit abc1234 fix: the bug  \n",
                       "> # 1 SEARCH/REPLACE block failed to match!\n\n<<<<<<< SEARCH\nz\n=======\nw\n"
                       ">>>>>>> REPLACE\n\nJust reply with fixed versions.  \n")
    write(tmp_path / "app", text)
    db = tmp_path / "a.db"
    do_import(db, tmp_path / "app")
    assert scalar(db, "SELECT COUNT(*) FROM messages WHERE role = 'assistant'") == 1
    assert scalar(db, "SELECT COUNT(*) FROM tool_calls") == 2


def test_files_of_other_kinds_are_not_claimed(tmp_path):
    # a markdown file by that name that holds no run: "not an Aider chat history"
    path = write(tmp_path / "notes", "# My notes\n\nsome text\n")
    db = tmp_path / "a.db"
    report = do_import(db, path)
    assert (report.files_imported, report.files_ignored) == (0, 1)
    assert "not an Aider chat history" in scalar(db, "SELECT error_message FROM parsed_files")
    # a repository without the file, and other markdown: no Aider layout
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("#### not a prompt\n")
    out = Discovery()
    assert A.SOURCE.find(LOCAL, str(tmp_path / "repo"), Scope("s"), out) is False and out.units == []
    assert not A.SOURCE.claims_file("README.md", b"# aider chat started at 2026-01-01 00:00:00\n")
    assert A.SOURCE.claims_file(NAME, b"")


def test_the_servers_zone_and_the_agent(tmp_path):
    write(tmp_path / "app", RUN)
    db = tmp_path / "a.db"
    from importer.pipeline import run_import
    from importer.sources import discover

    found = discover([str(tmp_path / "app")], server="s", agent="mine", timezone="Asia/Tokyo")
    store = open_store(f"sqlite:///{db}")
    try:
        run_import(store, [], sources=found)
    finally:
        store.close()
    assert rows(db, "SELECT agent_id, started_at FROM sessions") == [("mine", "2026-03-01 01:00:00.000")]


def test_samples_over_ssh_equal_a_local_import(tmp_path):
    import yaml
    from sshd import SSHServer, require_sshd

    from importer.config import load_config
    from importer.sync import import_from_config

    root = samples()
    require_sshd()
    server = SSHServer(tmp_path / "sshd").start()
    try:
        known = tmp_path / "known_hosts"
        server.write_known_hosts(known)
        config = {"database": f"sqlite:///{tmp_path / 'ssh.db'}", "known_hosts": str(known),
                  "ssh_config": str(tmp_path / "no-ssh-config"), "connect_timeout": 5, "read_timeout": 30,
                  "servers": [{"name": "remote", "host": "127.0.0.1", "port": server.port, "user": server.user,
                               "identity_file": str(server.user_key), "paths": [str(root)]}]}
        path = tmp_path / "config.yml"
        path.write_text(yaml.safe_dump(config))
        loaded = load_config(path)
        store = open_store(loaded.database)
        try:
            report = import_from_config(store, loaded)
        finally:
            store.close()
        assert report.ok
    finally:
        server.stop()
    local = tmp_path / "local.db"
    do_import(local, root, server="remote")
    got, want = dump(tmp_path / "ssh.db"), dump(local)
    assert got["messages"] and got == want


def test_doctor_lists_the_versions_the_samples_hold(tmp_path):
    import doctor_check as dc

    # the oracle: each run's (from a "# aider chat started at" line) last "> Aider vX.Y.Z" line
    want = set()
    for history in samples().rglob(NAME):
        run = None
        for line in history.read_text(errors="replace").splitlines():
            if line.startswith("# aider chat started at "):
                if run:
                    want.add(run)
                run = None
            m = re.match(r"^> Aider (v\d[\w.+-]*)", line)
            if m:
                run = m.group(1)
        if run:
            want.add(run)
    assert want
    db = tmp_path / "a.db"
    assert do_import(db, samples(), server="samples").files_failed == 0
    assert dc.doctor_versions(tmp_path / "home", KIND, db) == want
