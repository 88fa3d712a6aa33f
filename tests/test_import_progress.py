"""`agentbase import`'s progress bar counts what its summary counts: files (a transcript, a session of
a SQLite store), never the listing's containers. The CLI runs for real with its stderr on a
pseudo-terminal (the bar is drawn only on a terminal), and the bar's last frame is read from what it
drew there."""

from __future__ import annotations

import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from test_opencode import Conversation, conversation, usage
from transcripts import conversation as openclaw_conversation, sessions_dir, write

REPO = Path(__file__).resolve().parents[1]
FRAME = re.compile(r"importing\s.*?(\d+)/(\d+)")
SEEN = re.compile(r"files: (\d+) seen, (\d+) unchanged, (\d+) imported")


def on_a_terminal(env, *args) -> tuple[int, str]:
    """Run ``agentbase ARGS`` with stderr on a pty; its exit code and all it wrote there."""
    main, side = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "importer", *map(str, args)], cwd=REPO, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=side)
    os.close(side)
    out = bytearray()
    while True:
        try:
            chunk = os.read(main, 65536)
        except OSError:  # EIO: the child closed its side
            break
        if not chunk:
            break
        out += chunk
    os.close(main)
    return proc.wait(timeout=120), out.decode("utf-8", "replace")


def bar_and_summary(text: str) -> tuple[list[tuple[int, int]], tuple[int, int, int]]:
    frames = [(int(a), int(b)) for a, b in FRAME.findall(text)]
    summary = SEEN.search(text)
    assert frames and summary, text[-600:]
    return frames, tuple(int(g) for g in summary.groups())


def test_the_bar_counts_the_files_the_summary_counts(tmp_path):
    tree = tmp_path / "tree"
    # three OpenClaw JSONL transcripts, one agent
    for n in range(3):
        sid = f"0c0c0c0c-0000-4000-8000-00000000000{n}"
        write(sessions_dir(tree / "openclaw") / f"{sid}.jsonl", openclaw_conversation(sid, turns=2))
    # an OpenCode SQLite store holding two sessions: one container, two files
    store = tree / "opencode" / "opencode.db"
    store.parent.mkdir(parents=True)
    conversation("ses_0001made").write_db(store)
    conversation("ses_0002made").write_db(store)
    env = dict(os.environ, AGENTBASE_HOME=str(tmp_path / "home"), AGENTBASE_CONFIG=str(tmp_path / "none.yml"),
               AGENTBASE_DB=f"sqlite:///{tmp_path / 'archive.db'}", COLUMNS="120")
    paths = (tree / "openclaw", tree / "opencode")

    code, text = on_a_terminal(env, "import", *paths)
    assert code == 0, text[-600:]
    frames, (seen, unchanged, imported) = bar_and_summary(text)
    assert (seen, unchanged, imported) == (5, 0, 5)
    # the total is the files from the first frame on (the store was never opened: it grows when it is),
    # and the last frame is the summary's count
    assert frames[0] == (0, 3) and frames[-1] == (5, 5), frames
    assert all(done <= total for done, total in frames), frames

    # nothing changed: the store is not opened, the two files it held count, as the summary's
    code, text = on_a_terminal(env, "import", *paths)
    assert code == 0, text[-600:]
    frames, (seen, unchanged, imported) = bar_and_summary(text)
    assert (seen, unchanged, imported) == (5, 5, 0)
    assert frames[0] == (0, 5) and frames[-1] == (5, 5), frames

    # the store grew a third session: expected 5 (what it held), 6 seen
    third = Conversation("ses_0003made", title="Another")
    third.user("One more")
    third.assistant([[{"type": "text", "text": "Yes."}]], [usage(10, 2, 0.01)])
    third.write_db(store)
    code, text = on_a_terminal(env, "import", *paths)
    assert code == 0, text[-600:]
    frames, (seen, unchanged, imported) = bar_and_summary(text)
    assert (seen, unchanged, imported) == (6, 5, 1)
    assert frames[0] == (0, 5) and frames[-1] == (6, 6), frames
