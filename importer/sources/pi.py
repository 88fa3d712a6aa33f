"""Standalone pi (the coding agent OpenClaw is built on) writes the same JSONL
format as OpenClaw to ``~/.pi/agent/sessions/--<cwd>--/<ISO>_<uuid>.jsonl``:
one folder per working directory. Its sessions are archived under agent
``pi`` (or ``--agent``), source ``pi``.

A PATH may be ``~/.pi``, ``~/.pi/agent``, its ``sessions/`` folder, or one
``--<cwd>--`` folder; a transcript file outside an OpenClaw layout is pi's too.
"""

from __future__ import annotations

from .base import Discovery, Scope
from .fs import FileSystem
from .openclaw import OpenClawJSONL, TranscriptFile, list_sessions_dir

SESSIONS_DIR = "sessions"
AGENT = "pi"


def is_cwd_folder(name: str) -> bool:
    """pi's per-working-directory session folder: ``--<cwd with / as ->--``."""
    return len(name) >= 4 and name.startswith("--") and name.endswith("--")


class Pi(OpenClawJSONL):
    kind = "pi"
    # pi's bash; and exec, since a lone OpenClaw transcript outside an agents tree is read as pi's.
    shell_tools = frozenset({"bash", "exec"})
    order = 10  # before OpenClaw's looser "a folder of transcripts"
    places = ("~/.pi",)
    not_this = "not a pi transcript: no session header and no known entry type"

    def find(self, fs: FileSystem, path: str, scope: Scope, out: Discovery) -> bool:
        name = fs.basename(path)
        if is_cwd_folder(name):
            list_sessions_dir(self, fs, scope.server, scope.agent or AGENT, path, out)
            return True
        for root in (fs.join(path, "agent", SESSIONS_DIR), fs.join(path, SESSIONS_DIR), path):
            folders = [d for d in fs.subdirs(root) if is_cwd_folder(d.name)]
            if folders:
                agent = scope.agent or AGENT
                for folder in folders:
                    list_sessions_dir(self, fs, scope.server, agent, folder.path, out)
                return True
        return False

    def claims_file(self, name: str, head: bytes) -> bool:
        return False  # a single file: OpenClaw's source decides (see file_unit)

    def file_unit(self, fs, path, size, mtime_ns, scope, out):
        return TranscriptFile(self, scope.server, scope.agent or AGENT, path, fs.basename(path), size, mtime_ns,
                              fs=fs)

    def finish_group(self, store, server, agent_id, metadata) -> None:
        return None  # pi keeps no sessions.json


SOURCE = Pi()
