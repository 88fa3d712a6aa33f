"""Did a change alter what is archived? Import the same transcripts with two checkouts and compare the
messages, tool_calls, entries and sessions tables row by row (ids and import times left out).

    git worktree add /tmp/before <commit>      # or: git archive <commit> | tar -x -C /tmp/before
    cd /tmp && python3 /path/to/bench/rowdiff.py /tmp/before /path/to/checkout [PATH ...]

Default PATHs: ../shared/samples as one tree, every transcript file of ../shared/other-samples and
../shared/other-samples-2 on its own, and the agent-server fixture (tests/agent_server_fixture.py).
Prints, per table, the rows of each side and how many differ (the first five: the columns that differ, never their content);
exit status 1 when any differ. Run it from outside a checkout (each import runs in a temp folder).
"""
import os, sqlite3, subprocess, sys, tempfile
old, new = sys.argv[1], sys.argv[2]
S = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared")
tmp = tempfile.mkdtemp()
if sys.argv[3:]:
    paths = sys.argv[3:]
else:
    paths = [f"{S}/samples"]
    for root in (f"{S}/other-samples", f"{S}/other-samples-2"):
        for dp, dn, fn in os.walk(root):
            paths += [os.path.join(dp, f) for f in sorted(fn) if f.endswith((".jsonl", ".json", ".db", ".md", ".txt"))]
    sys.path.insert(0, os.path.join(new, "tests"))
    import agent_server_fixture as F
    paths.append(str(F.build_agent_db(__import__("pathlib").Path(tmp) / "agent-server", seed=0).root))
SKIP = {"id", "session_id", "message_id", "result_message_id", "created_at", "updated_at", "imported_at", "first_imported_at",
        "last_imported_at", "parsed_at", "mtime", "file_mtime"}
def run(checkout, db):
    env = dict(os.environ, PYTHONPATH=checkout, AGENTBASE_HOME=tmp, HOME=tmp)
    for i, p in enumerate(paths):
        r = subprocess.run([sys.executable, "-m", "importer", "import", p, "--server", f"s{i}", "--db", f"sqlite:///{db}", "-q"],
                           env=env, capture_output=True, text=True, cwd=tmp)  # (never the cwd: its importer/ would win)
        if r.returncode not in (0, 1):
            print("import failed", checkout, p, r.stderr[-500:])
def rows(db, table, only=None):
    c = sqlite3.connect(db)
    cols = [r[1] for r in c.execute(f"PRAGMA table_info({table})") if r[1] not in SKIP and (only is None or r[1] in only)]
    key = {"messages": "server, session_uuid, message_uuid", "tool_calls": "server, session_uuid, message_uuid, block_index",
           "entries": "server, session_uuid, entry_uuid", "sessions": "server, session_uuid"}[table]
    return cols, {tuple(r[:len(key.split(","))]): r for r in c.execute(f"SELECT {key}, {', '.join(cols)} FROM {table}")}
a, b = f"{tmp}/old.db", f"{tmp}/new.db"
run(old, a); run(new, b)
bad = 0
for t in ("messages", "tool_calls", "entries", "sessions"):
    ca, _ = rows(a, t); cb, _ = rows(b, t)
    if ca != cb: print(t, "columns differ (compared on the common ones):", set(ca) ^ set(cb))
    common = set(ca) & set(cb)
    ca, ra = rows(a, t, common); cb, rb = rows(b, t, common)
    k = len(ra and next(iter(ra)) or ())
    diff = 0
    for key in ra.keys() | rb.keys():
        x, y = ra.get(key), rb.get(key)
        if x != y:
            diff += 1
            if diff <= 5:
                if x is None or y is None: print(t, "only in", "new" if x is None else "old", key)
                else: print(t, "row differs in", [c for i, c in enumerate(ca) if x[k+i] != y[k+i]])  # (names only: never content)
    print(f"{t}: {len(ra)} old rows, {len(rb)} new rows, {diff} differ")
    bad += diff
sys.exit(1 if bad else 0)
