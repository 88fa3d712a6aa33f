"""The importer against the oracle on a made-up tree (tests/synthetic.py).

Covers what the real samples lack: bad and pending lines, raw U+2028, header-less files, backup and
checkpoint copies, a fork file whose name differs from its header id, repeated model calls, v1
entries without ids, non-transcript files beside transcripts, and a live file that later grows and
then shrinks.
"""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import importer_check as ic  # noqa: E402
import oracle  # noqa: E402
import synthetic  # noqa: E402


def _expected(root):
    files = oracle.group_files(root)
    return files, {group: oracle.count_files(paths) for group, paths in files.items()}


def _import(root, db_url):
    proc = ic.run_cli(["import", root, "--db", db_url])
    status = proc.returncode  # assert on the int only: pytest would print the process's output
    assert status == 0, ic.describe(proc, "import synthetic")


@pytest.fixture(scope="module")
def synthetic_import(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("synthetic-import")
    root = synthetic.build(tmp / "tree")
    db_url = f"sqlite:///{tmp}/a.db"
    _import(root, db_url)
    return {"root": root, "db": tmp / "a.db", "url": db_url}


def test_per_session_counts(synthetic_import):
    files, expected = _expected(synthetic_import["root"])
    diffs = ic.compare(expected, ic.db_figures(synthetic_import["db"]), files)
    assert not diffs, ic.report(diffs)


def test_stats_totals(synthetic_import):
    _files, expected = _expected(synthetic_import["root"])
    totals = oracle.sum_counts(expected.values())
    got = ic.stats(synthetic_import["url"])
    diffs = ic.compare_stats(totals, got)
    assert not diffs, ic.report(diffs)
    assert got["usage"]["cost_total"] == pytest.approx(totals["usage"]["cost_total"])


def test_second_import_changes_no_count(synthetic_import):
    before = (ic.table_counts(synthetic_import["db"]), ic.stats(synthetic_import["url"]))
    _import(synthetic_import["root"], synthetic_import["url"])
    after = (ic.table_counts(synthetic_import["db"]), ic.stats(synthetic_import["url"]))
    assert after == before


def test_pending_line_completed_then_file_shrinks(tmp_path):
    root = synthetic.build(tmp_path / "tree")
    db_url = f"sqlite:///{tmp_path}/a.db"
    db = tmp_path / "a.db"
    live = root / "synth-one" / "agents" / "main" / "sessions" / f"{synthetic.A}.jsonl"
    _import(root, db_url)

    # the half-written last line is finished: one more user message, no pending line
    with live.open("ab") as fh:
        fh.write(b'llo"}}\n')
    _import(root, db_url)
    files, grown = _expected(root)
    assert grown[("synth-one", "main")]["pending_lines"] == 0
    assert grown[("synth-one", "main")]["per_session"][synthetic.A]["messages"] == 9
    diffs = ic.compare(grown, ic.db_figures(db), files)
    assert not diffs, ic.report(diffs)

    # the live file is rewritten shorter: the archive keeps every entry it has seen
    lines = live.read_bytes().split(b"\n")
    live.write_bytes(b"\n".join(lines[:5]) + b"\n")
    _import(root, db_url)
    diffs = ic.compare(grown, ic.db_figures(db), check_files=False)
    assert not diffs, ic.report(diffs)
