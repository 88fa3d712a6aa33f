"""A made-up agent-server ``agent.db`` (SQLite, WAL, Drizzle migrations), built at test time.

No public ``agent.db`` exists, so this builds one from the data model in ../shared/SIBLINGS.md
section 2. The event ``type`` vocabulary is the inference of ../shared/FORMAT-OTHERS.md section 2,
with the gaps filled in here (and said so). Everything written is made up. Standard library only.

``build_agent_db(root, seed=0)`` writes::

    root/data/agent.db                                   SQLite, journal_mode=WAL, fully checkpointed
    root/workspaces/<session id>/uploads/...             files rows with origin 'upload'
    root/workspaces/<session id>/outputs/...             files rows with origin 'agent'
    root/workspaces/<session id>/.agent/tool-outputs/<toolCallId>.log
                                                         the full text of a truncated tool output

and returns :class:`Expected`, figures worked out from the generator's own model. The content
depends only on ``seed`` (ids, token counts, filler runs, which commands); every feature listed
below is there whatever the seed.

Conventions (one per kind of column, as Drizzle's SQLite dialect stores them)
----------------------------------------------------------------------------
- Times: ``integer`` epoch **milliseconds** UTC (Drizzle ``integer(..., {mode: 'timestamp_ms'})``)
  in every ``*_at`` column and in ``events.ts`` / ``audit_logs.ts``. The one exception is
  ``usage_daily.date``: ``text`` ``'YYYY-MM-DD'``, the UTC day of the run's ``started_at``.
- Booleans: ``integer`` 0/1 (``{mode: 'boolean'}``; DDL defaults spelled ``true``/``false``).
- JSON: ``text`` holding compact ``JSON.stringify`` output, non-ASCII kept raw (``{mode: 'json'}``).
- Ids: text uuid4 (``crypto.randomUUID()``) for api_keys, profiles, knowledge_roots, sessions, runs,
  interactions and files; ``audit_logs.id`` is an ``integer`` AUTOINCREMENT; ``admin_sessions.id`` is
  the login token itself (43 base64url characters: a secret).
- ``__drizzle_migrations`` is Drizzle's SQLite table (``id SERIAL PRIMARY KEY, hash text NOT NULL,
  created_at numeric``): ``hash`` = sha256 hex of the migration file, ``created_at`` = the journal's
  ``when`` (ms). ``SERIAL`` is not ``INTEGER``, so ``id`` is not a rowid alias and Drizzle's inserts
  leave it NULL, as in real databases. ``PRAGMA user_version`` stays 0.
- ``sessions.api_key_id`` is not in SIBLINGS.md's column list but is implied by "api_keys 1-n
  sessions" ("sessions belong to an API key"); it is what ``usage_daily.api_key_id`` groups by.
- ``sessions.permission_mode`` ``''`` means "the profile's ``permission_mode``". Modes use Claude's
  names for both providers: ``default``, ``acceptEdits``, ``plan``, ``bypassPermissions``.
- ``sessions.workspace_dir``: absolute path, ``<workspace_base>/<session id>`` (``workspace_base``
  defaults to ``root/workspaces``; pass ``'/srv/agent-server/workspaces'`` to get a database whose
  paths point elsewhere, as a copied ``agent.db``). One archived session's workspace has been deleted
  (retention): its ``files`` rows remain, the directory does not.
- Runs: ``status`` is ``completed`` | ``failed`` | ``interrupted`` (and ``running`` only for rows
  the helpers below add). ``input_tokens`` counts every prompt token: for Claude
  ``input_tokens + cache_creation_input_tokens + cache_read_input_tokens`` of the SDK ``result``
  usage; for Codex the turn's ``inputTokens`` (which include ``cachedInputTokens``).
  ``output_tokens``: Claude ``output_tokens``; Codex ``outputTokens`` (which include
  ``reasoningOutputTokens``). ``cost_usd``: Claude runs carry the SDK's ``total_cost_usd`` (rounded
  to 6 decimals, priced with :data:`CLAUDE_PRICES`); **Codex runs have ``cost_usd`` NULL** (Codex
  reports no cost; a price table must supply it). ``runs`` has no prompt column: the prompt is the
  run's ``user.message`` event (exactly one per run).
- ``usage_daily`` is exactly the aggregate of the *ended* runs (``ended_at`` not NULL) grouped by
  (UTC date of ``started_at``, session's ``api_key_id``, session's ``provider``, session's
  ``model``): ``runs`` = COUNT, tokens = SUM, ``cost_usd`` = TOTAL (0.0 for Codex; never NULL). A
  run that crosses midnight UTC counts on the day it started (one does).
- ``events``: ``seq`` is dense per session, 1..``sessions.last_seq``; ``ts`` never decreases within
  a session; ``run_id`` links to ``runs`` and is NULL for an event outside any run (one ``x.custom``).
  Rows are inserted in global time order, so rowid order is not (session, seq) order.
- ``interactions.status``: ``approved`` | ``denied`` | ``answered`` | ``expired`` (the fixture has
  all but ``denied``; ``pending`` would be an open one). ``expires_at`` = ``created_at`` + 300 000 ms; an expired one is a refusal and
  has ``resolved_at`` = ``expires_at`` and a refusing ``response``.
- ``audit_logs.kind``: ``command`` (every shell command that ran; actor ``agent``),
  ``file_access_denied`` (actor ``agent``), ``approval`` (every resolved ``approval`` interaction;
  actor ``api_key:<api key id>``, or ``system`` for a timeout), ``admin`` (actor ``admin``;
  ``session_id`` NULL except "session archived").
- Secrets: ``api_keys.key_hash`` (sha256 hex of a made-up key that is never stored; ``key_prefix`` is
  its first 12 characters), ``admin_sessions.id``, and the settings ``providers.claude``,
  ``providers.codex``, ``notifications.webhook`` and ``admin.auth``. :attr:`Expected.secrets` lists
  every secret string; none may reach an archive.

Event vocabulary and payloads
-----------------------------
``events.payload`` is the provider's own object: for Claude sessions an Agent SDK message (as the
Python SDK's parser receives it), for Codex sessions the ``params`` of the app-server notification.
The server adds keys of its own only to ``tool.*`` (``toolCallId``, ``tool``, ``kind``, and on
``tool.completed`` ``exitCode``, ``truncated``, ``originalBytes``, ``outputFile``) and writes the
``interaction.*`` payloads itself. Shapes (``PSID`` = ``sessions.provider_session_id``: a Claude
session uuid4, or a Codex thread id, a uuidv7; ``TURN`` = the Codex turn id, a uuidv7):

``run.started``
  claude: ``{type:'system', subtype:'init', cwd, session_id:PSID, tools[], mcp_servers[{name,
  status}], model, permissionMode, slash_commands[], apiKeySource, claude_code_version,
  output_style, agents[], skills[], uuid}``
  codex: ``{threadId:PSID, turn:{id:TURN, items:[], status:'inProgress', error:null}}``
``user.message`` (name chosen here; one per run, its text is the run's prompt)
  claude: ``{type:'user', message:{role:'user', content:[{type:'text', text}]},
  parent_tool_use_id:null, session_id, uuid}``
  codex: ``{threadId, turnId, item:{type:'userMessage', id, content:[{type:'text', text,
  text_elements:[]}]}}``
``message.delta`` (streaming text; never a message: concatenated in seq order they give the next
``assistant.message``'s text; a run may end with deltas and no message)
  claude: ``{type:'stream_event', uuid, session_id, parent_tool_use_id:null,
  event:{type:'content_block_delta', index:0, delta:{type:'text_delta', text}}}``
  codex: ``{threadId, turnId, itemId, delta}`` (``item/agentMessage/delta``)
``assistant.message`` (one per assistant text; *these* are the assistant messages)
  claude: ``{type:'assistant', message:{id:'msg_01…', type:'message', role:'assistant', model,
  content:[{type:'text', text}], stop_reason, stop_sequence:null, usage:{input_tokens,
  cache_creation_input_tokens, cache_read_input_tokens, output_tokens, service_tier}},
  parent_tool_use_id:null, session_id, uuid}``. As the CLI does, each content block is its own
  message, and the blocks of one API call (thinking, text, tool_use) share ``message.id`` **and
  repeat the same usage**: deduplicate by id, or better use ``runs``.
  codex: ``{threadId, turnId, item:{type:'agentMessage', id, text}}`` (``item/completed``)
``reasoning`` (name chosen here)
  claude: the assistant message above with ``content:[{type:'thinking', thinking, signature}]``
  codex: ``{threadId, turnId, item:{type:'reasoning', id:'rs_…', summary:[text], content:[]}}``
``tool.started``
  claude: the assistant message with ``content:[{type:'tool_use', id:'toolu_01…', name, input}]``
  codex: ``{threadId, turnId, item:{…, status:'inProgress'}}`` (``item/started``; item types below)
  plus, both: ``toolCallId`` (= tool_use id / item id; not with ``tool_ids="provider"``), ``tool`` (Claude tool name, e.g. ``Bash``,
  ``mcp__docs__search``; Codex item type, e.g. ``commandExecution``), ``kind`` (``shell`` |
  ``file_read`` | ``file_change`` | ``mcp`` | ``web_fetch`` | ``web_search`` | ``question``).
``tool.completed`` (pairs with ``tool.started`` on ``toolCallId``, or with ``tool_ids="provider"`` on the
  provider's ids only; one ``tool.started`` never gets one)
  claude: ``{type:'user', message:{role:'user', content:[{type:'tool_result', tool_use_id,
  content, is_error}]}, parent_tool_use_id:null, session_id, uuid, tool_use_result}``;
  ``content`` is a string, or for MCP a list ``[{type:'text', text}]``. Bash: ``content`` = the
  output, or ``"Exit code N\\n" + output`` with ``is_error`` true when N != 0; ``tool_use_result``
  ``{stdout, stderr, interrupted, isImage}``. Edit: ``tool_use_result`` ``{filePath, oldString,
  newString, originalFile, structuredPatch:[{oldStart, oldLines, newStart, newLines, lines[]}],
  userModified, replaceAll}``. Read: ``{type:'text', file:{filePath, content, numLines, startLine,
  totalLines}}``. WebFetch: ``{bytes, code, codeText, result, durationMs, url}``.
  AskUserQuestion: ``{questions, answers}``. A refused or denied call: ``is_error`` true and
  ``tool_use_result`` ``"Error: …"``.
  codex: ``{threadId, turnId, item}`` (``item/completed``), the item one of
  ``commandExecution{id, command, cwd, processId, status:'completed'|'failed'|'declined',
  commandActions, aggregatedOutput, exitCode, durationMs}``,
  ``fileChange{id, changes:[{path, kind:{type:'add'}|{type:'delete'}|{type:'update',
  move_path:null}, diff (unified)}], status}``,
  ``mcpToolCall{id, server, tool, status:'completed'|'failed', arguments, result:{content:[{type,
  text}], structuredContent}|null, error:{message}|null, durationMs}``,
  ``webSearch{id, query, action:{type:'search', query, queries}}``.
  plus, both: ``toolCallId``, ``tool``, ``kind``; ``exitCode`` (int for a shell command that ran,
  null otherwise: a refused command never ran); ``truncated`` (bool). When the output (Bash
  ``content`` and ``stdout``, or ``aggregatedOutput``) exceeded :data:`TOOL_OUTPUT_CAP` = 65 536
  bytes of UTF-8, it holds its first 65 536 bytes (backed off to a character boundary; the fixture's
  is ASCII, so exactly 65 536), ``truncated`` is true, ``originalBytes`` is the full size and
  ``outputFile`` the workspace-relative path ``.agent/tool-outputs/<toolCallId>.log`` of the full
  text.
``interaction.requested``
  ``{interactionId, kind:'approval'|'question', request, expiresAt}``; ``request`` equals
  ``interactions.request``: claude ``{toolName, toolUseId, input, suggestions?}``; codex
  ``{method:'item/commandExecution/requestApproval'|'item/fileChange/requestApproval',
  params:{threadId, turnId, itemId, reason, command?, cwd?, grantRoot?}}``.
``interaction.resolved``
  ``{interactionId, kind, status, response, resolvedBy:'api'|'timeout'}``; ``response`` equals
  ``interactions.response``: claude ``{behavior:'allow', updatedInput}`` | ``{behavior:'deny',
  message, interrupt}`` | ``{answers:{question: label}}``; codex ``{decision:'accept'|'decline'}``.
``run.completed``
  claude: the SDK result ``{type:'result', subtype:'success'|'error_during_execution', is_error,
  duration_ms, duration_api_ms, num_turns, result, session_id, total_cost_usd, usage:{input_tokens,
  cache_creation_input_tokens, cache_read_input_tokens, output_tokens, server_tool_use,
  service_tier}, modelUsage:{<model>:{inputTokens, outputTokens, cacheReadInputTokens,
  cacheCreationInputTokens, webSearchRequests, costUSD, contextWindow}}, permission_denials[],
  errors[]?, uuid}``
  codex: ``{threadId, turn:{id, items:[], status:'completed'|'interrupted'|'failed', error},
  tokenUsage:{total:{totalTokens, inputTokens, cachedInputTokens, outputTokens,
  reasoningOutputTokens}, last:{…}, modelContextWindow}}``: ``total`` is cumulative over the
  thread, ``last`` the turn's last request; the run's own figures are in ``runs``.
``error``
  claude: ``{error:{message, type}, willRetry, session_id}``
  codex: ``{error:{message, codexErrorInfo, additionalDetails}, willRetry, threadId, turnId}``
Any other type is unknown and must be kept as it is. The fixture has ``plan.updated`` (Codex
``turn/plan/updated`` params), ``context.compacted`` (``{threadId, turnId, item:{type:
'contextCompaction', id}}``), ``rate_limit.updated`` (Claude ``rate_limit_event``) and ``x.custom``
(``{source, kind, labels}``, the one event with ``run_id`` NULL). :data:`KNOWN_TYPES` is the list.

Live database helpers
---------------------
- :func:`running_server` holds one idle connection open, as the running agent-server does. While
  it is open no other connection's close checkpoints the WAL, so rows written by the helpers below
  stay in ``agent.db-wal`` only (without it, SQLite folds the WAL into ``agent.db`` when the last
  connection closes).
- :func:`append_events` / :func:`add_run` write from a connection of their own with
  ``wal_autocheckpoint=0`` (they never checkpoint) in one transaction, and return :class:`Added`;
  ``expected.plus(added)`` gives the figures afterwards.
- :func:`pending_write` opens a writer that has inserted a ``running`` run, its events and the new
  ``last_seq`` inside ``BEGIN IMMEDIATE`` and not committed; ``commit()`` or ``rollback()`` it (leaving
  the ``with`` block rolls back).
"""

from __future__ import annotations

import base64
import copy
import datetime as _dt
import difflib
import hashlib
import itertools
import json
import random
import re
import sqlite3
import string
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path

DAY_MS = 86_400_000
BASE_MS = 1760947200000  # 2025-10-20T08:00:00Z: the newest sessions' morning
NOW_MS = BASE_MS + DAY_MS // 2  # "now": settings, keys and admin logins are stamped around it
TOOL_OUTPUT_CAP = 65_536  # bytes of UTF-8 kept inline in a tool.completed payload
INTERACTION_TIMEOUT_MS = 300_000
CODEX_CONTEXT_WINDOW = 272_000
CLAUDE_CONTEXT_WINDOW = 200_000
# $ per million tokens: input, output, cache write, cache read (made-up figures for a made-up db).
CLAUDE_PRICES = {"claude-sonnet-4-5": (3.0, 15.0, 3.75, 0.30), "claude-haiku-4-5": (1.0, 5.0, 1.25, 0.10)}
KNOWN_TYPES = frozenset({
    "run.started", "user.message", "message.delta", "assistant.message", "reasoning", "tool.started",
    "tool.completed", "interaction.requested", "interaction.resolved", "run.completed", "error"})
TABLES = ("profiles", "knowledge_roots", "profile_knowledge", "api_keys", "sessions", "runs", "events",
          "interactions", "files", "settings", "audit_logs", "usage_daily", "admin_sessions")

# ---------------------------------------------------------------------------------------------
# Schema: the two migration files drizzle-kit would have generated (backticks, tabs, breakpoints).

_M0 = """CREATE TABLE `profiles` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`system_prompt` text DEFAULT '' NOT NULL,
	`permission_mode` text DEFAULT 'default' NOT NULL,
	`allowed_tools` text DEFAULT '[]' NOT NULL,
	`disallowed_tools` text DEFAULT '[]' NOT NULL,
	`skills` text DEFAULT '[]' NOT NULL,
	`file_access` text DEFAULT '{}' NOT NULL,
	`knowledge_root_ids` text DEFAULT '[]' NOT NULL,
	`is_default` integer DEFAULT false NOT NULL,
	`builtin` integer DEFAULT false NOT NULL,
	`version` integer DEFAULT 1 NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX `profiles_name_unique` ON `profiles` (`name`);--> statement-breakpoint
CREATE TABLE `knowledge_roots` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`path` text NOT NULL,
	`description` text DEFAULT '' NOT NULL,
	`access` text DEFAULT 'read' NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`visible` integer DEFAULT true NOT NULL,
	`checked_at` integer
);
--> statement-breakpoint
CREATE TABLE `profile_knowledge` (
	`profile_id` text NOT NULL,
	`knowledge_root_id` text NOT NULL,
	PRIMARY KEY(`profile_id`, `knowledge_root_id`),
	FOREIGN KEY (`profile_id`) REFERENCES `profiles`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`knowledge_root_id`) REFERENCES `knowledge_roots`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE TABLE `api_keys` (
	`id` text PRIMARY KEY NOT NULL,
	`name` text NOT NULL,
	`key_hash` text NOT NULL,
	`key_prefix` text NOT NULL,
	`enabled` integer DEFAULT true NOT NULL,
	`allowed_profile_ids` text DEFAULT '[]' NOT NULL,
	`default_profile_id` text,
	`created_at` integer NOT NULL,
	`last_used_at` integer,
	FOREIGN KEY (`default_profile_id`) REFERENCES `profiles`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE UNIQUE INDEX `api_keys_key_hash_unique` ON `api_keys` (`key_hash`);--> statement-breakpoint
CREATE TABLE `sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`api_key_id` text NOT NULL,
	`source` text DEFAULT 'api' NOT NULL,
	`profile_id` text NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`permission_mode` text DEFAULT '' NOT NULL,
	`provider_session_id` text,
	`workspace_dir` text NOT NULL,
	`title` text DEFAULT '' NOT NULL,
	`last_seq` integer DEFAULT 0 NOT NULL,
	`created_at` integer NOT NULL,
	`updated_at` integer NOT NULL,
	FOREIGN KEY (`api_key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE no action,
	FOREIGN KEY (`profile_id`) REFERENCES `profiles`(`id`) ON UPDATE no action ON DELETE no action
);
--> statement-breakpoint
CREATE INDEX `sessions_api_key_idx` ON `sessions` (`api_key_id`);--> statement-breakpoint
CREATE INDEX `sessions_provider_session_idx` ON `sessions` (`provider_session_id`);--> statement-breakpoint
CREATE INDEX `sessions_updated_at_idx` ON `sessions` (`updated_at`);--> statement-breakpoint
CREATE TABLE `runs` (
	`id` text PRIMARY KEY NOT NULL,
	`session_id` text NOT NULL,
	`status` text NOT NULL,
	`started_at` integer NOT NULL,
	`ended_at` integer,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`cost_usd` real,
	`error` text,
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `runs_session_idx` ON `runs` (`session_id`,`started_at`);--> statement-breakpoint
CREATE TABLE `events` (
	`session_id` text NOT NULL,
	`seq` integer NOT NULL,
	`run_id` text,
	`type` text NOT NULL,
	`payload` text NOT NULL,
	`ts` integer NOT NULL,
	PRIMARY KEY(`session_id`, `seq`),
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE set null
);
--> statement-breakpoint
CREATE INDEX `events_run_idx` ON `events` (`run_id`);--> statement-breakpoint
CREATE TABLE `interactions` (
	`id` text PRIMARY KEY NOT NULL,
	`run_id` text NOT NULL,
	`session_id` text NOT NULL,
	`kind` text NOT NULL,
	`request` text NOT NULL,
	`response` text,
	`status` text DEFAULT 'pending' NOT NULL,
	`created_at` integer NOT NULL,
	`resolved_at` integer,
	`expires_at` integer NOT NULL,
	FOREIGN KEY (`run_id`) REFERENCES `runs`(`id`) ON UPDATE no action ON DELETE cascade,
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE INDEX `interactions_session_idx` ON `interactions` (`session_id`);--> statement-breakpoint
CREATE INDEX `interactions_status_idx` ON `interactions` (`status`,`expires_at`);--> statement-breakpoint
CREATE TABLE `files` (
	`id` text PRIMARY KEY NOT NULL,
	`session_id` text NOT NULL,
	`rel_path` text NOT NULL,
	`origin` text NOT NULL,
	`mime` text,
	`size` integer NOT NULL,
	`sha256` text NOT NULL,
	`created_at` integer NOT NULL,
	FOREIGN KEY (`session_id`) REFERENCES `sessions`(`id`) ON UPDATE no action ON DELETE cascade
);
--> statement-breakpoint
CREATE UNIQUE INDEX `files_session_path_unique` ON `files` (`session_id`,`rel_path`);--> statement-breakpoint
CREATE TABLE `settings` (
	`key` text PRIMARY KEY NOT NULL,
	`value` text NOT NULL,
	`updated_at` integer NOT NULL
);
--> statement-breakpoint
CREATE TABLE `audit_logs` (
	`id` integer PRIMARY KEY AUTOINCREMENT NOT NULL,
	`ts` integer NOT NULL,
	`actor` text NOT NULL,
	`session_id` text,
	`kind` text NOT NULL,
	`summary` text NOT NULL,
	`detail` text
);
--> statement-breakpoint
CREATE INDEX `audit_logs_ts_idx` ON `audit_logs` (`ts`);--> statement-breakpoint
CREATE INDEX `audit_logs_session_idx` ON `audit_logs` (`session_id`);--> statement-breakpoint
CREATE TABLE `usage_daily` (
	`date` text NOT NULL,
	`api_key_id` text NOT NULL,
	`provider` text NOT NULL,
	`model` text NOT NULL,
	`runs` integer DEFAULT 0 NOT NULL,
	`input_tokens` integer DEFAULT 0 NOT NULL,
	`output_tokens` integer DEFAULT 0 NOT NULL,
	`cost_usd` real DEFAULT 0 NOT NULL,
	PRIMARY KEY(`date`, `api_key_id`, `provider`, `model`),
	FOREIGN KEY (`api_key_id`) REFERENCES `api_keys`(`id`) ON UPDATE no action ON DELETE cascade
);
"""

_M1 = """CREATE TABLE `admin_sessions` (
	`id` text PRIMARY KEY NOT NULL,
	`created_at` integer NOT NULL,
	`expires_at` integer NOT NULL
);
--> statement-breakpoint
ALTER TABLE `sessions` ADD `archived` integer DEFAULT false NOT NULL;"""

# (tag, journal "when" in ms, file text): what drizzle/meta/_journal.json and the .sql files hold.
MIGRATIONS = (("0000_brisk_harrier", 1757325600000, _M0), ("0001_quiet_sentinel", 1759140000000, _M1))
DRIZZLE_MIGRATIONS_DDL = """CREATE TABLE IF NOT EXISTS "__drizzle_migrations" (
			id SERIAL PRIMARY KEY,
			hash text NOT NULL,
			created_at numeric
		)"""

COLUMNS = {
    "profiles": ("id", "name", "provider", "model", "system_prompt", "permission_mode", "allowed_tools",
                 "disallowed_tools", "skills", "file_access", "knowledge_root_ids", "is_default", "builtin",
                 "version", "updated_at"),
    "knowledge_roots": ("id", "name", "path", "description", "access", "enabled", "visible", "checked_at"),
    "profile_knowledge": ("profile_id", "knowledge_root_id"),
    "api_keys": ("id", "name", "key_hash", "key_prefix", "enabled", "allowed_profile_ids", "default_profile_id",
                 "created_at", "last_used_at"),
    "sessions": ("id", "api_key_id", "source", "profile_id", "provider", "model", "permission_mode",
                 "provider_session_id", "workspace_dir", "title", "last_seq", "created_at", "updated_at",
                 "archived"),
    "runs": ("id", "session_id", "status", "started_at", "ended_at", "input_tokens", "output_tokens", "cost_usd",
             "error"),
    "events": ("session_id", "seq", "run_id", "type", "payload", "ts"),
    "interactions": ("id", "run_id", "session_id", "kind", "request", "response", "status", "created_at",
                     "resolved_at", "expires_at"),
    "files": ("id", "session_id", "rel_path", "origin", "mime", "size", "sha256", "created_at"),
    "settings": ("key", "value", "updated_at"),
    "audit_logs": ("ts", "actor", "session_id", "kind", "summary", "detail"),  # id: AUTOINCREMENT
    "usage_daily": ("date", "api_key_id", "provider", "model", "runs", "input_tokens", "output_tokens", "cost_usd"),
    "admin_sessions": ("id", "created_at", "expires_at"),
}
# Rows are written in this order, each table sorted by this column (the server's own write order).
_TIME_ORDER = {"runs": "started_at", "events": "ts", "interactions": "created_at", "files": "created_at",
               "audit_logs": "ts"}


def migration_hash(sql_text: str) -> str:
    return hashlib.sha256(sql_text.encode("utf-8")).hexdigest()


def _j(obj) -> str:
    """JSON as ``JSON.stringify`` writes it: compact, non-ASCII kept."""
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def utc_date(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d")


# ---------------------------------------------------------------------------------------------
# What a test can check: figures from the generator's own model.

@dataclass(kw_only=True)
class Tally:
    """Counts over a set of events/rows; a session's figures, a delta (:class:`Added`) or totals."""
    events: int = 0                      # events rows (every row counts)
    last_seq: int = 0
    event_types: dict = field(default_factory=dict)   # type -> rows
    runs: int = 0
    user_messages: int = 0               # user.message events = the runs' prompts
    prompts: list = field(default_factory=list)
    assistant_messages: int = 0          # assistant.message events (deltas are not messages)
    assistant_texts: list = field(default_factory=list)
    deltas: int = 0                      # message.delta events
    reasoning: int = 0
    tool_started: int = 0
    tool_calls: int = 0                  # tool.completed events
    shell_calls: int = 0                 # tool.completed with kind 'shell'
    shell_exit_codes: list = field(default_factory=list)  # their exitCode in seq order (None: never ran)
    tool_started_without_completed: int = 0
    unknown_events: int = 0              # events whose type is not in KNOWN_TYPES
    unknown_types: list = field(default_factory=list)     # their types, in seq order
    errors: int = 0                      # 'error' events
    interactions: int = 0                # interactions rows
    audit_logs: int = 0                  # audit_logs rows with this session_id
    files: int = 0                       # files rows
    input_tokens: int = 0                # summed over runs
    output_tokens: int = 0
    cost_usd: float | None = None        # summed over runs; None when every run's cost is NULL

    def merge(self, other: Tally) -> None:
        for f in fields(Tally):
            mine, theirs = getattr(self, f.name), getattr(other, f.name)
            if f.name == "last_seq":
                setattr(self, f.name, max(mine, theirs))
            elif f.name == "cost_usd":
                if theirs is not None:
                    setattr(self, f.name, round((mine or 0.0) + theirs, 6))
            elif isinstance(mine, list):
                mine.extend(theirs)
            elif isinstance(mine, dict):
                for k, v in theirs.items():
                    mine[k] = mine.get(k, 0) + v
            else:
                setattr(self, f.name, mine + theirs)


@dataclass(kw_only=True)
class SessionExpected(Tally):
    session_id: str
    title: str
    provider: str                        # 'claude' | 'codex'
    model: str
    profile: str                         # profiles.name
    api_key: str                         # api_keys.name
    source: str
    permission_mode: str                 # as stored; '' follows the profile
    effective_permission_mode: str
    archived: bool
    provider_session_id: str
    workspace_dir: str
    workspace_exists: bool


@dataclass(kw_only=True)
class Totals(Tally):
    sessions: int = 0
    archived: int = 0


@dataclass
class TruncatedOutput:
    session_id: str
    seq: int                             # the tool.completed event
    tool_call_id: str
    rel_path: str                        # outputFile, relative to the workspace
    path: Path                           # where the fixture wrote it
    original_bytes: int
    inline_bytes: int
    sha256: str                          # of the full output


@dataclass
class UsageRow:
    runs: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    def add(self, other: UsageRow) -> None:
        self.runs += other.runs
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cost_usd = round(self.cost_usd + other.cost_usd, 6)


@dataclass
class Added:
    """What a helper wrote: a session's delta, rows per table, usage_daily deltas."""
    session_id: str
    run_id: str | None
    seqs: list
    tally: Tally
    rows: dict
    usage: dict


@dataclass
class Expected:
    root: Path
    db_path: Path
    seed: int
    sessions: dict                       # session id -> SessionExpected
    secrets: list                        # every secret string stored (key hashes, admin ids, settings)
    secret_settings: list                # settings keys whose value holds a secret
    truncated_outputs: list              # TruncatedOutput
    usage_daily: dict                    # (date, api_key_id, provider, model) -> UsageRow
    audit_logs_without_session: int
    counts: dict                         # table -> rows

    @property
    def totals(self) -> Totals:
        t = Totals()
        for s in self.sessions.values():
            t.merge(s)
            t.sessions += 1
            t.archived += s.archived
        t.audit_logs += self.audit_logs_without_session
        return t

    def by_title(self, title: str) -> SessionExpected:
        (found,) = [s for s in self.sessions.values() if s.title == title]
        return found

    def plus(self, added: Added) -> Expected:
        """The figures after a helper's write (committed)."""
        new = copy.deepcopy(self)
        new.sessions[added.session_id].merge(added.tally)
        for table, n in added.rows.items():
            new.counts[table] = new.counts.get(table, 0) + n
        for key, row in added.usage.items():
            new.usage_daily.setdefault(key, UsageRow()).add(row)
        return new


# ---------------------------------------------------------------------------------------------
# The model: a batch of rows, and a script that plays a session's runs into it.

class _Ids:
    ALNUM = string.ascii_letters + string.digits

    def __init__(self, rng: random.Random):
        self.rng = rng

    def uuid4(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def uuid7(self, ms: int) -> str:
        r = self.rng.getrandbits(74)
        value = ((ms & ((1 << 48) - 1)) << 80) | (0x7 << 76) | ((r >> 62) << 64) | (0b10 << 62) | (r & ((1 << 62) - 1))
        return str(uuid.UUID(int=value))

    def token(self, n: int) -> str:
        return "".join(self.rng.choice(self.ALNUM) for _ in range(n))

    def hex(self, n: int) -> str:
        return f"{self.rng.getrandbits(4 * n):0{n}x}"

    def b64url(self, nbytes: int) -> str:
        return base64.urlsafe_b64encode(self.rng.randbytes(nbytes)).decode().rstrip("=")


class _Batch:
    def __init__(self):
        self.rows = {t: [] for t in TABLES}
        self.files: dict[Path, bytes] = {}
        self.truncated: list[TruncatedOutput] = []
        self.usage: dict = {}  # usage_daily deltas

    def add(self, table: str, **row) -> dict:
        missing = set(COLUMNS[table]) - set(row)
        assert not missing and set(row) <= set(COLUMNS[table]), (table, missing, set(row) - set(COLUMNS[table]))
        self.rows[table].append(row)
        return row


@dataclass
class _Run:
    id: str
    turn_id: str | None
    started_at: int
    calls: list = field(default_factory=list)   # usage of each model request
    last_text: str = ""
    denials: list = field(default_factory=list)


def _udiff(path: str, before: str | None, after: str | None) -> str:
    a = [] if before is None else before.splitlines(keepends=True)
    b = [] if after is None else after.splitlines(keepends=True)
    return "".join(difflib.unified_diff(a, b, "/dev/null" if before is None else f"a/{path}",
                                        "/dev/null" if after is None else f"b/{path}"))


def _hunks(before: str, after: str) -> list:
    """Claude Code's structuredPatch for an edit."""
    out = []
    for line in difflib.unified_diff(before.splitlines(), after.splitlines(), lineterm=""):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@", line)
        if m:
            out.append({"oldStart": int(m[1]), "oldLines": int(m[2] or 1), "newStart": int(m[3]),
                        "newLines": int(m[4] or 1), "lines": []})
        elif out:
            out[-1]["lines"].append(line)
    return out


def _split(text: str, k: int, rng: random.Random) -> list:
    k = max(1, min(k, len(text)))
    cuts = sorted(rng.sample(range(1, len(text)), k - 1)) if k > 1 else []
    bounds = [0, *cuts, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def _claude_cost(model: str, u: dict) -> float:
    p_in, p_out, p_cw, p_cr = CLAUDE_PRICES[model]
    return (u["input_tokens"] * p_in + u["output_tokens"] * p_out + u["cache_creation_input_tokens"] * p_cw
            + u["cache_read_input_tokens"] * p_cr) / 1e6


CLAUDE_TOOLS = ["Task", "Bash", "Glob", "Grep", "Read", "Edit", "Write", "WebFetch", "WebSearch", "TodoWrite",
                "AskUserQuestion", "mcp__docs__search"]


# Where a tool event carries its call id. "server": the server adds ``toolCallId`` (= the tool_use id /
# item id) to both events, as this module's first database does. "provider": only the provider's own
# ids, as FORMAT-OTHERS.md section 2 lists them: Claude's ``tool_use`` block ``id`` on tool.started and
# ``tool_result`` ``tool_use_id`` on tool.completed, Codex's ``item.id`` on both (a second agent.db
# written from the same notes was so).
TOOL_ID_SHAPES = ("server", "provider")


class _Script:
    """Plays one session's events into a batch and tallies them as it goes."""

    def __init__(self, batch: _Batch, rng: random.Random, *, sid: str, provider: str, model: str, psid: str,
                 workspace_dir: str, workspace_path: Path | None, api_key_id: str, permission_mode: str,
                 clock: int, seq: int = 0, thread_total: dict | None = None, tally: Tally | None = None,
                 tool_ids: str = "server"):
        self.batch, self.rng, self.ids = batch, rng, _Ids(rng)
        if tool_ids not in TOOL_ID_SHAPES:
            raise ValueError(f"tool_ids: one of {', '.join(TOOL_ID_SHAPES)}")
        self.tool_ids = tool_ids
        self.sid, self.provider, self.model, self.psid = sid, provider, model, psid
        self.workspace_dir, self.workspace_path = workspace_dir, workspace_path
        self.api_key_id, self.permission_mode = api_key_id, permission_mode
        self.clock, self.seq = clock, seq
        self.claude = provider == "claude"
        self.thread_total = thread_total or {"totalTokens": 0, "inputTokens": 0, "cachedInputTokens": 0,
                                             "outputTokens": 0, "reasoningOutputTokens": 0}
        self.tally = tally if tally is not None else Tally()
        self.run: _Run | None = None
        self.call: dict | None = None
        self.open_tools: dict[str, str] = {}
        self.first_started: int | None = None
        self.usage: dict = {}  # usage_daily deltas of the runs ended here
        self._pending_truncated: TruncatedOutput | None = None

    # -- low level -----------------------------------------------------------------------------
    def tick(self, lo: int = 400, hi: int = 4000) -> int:
        self.clock += self.rng.randint(lo, hi)
        return self.clock

    def emit(self, type_: str, payload: dict, *, ts: int | None = None, in_run: bool = True) -> int:
        self.seq += 1
        if ts is None:
            ts = self.tick()
        self.clock = max(self.clock, ts)
        run_id = self.run.id if in_run and self.run is not None else None
        self.batch.add("events", session_id=self.sid, seq=self.seq, run_id=run_id, type=type_, payload=_j(payload),
                       ts=ts)
        t = self.tally
        t.events += 1
        t.last_seq = self.seq
        t.event_types[type_] = t.event_types.get(type_, 0) + 1
        if type_ not in KNOWN_TYPES:
            t.unknown_events += 1
            t.unknown_types.append(type_)
        return ts

    def audit(self, kind: str, summary: str, detail: dict, actor: str, ts: int | None = None) -> None:
        self.batch.add("audit_logs", ts=self.clock if ts is None else ts, actor=actor, session_id=self.sid,
                       kind=kind, summary=summary, detail=_j(detail))
        self.tally.audit_logs += 1

    def file(self, rel_path: str, origin: str, mime: str | None, content: bytes) -> None:
        self.batch.add("files", id=self.ids.uuid4(), session_id=self.sid, rel_path=rel_path, origin=origin,
                       mime=mime, size=len(content), sha256=hashlib.sha256(content).hexdigest(),
                       created_at=self.tick(100, 900))
        if self.workspace_path is not None:
            self.batch.files[self.workspace_path / rel_path] = content
        self.tally.files += 1

    def rewrite_file(self, rel_path: str, content: bytes) -> None:
        """A file the agent changed in place: its row follows (size, sha256), as the server rescans it."""
        (row,) = [r for r in self.batch.rows["files"] if r["session_id"] == self.sid and r["rel_path"] == rel_path]
        row.update(size=len(content), sha256=hashlib.sha256(content).hexdigest())
        if self.workspace_path is not None:
            self.batch.files[self.workspace_path / rel_path] = content

    def _usage(self) -> dict:
        """The current model request (one Claude API call / one Codex request), started when needed."""
        if self.call is None:
            r = self.rng.randint
            if self.claude:
                first = not self.run.calls
                u = {"input_tokens": r(3, 40), "cache_creation_input_tokens": r(300, 2500) if first else r(0, 900),
                     "cache_read_input_tokens": r(9000, 42000), "output_tokens": r(60, 900),
                     "service_tier": "standard"}
                self.call = {"id": "msg_01" + self.ids.token(22), "usage": u}
            else:
                inp, out = r(6000, 32000), r(80, 1600)
                cached, reasoning = int(inp * self.rng.uniform(0.4, 0.9)), int(out * self.rng.uniform(0.0, 0.6))
                u = {"totalTokens": inp + out, "inputTokens": inp, "cachedInputTokens": cached,
                     "outputTokens": out, "reasoningOutputTokens": reasoning}
                self.call = {"id": None, "usage": u}
            self.run.calls.append(u)
        return self.call

    def _assistant(self, block: dict, stop_reason: str | None = None) -> dict:
        call = self._usage()
        return {"type": "assistant",
                "message": {"id": call["id"], "type": "message", "role": "assistant", "model": self.model,
                            "content": [block], "stop_reason": stop_reason, "stop_sequence": None,
                            "usage": dict(call["usage"])},
                "parent_tool_use_id": None, "session_id": self.psid, "uuid": self.ids.uuid4()}

    def _item(self, item: dict) -> dict:
        return {"threadId": self.psid, "turnId": self.run.turn_id, "item": item}

    # -- runs ----------------------------------------------------------------------------------
    def start_run(self, prompt: str, at: int | None = None) -> _Run:
        self.clock = at if at is not None else self.clock + self.rng.randint(20_000, 2_400_000)
        self.run = _Run(id=self.ids.uuid4(), turn_id=None if self.claude else self.ids.uuid7(self.clock),
                        started_at=self.clock)
        self.call = None
        if self.first_started is None:
            self.first_started = self.clock
        if self.claude:
            started = {"type": "system", "subtype": "init", "cwd": self.workspace_dir, "session_id": self.psid,
                       "tools": CLAUDE_TOOLS, "mcp_servers": [{"name": "docs", "status": "connected"}],
                       "model": self.model, "permissionMode": self.permission_mode,
                       "slash_commands": ["compact", "context", "cost", "review"], "apiKeySource": "none",
                       "claude_code_version": "2.0.22", "output_style": "default", "agents": ["general-purpose"],
                       "skills": [], "uuid": self.ids.uuid4()}
            user = {"type": "user", "message": {"role": "user", "content": [{"type": "text", "text": prompt}]},
                    "parent_tool_use_id": None, "session_id": self.psid, "uuid": self.ids.uuid4()}
        else:
            started = {"threadId": self.psid,
                       "turn": {"id": self.run.turn_id, "items": [], "status": "inProgress", "error": None}}
            user = self._item({"type": "userMessage", "id": self.ids.uuid4(),
                               "content": [{"type": "text", "text": prompt, "text_elements": []}]})
        self.emit("run.started", started, ts=self.clock)
        self.emit("user.message", user, ts=self.tick(5, 60))
        t = self.tally
        t.runs += 1
        t.user_messages += 1
        t.prompts.append(prompt)
        return self.run

    def running_row(self) -> None:
        """The runs row of a run still in progress."""
        self.batch.add("runs", id=self.run.id, session_id=self.sid, status="running", started_at=self.run.started_at,
                       ended_at=None, input_tokens=0, output_tokens=0, cost_usd=None, error=None)

    def end_run(self, status: str = "completed", error: str | None = None) -> None:
        run = self.run
        ts = self.tick(200, 1500)
        calls = run.calls
        if self.claude:
            s = {k: sum(c[k] for c in calls) for k in ("input_tokens", "cache_creation_input_tokens",
                                                        "cache_read_input_tokens", "output_tokens")}
            cost = round(sum(_claude_cost(self.model, c) for c in calls), 6)
            inp = s["input_tokens"] + s["cache_creation_input_tokens"] + s["cache_read_input_tokens"]
            out = s["output_tokens"]
            duration = ts - run.started_at
            payload = {"type": "result", "subtype": "success" if status == "completed" else "error_during_execution",
                       "is_error": status != "completed", "duration_ms": duration,
                       "duration_api_ms": int(duration * 0.7), "num_turns": len(calls), "result": run.last_text,
                       "session_id": self.psid, "total_cost_usd": cost,
                       "usage": {**s, "server_tool_use": {"web_search_requests": 0, "web_fetch_requests": 0},
                                 "service_tier": "standard"},
                       "modelUsage": {self.model: {
                           "inputTokens": s["input_tokens"], "outputTokens": out,
                           "cacheReadInputTokens": s["cache_read_input_tokens"],
                           "cacheCreationInputTokens": s["cache_creation_input_tokens"], "webSearchRequests": 0,
                           "costUSD": cost, "contextWindow": CLAUDE_CONTEXT_WINDOW}},
                       "permission_denials": run.denials, "uuid": self.ids.uuid4()}
            if error:
                payload["errors"] = [error]
        else:
            inp = sum(c["inputTokens"] for c in calls)
            out = sum(c["outputTokens"] for c in calls)
            for c in calls:
                for k in self.thread_total:
                    self.thread_total[k] += c[k]
            last = dict(calls[-1]) if calls else {k: 0 for k in self.thread_total}
            cost = None
            payload = {"threadId": self.psid,
                       "turn": {"id": run.turn_id, "items": [], "status": status,
                                "error": {"message": error} if error else None},
                       "tokenUsage": {"total": dict(self.thread_total), "last": last,
                                      "modelContextWindow": CODEX_CONTEXT_WINDOW}}
        self.emit("run.completed", payload, ts=ts)
        self.batch.add("runs", id=run.id, session_id=self.sid, status=status, started_at=run.started_at, ended_at=ts,
                       input_tokens=inp, output_tokens=out, cost_usd=cost, error=error)
        t = self.tally
        t.input_tokens += inp
        t.output_tokens += out
        if cost is not None:
            t.cost_usd = round((t.cost_usd or 0.0) + cost, 6)
        key = (utc_date(run.started_at), self.api_key_id, self.provider, self.model)
        self.usage.setdefault(key, UsageRow()).add(UsageRow(1, inp, out, cost or 0.0))
        self.run = None
        self.call = None

    # -- messages ------------------------------------------------------------------------------
    def reasoning(self, text: str) -> None:
        if self.claude:
            signature = base64.b64encode(self.rng.randbytes(48)).decode()
            payload = self._assistant({"type": "thinking", "thinking": text, "signature": signature})
        else:
            self._usage()
            payload = self._item({"type": "reasoning", "id": "rs_" + self.ids.hex(32), "summary": [text],
                                  "content": []})
        self.emit("reasoning", payload)
        self.tally.reasoning += 1

    def new_message_id(self) -> str:
        self._usage()
        return "msg_" + self.ids.hex(32)

    def delta(self, item_id: str, text: str) -> None:
        if self.claude:
            self._usage()
            payload = {"type": "stream_event", "uuid": self.ids.uuid4(), "session_id": self.psid,
                       "parent_tool_use_id": None,
                       "event": {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta",
                                                                                      "text": text}}}
        else:
            payload = {"threadId": self.psid, "turnId": self.run.turn_id, "itemId": item_id, "delta": text}
        self.emit("message.delta", payload, ts=self.tick(30, 400))
        self.tally.deltas += 1

    def message(self, item_id: str, text: str) -> None:
        if self.claude:
            payload = self._assistant({"type": "text", "text": text}, stop_reason="end_turn")
        else:
            payload = self._item({"type": "agentMessage", "id": item_id, "text": text})
        self.emit("assistant.message", payload, ts=self.tick(20, 200))
        t = self.tally
        t.assistant_messages += 1
        t.assistant_texts.append(text)
        self.run.last_text = text

    def say(self, text: str, chunks: int | None = None, final: bool = True) -> None:
        """Streamed text: deltas, then (unless ``final`` is false) the assistant message."""
        item_id = self.new_message_id()
        for part in _split(text, chunks or self.rng.randint(2, 4), self.rng):
            self.delta(item_id, part)
        if final:
            self.message(item_id, text)

    def unknown(self, type_: str, payload: dict, in_run: bool = True) -> None:
        self.emit(type_, payload, in_run=in_run)

    def error(self, message: str, *, info, will_retry: bool) -> None:
        if self.claude:
            payload = {"error": {"message": message, "type": info}, "willRetry": will_retry, "session_id": self.psid}
        else:
            payload = {"error": {"message": message, "codexErrorInfo": info, "additionalDetails": None},
                       "willRetry": will_retry, "threadId": self.psid, "turnId": self.run.turn_id}
        self.emit("error", payload)
        self.tally.errors += 1

    # -- tools ---------------------------------------------------------------------------------
    def _started(self, call_id: str, tool: str, kind: str, payload: dict) -> None:
        payload.update(tool=tool, kind=kind)
        if self.tool_ids == "server":
            payload["toolCallId"] = call_id
        self.emit("tool.started", payload)
        self.open_tools[call_id] = kind
        self.tally.tool_started += 1

    def _cap(self, call_id: str, output: str) -> tuple[str, dict]:
        raw = output.encode("utf-8")
        if len(raw) <= TOOL_OUTPUT_CAP:
            return output, {"truncated": False}
        inline = raw[:TOOL_OUTPUT_CAP].decode("utf-8", errors="ignore")
        rel = f".agent/tool-outputs/{call_id}.log"
        path = (self.workspace_path or Path("/nonexistent")) / rel
        if self.workspace_path is not None:
            self.batch.files[path] = raw
        self._pending_truncated = TruncatedOutput(self.sid, 0, call_id, rel, path, len(raw),
                                                  len(inline.encode("utf-8")), hashlib.sha256(raw).hexdigest())
        return inline, {"truncated": True, "originalBytes": len(raw), "outputFile": rel}

    def _completed(self, call_id: str, tool: str, kind: str, payload: dict, *, exit_code: int | None = None,
                   cap: dict | None = None) -> None:
        payload.update(tool=tool, kind=kind, exitCode=exit_code, **(cap or {"truncated": False}))
        if self.tool_ids == "server":
            payload["toolCallId"] = call_id
        self.emit("tool.completed", payload)
        if cap and cap.get("truncated"):
            self._pending_truncated.seq = self.seq
            self.batch.truncated.append(self._pending_truncated)
        self.open_tools.pop(call_id, None)
        t = self.tally
        t.tool_calls += 1
        if kind == "shell":
            t.shell_calls += 1
            t.shell_exit_codes.append(exit_code)
        self.call = None  # the next model output is a new request

    def _tool_result(self, call_id: str, content, is_error: bool, tool_use_result) -> dict:
        return {"type": "user",
                "message": {"role": "user", "content": [{"tool_use_id": call_id, "type": "tool_result",
                                                         "content": content, "is_error": is_error}]},
                "parent_tool_use_id": None, "session_id": self.psid, "uuid": self.ids.uuid4(),
                "tool_use_result": tool_use_result}

    def _interaction(self, kind: str, request: dict, status: str, response: dict, summary: str) -> None:
        iid = self.ids.uuid4()
        created = self.tick(100, 600)
        expires = created + INTERACTION_TIMEOUT_MS
        self.emit("interaction.requested", {"interactionId": iid, "kind": kind, "request": request,
                                            "expiresAt": expires}, ts=created)
        resolved = expires if status == "expired" else self.tick(3000, 90_000)
        self.emit("interaction.resolved", {"interactionId": iid, "kind": kind, "status": status, "response": response,
                                           "resolvedBy": "timeout" if status == "expired" else "api"}, ts=resolved)
        self.batch.add("interactions", id=iid, run_id=self.run.id, session_id=self.sid, kind=kind, request=_j(request),
                       response=_j(response), status=status, created_at=created, resolved_at=resolved,
                       expires_at=expires)
        self.tally.interactions += 1
        if kind == "approval":
            actor = "system" if status == "expired" else f"api_key:{self.api_key_id}"
            self.audit("approval", f"approval {status}: {summary}"[:160],
                       {"interactionId": iid, "status": status, "runId": self.run.id}, actor, ts=resolved)

    def _approve(self, call_id: str, outcome: str, *, claude_input: dict | None = None, tool: str = "Bash",
                 method: str = "item/commandExecution/requestApproval", params: dict | None = None,
                 summary: str = "") -> bool:
        """An approval for a tool call; True when the call may go ahead."""
        allowed = outcome == "approved"
        if self.claude:
            request = {"toolName": tool, "toolUseId": call_id, "input": claude_input, "suggestions": []}
            if allowed:
                response = {"behavior": "allow", "updatedInput": claude_input}
            else:
                why = "No answer within 300 s: refused." if outcome == "expired" else "Denied by the operator."
                response = {"behavior": "deny", "message": why, "interrupt": False}
        else:
            request = {"method": method, "params": {"threadId": self.psid, "turnId": self.run.turn_id,
                                                    "itemId": call_id, **(params or {})}}
            response = {"decision": "accept" if allowed else "decline"}
        self._interaction("approval", request, outcome, response, summary)
        return allowed

    def shell(self, command: str, output: str | None, exit_code: int | None, *, approval: str | None = None,
              complete: bool = True, description: str | None = None) -> None:
        if self.claude:
            call_id, tool = "toolu_01" + self.ids.token(22), "Bash"
            inp = {"command": command, "description": description or f"Run {command.split()[0]}"}
            self._started(call_id, tool, "shell", self._assistant({"type": "tool_use", "id": call_id, "name": tool,
                                                                   "input": inp}, stop_reason="tool_use"))
        else:
            call_id, tool = "call_" + self.ids.token(24), "commandExecution"
            self._usage()
            item = {"type": "commandExecution", "id": call_id, "command": command, "cwd": self.workspace_dir,
                    "processId": None, "status": "inProgress",
                    "commandActions": [{"type": "unknown", "command": command}], "aggregatedOutput": None,
                    "exitCode": None, "durationMs": None}
            self._started(call_id, tool, "shell", self._item(dict(item)))
        if not complete:
            return
        allowed = True
        if approval:
            allowed = self._approve(call_id, approval, claude_input=inp if self.claude else None,
                                    params={"reason": "The command is not on the allow list.", "command": command,
                                            "cwd": self.workspace_dir}, summary=command)
        duration = self.rng.randint(30, 4000)
        if allowed:
            self.clock += duration
        else:
            exit_code = None
        if self.claude:
            if allowed:
                text = output if exit_code == 0 else f"Exit code {exit_code}\n{output}"
                text, cap = self._cap(call_id, text)
                payload = self._tool_result(call_id, text, exit_code != 0,
                                            {"stdout": text, "stderr": "", "interrupted": False, "isImage": False})
            else:
                text = f"Permission to use Bash with command {command} has been denied."
                cap = None
                self.run.denials.append({"tool_name": "Bash", "tool_use_id": call_id, "tool_input": inp})
                payload = self._tool_result(call_id, text, True, "Error: " + text)
        else:
            cap = None
            if allowed:
                aggregated, cap = self._cap(call_id, output)
                item.update(status="completed" if exit_code == 0 else "failed", aggregatedOutput=aggregated,
                            exitCode=exit_code, durationMs=duration)
            else:
                item.update(status="declined")
            payload = self._item(item)
        self._completed(call_id, tool, "shell", payload, exit_code=exit_code, cap=cap)
        if allowed:
            self.audit("command", command[:160], {"command": command, "cwd": self.workspace_dir, "exitCode": exit_code,
                                                  "durationMs": duration, "runId": self.run.id, "toolCallId": call_id},
                       "agent")

    def read(self, path: str, content: str | None = None, *, denied_rule: str | None = None) -> None:
        """Claude's Read; ``denied_rule``: the profile's file_access refuses it."""
        call_id = "toolu_01" + self.ids.token(22)
        inp = {"file_path": path}
        self._started(call_id, "Read", "file_read",
                      self._assistant({"type": "tool_use", "id": call_id, "name": "Read", "input": inp}, "tool_use"))
        self.tick(20, 200)
        if denied_rule:
            text = f"Access denied: {path} matches the file access deny rule \"{denied_rule}\" of this profile."
            payload = self._tool_result(call_id, text, True, "Error: " + text)
            self.audit("file_access_denied", f"read denied: {path}",
                       {"path": path, "rule": denied_rule, "tool": "Read", "runId": self.run.id,
                        "toolCallId": call_id}, "agent")
        else:
            lines = content.splitlines()
            numbered = "".join(f"{i:>6}\t{line}\n" for i, line in enumerate(lines, 1))
            payload = self._tool_result(call_id, numbered, False, {"type": "text", "file": {
                "filePath": path, "content": content, "numLines": len(lines), "startLine": 1,
                "totalLines": len(lines)}})
        self._completed(call_id, "Read", "file_read", payload)

    def edit(self, path: str, before: str, old: str, new: str) -> str:
        """Claude's Edit of ``path`` (whose text is ``before``); returns the text after."""
        after = before.replace(old, new, 1)
        call_id = "toolu_01" + self.ids.token(22)
        inp = {"file_path": path, "old_string": old, "new_string": new}
        self._started(call_id, "Edit", "file_change",
                      self._assistant({"type": "tool_use", "id": call_id, "name": "Edit", "input": inp}, "tool_use"))
        self.tick(50, 300)
        payload = self._tool_result(call_id, f"The file {path} has been updated.", False, {
            "filePath": path, "oldString": old, "newString": new, "originalFile": before,
            "structuredPatch": _hunks(before, after), "userModified": False, "replaceAll": False})
        self._completed(call_id, "Edit", "file_change", payload)
        return after

    def file_change(self, changes: list, *, approval: str | None = None) -> None:
        """Codex fileChange: ``changes`` = [(path, before or None, after or None)]."""
        call_id = "call_" + self.ids.token(24)
        self._usage()
        items = []
        for path, before, after in changes:
            kind = {"type": "add"} if before is None else {"type": "delete"} if after is None else {
                "type": "update", "move_path": None}
            items.append({"path": path, "kind": kind, "diff": _udiff(path, before, after)})
        item = {"type": "fileChange", "id": call_id, "changes": items, "status": "inProgress"}
        self._started(call_id, "fileChange", "file_change", self._item(dict(item)))
        allowed = True
        if approval:
            allowed = self._approve(call_id, approval, method="item/fileChange/requestApproval",
                                    params={"reason": "Writes outside the outputs folder.", "grantRoot": None},
                                    summary="apply patch: " + ", ".join(p for p, _, _ in changes))
        self.tick(50, 400)
        item["status"] = "completed" if allowed else "declined"
        self._completed(call_id, "fileChange", "file_change", self._item(item))

    def mcp(self, server: str, tool: str, arguments: dict, result: str | None = None, error: str | None = None) -> None:
        duration = self.rng.randint(120, 2500)
        if self.claude:
            call_id, name = "toolu_01" + self.ids.token(22), f"mcp__{server}__{tool}"
            self._started(call_id, name, "mcp", self._assistant({"type": "tool_use", "id": call_id, "name": name,
                                                                 "input": arguments}, "tool_use"))
            self.clock += duration
            text = result if error is None else f"MCP error -32603: {error}"
            payload = self._tool_result(call_id, [{"type": "text", "text": text}], error is not None,
                                        [{"type": "text", "text": text}])
        else:
            call_id, name = "call_" + self.ids.token(24), "mcpToolCall"
            self._usage()
            item = {"type": "mcpToolCall", "id": call_id, "server": server, "tool": tool, "status": "inProgress",
                    "arguments": arguments, "result": None, "error": None, "durationMs": None}
            self._started(call_id, name, "mcp", self._item(dict(item)))
            self.clock += duration
            if error is None:
                item.update(status="completed", result={"content": [{"type": "text", "text": result}],
                                                        "structuredContent": None})
            else:
                item.update(status="failed", error={"message": error})
            item["durationMs"] = duration
            payload = self._item(item)
        self._completed(call_id, name, "mcp", payload)

    def web_fetch(self, url: str, prompt: str, result: str) -> None:
        call_id = "toolu_01" + self.ids.token(22)
        inp = {"url": url, "prompt": prompt}
        self._started(call_id, "WebFetch", "web_fetch",
                      self._assistant({"type": "tool_use", "id": call_id, "name": "WebFetch", "input": inp},
                                      "tool_use"))
        duration = self.rng.randint(400, 3000)
        self.clock += duration
        payload = self._tool_result(call_id, result, False, {"bytes": self.rng.randint(20_000, 90_000), "code": 200,
                                                             "codeText": "OK", "result": result,
                                                             "durationMs": duration, "url": url})
        self._completed(call_id, "WebFetch", "web_fetch", payload)

    def web_search(self, query: str) -> None:
        call_id = "ws_" + self.ids.hex(32)
        self._usage()
        item = {"type": "webSearch", "id": call_id, "query": query, "action": None}
        self._started(call_id, "webSearch", "web_search", self._item(dict(item)))
        self.tick(500, 2500)
        item["action"] = {"type": "search", "query": query, "queries": None}
        self._completed(call_id, "webSearch", "web_search", self._item(item))

    def ask(self, question: str, header: str, options: list, answer: str) -> None:
        """Claude's AskUserQuestion, answered through an interaction of kind 'question'."""
        call_id = "toolu_01" + self.ids.token(22)
        questions = [{"question": question, "header": header,
                      "options": [{"label": lbl, "description": d} for lbl, d in options], "multiSelect": False}]
        inp = {"questions": questions}
        self._started(call_id, "AskUserQuestion", "question",
                      self._assistant({"type": "tool_use", "id": call_id, "name": "AskUserQuestion", "input": inp},
                                      "tool_use"))
        self._interaction("question", {"toolName": "AskUserQuestion", "toolUseId": call_id, "input": inp},
                          "answered", {"answers": {question: answer}}, question)
        text = (f'User has answered your questions: "{question}"="{answer}". '
                "You can now continue with the user's answers in mind.")
        self._completed(call_id, "AskUserQuestion", "question",
                        self._tool_result(call_id, text, False,
                                          {"questions": questions, "answers": {question: answer}}))


# ---------------------------------------------------------------------------------------------
# Content: made-up sessions, each exercising some features.

NGINX_CONF = """server {
    listen 80;
    server_name www.example.internal;
    location / {
        proxy_pass http://127.0.0.1:3000;
        proxy_read_timeout 60s;
    }
}

server {
    listen 80;
    server_name api.example.internal;
    location / {
        proxy_pass http://127.0.0.1:8080;
        proxy_read_timeout 60s;
    }
}
"""
LOADER_TS = """import { readFileSync } from "node:fs";
import { defaults } from "./defaults";

export function loadConfig(path: string) {
  const fileConfig = JSON.parse(readFileSync(path, "utf8"));
  const envOverrides = fromEnv(process.env);
  return { ...defaults, ...envOverrides, ...fileConfig };
}
"""
REFUNDS_PY = """import time


class RefundService:
    def __init__(self, store):
        self.store = store

    def refund(self, order_id, amount):
        key = f"rf_{int(time.time()) // 60}_{order_id}"
        return self.store.put_once(key, amount)
"""
REFUNDS_PY_FIXED = """import time


class RefundService:
    def __init__(self, store, clock=time.time):
        self.store = store
        self.clock = clock

    def refund(self, order_id, amount):
        key = f"rf_{int(self.clock()) // 60}_{order_id}"
        return self.store.put_once(key, amount)
"""
CONFTEST_PY = """import pytest


@pytest.fixture
def frozen_clock():
    return lambda: 1_700_000_000.0
"""
VITE_CONFIG = """import { defineConfig } from "vite";
import { VitePWA } from "vite-plugin-pwa";

export default defineConfig({
  plugins: [VitePWA({ registerType: "autoUpdate" })],
});
"""
GO_MOD = """module example.internal/inventory

go 1.22

require github.com/jackc/pgx/v5 v5.6.0
"""

# Filler runs (seed-dependent): (prompt, shell command or None, output, exit code, answer)
FILLER_EN = [
    ("What changed in the last commit?", "git log -1 --stat",
     ("commit 3f2a9c1e\nAuthor: Dev <dev@example.internal>\n\n    Tidy imports\n\n src/app.ts | 4 ++--\n"
      " 1 file changed, 2 insertions(+), 2 deletions(-)\n"), 0, "The last commit only tidied imports in src/app.ts."),
    ("Is the service healthy?", "curl -sS -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8080/healthz", "200\n", 0,
     "Yes: /healthz answers 200."),
    ("Do we have PyYAML installed?", "python3 -c 'import yaml'",
     ("Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n"
      "ModuleNotFoundError: No module named 'yaml'\n"), 1, "No: importing yaml fails with ModuleNotFoundError."),
    ("Is there a .env file in the repo?", "test -f .env", "", 1, "No, there is no .env file (test -f exits 1)."),
    ("Summarise what you did so far.", None, None, None,
     "So far: reproduced the problem, found the cause, and fixed it with a test."),
]
FILLER_ZH = [
    ("/srv 还剩多少磁盘？", "df -h /srv",
     "Filesystem      Size  Used Avail Use% Mounted on\n/dev/vda1        80G   41G   36G  54% /srv\n", 0,
     "/srv 还剩 36G，使用率 54%。"),
    ("服务现在健康吗？", "curl -sS -o /dev/null -w '%{http_code}\\n' http://127.0.0.1:8080/healthz", "200\n", 0,
     "健康，/healthz 返回 200。"),
    ("仓库里有 .env 文件吗？", "test -f .env", "", 1, "没有，test -f 的退出码是 1。"),
    ("总结一下到目前为止做了什么。", None, None, None, "到目前为止：复现了问题，找到了原因，并修复验证。"),
]
EXTRA_TITLES = [("claude", "Review the onboarding docs"), ("codex", "检查定时任务的日志"),
                ("claude", "整理 API 错误码"), ("codex", "Add a health check endpoint")]


def _filler(s: _Script, zh: bool) -> None:
    prompt, command, output, code, answer = s.rng.choice(FILLER_ZH if zh else FILLER_EN)
    s.start_run(prompt)
    if s.rng.random() < 0.5:
        s.reasoning("简单问题，直接检查。" if zh else "A quick check answers this.")
    if command:
        s.shell(command, output, code)
    s.say(answer)
    s.end_run()


def _fillers(s: _Script, zh: bool, lo: int = 0, hi: int = 2) -> None:
    for _ in range(s.rng.randint(lo, hi)):
        _filler(s, zh)


def _access_log(rng: random.Random, lines: int = 600) -> tuple[str, dict]:
    """A made-up nginx access log of yesterday, and the 502 count per upstream."""
    out, counts = [], {}
    for i in range(lines):
        secs = i * 86 + rng.randint(0, 80)
        status = 502 if rng.random() < 0.04 else rng.choice((200, 200, 200, 200, 304, 404))
        upstream = (rng.choice(("10.0.3.17:8080", "10.0.3.17:8080", "10.0.3.17:8080", "10.0.3.18:8080"))
                    if status == 502 else rng.choice(("10.0.3.17:8080", "10.0.3.18:8080", "10.0.3.21:8080")))
        if status == 502:
            counts[upstream] = counts.get(upstream, 0) + 1
        out.append(f'172.16.{rng.randint(0, 9)}.{rng.randint(2, 254)} - - [18/Oct/2025:{secs // 3600:02}:'
                   f'{secs // 60 % 60:02}:{secs % 60:02} +0000] "GET /api/orders/{rng.randint(1000, 99999)} HTTP/1.1" '
                   f'{status} {rng.randint(120, 9000)} "-" "okhttp/4.12.0" rt={rng.uniform(0.002, 3.5):.3f} '
                   f'upstream={upstream}\n')
    return "".join(out), counts


def _s1_nginx(s: _Script) -> None:
    ws = s.workspace_dir
    s.start_run("在测试机上部署 nginx，配置文件在 uploads/nginx.conf，部署完检查一下错误日志。")
    s.file("uploads/nginx.conf", "upload", "text/plain", NGINX_CONF.encode())
    s.reasoning("用户要部署 nginx。先用 nginx -t 校验上传的配置，再安装到 /etc/nginx 并重载，最后看 error.log。")
    s.say("我先校验一下上传的配置文件。")
    s.shell(f"nginx -t -c {ws}/uploads/nginx.conf",
            f"nginx: the configuration file {ws}/uploads/nginx.conf syntax is ok\n"
            f"nginx: configuration file {ws}/uploads/nginx.conf test is successful\n", 0,
            approval="approved", description="Validate the uploaded nginx config")
    s.shell("sudo install -m 644 uploads/nginx.conf /etc/nginx/conf.d/app.conf && sudo systemctl reload nginx", "", 0)
    s.shell("tail -n 3 /var/log/nginx/error.log",
            "2025/10/17 09:12:03 [notice] 2112#2112: signal process started\n"
            "2025/10/17 09:12:03 [notice] 2113#2113: gracefully shutting down\n"
            "2025/10/17 09:12:03 [notice] 2113#2113: exiting\n", 0)
    s.say("部署完成：配置校验通过，nginx 已重载。error.log 最近 3 行只有重载的 notice，没有错误。")
    s.end_run()
    s.start_run("日志里有没有 upstream timed out？顺便查一下 proxy_read_timeout 的默认值。")
    s.shell("grep -c 'upstream timed out' /var/log/nginx/error.log", "0\n", 1)
    s.web_fetch("https://nginx.org/en/docs/http/ngx_http_proxy_module.html#proxy_read_timeout",
                "What is the default value of proxy_read_timeout?",
                "proxy_read_timeout: Default 60s. Context: http, server, location.")
    s.unknown("rate_limit.updated", {"type": "rate_limit_event", "rate_limit_info": {
        "status": "allowed_warning", "rateLimitType": "five_hour", "resetsAt": (s.clock // 1000) + 7200,
        "utilization": 0.82}, "uuid": s.ids.uuid4(), "session_id": s.psid})
    s.say("没有匹配：grep 计数为 0（退出码 1 表示没有匹配行）。proxy_read_timeout 的默认值是 60s。")
    s.end_run()
    s.start_run("把 proxy_read_timeout 调到 120s。")
    s.ask("要修改哪些 server 块？", "范围",
          [("全部", "www 和 api 两个 server 块"), ("仅 api", "只改 api.example.internal")], "仅 api")
    api_block = "        proxy_pass http://127.0.0.1:8080;\n        proxy_read_timeout 60s;"
    after = s.edit(f"{ws}/uploads/nginx.conf", NGINX_CONF, api_block, api_block.replace("60s", "120s"))
    s.rewrite_file("uploads/nginx.conf", after.encode())
    s.shell("sudo install -m 644 uploads/nginx.conf /etc/nginx/conf.d/app.conf && sudo nginx -t && "
            "sudo systemctl reload nginx",
            "nginx: the configuration file /etc/nginx/nginx.conf syntax is ok\n"
            "nginx: configuration file /etc/nginx/nginx.conf test is successful\n", 0)
    s.file("outputs/nginx-check.md", "agent", "text/markdown",
           "# nginx 检查\n\n- 配置校验通过\n- api.example.internal: proxy_read_timeout 120s\n".encode())
    s.say("已把 api.example.internal 的 proxy_read_timeout 改为 120s，校验通过并已重载。")
    s.end_run()
    _fillers(s, zh=True)


def _s2_flaky(s: _Script) -> None:
    s.start_run("`test_refund_idempotency` fails about 1 in 10 runs on CI. Find out why.")
    s.reasoning("Reproduce first, then look for time-dependent code in the refund path.")
    s.unknown("plan.updated", {"threadId": s.psid, "turnId": s.run.turn_id,
                               "explanation": "Reproduce, then locate the time dependency.",
                               "plan": [{"step": "Reproduce the failure", "status": "inProgress"},
                                        {"step": "Find time-dependent code", "status": "pending"},
                                        {"step": "Propose a fix", "status": "pending"}]})
    s.shell("pytest tests/test_refunds.py -k idempotency -q --count 20",
            "....F...............\nFAILED tests/test_refunds.py::test_refund_idempotency - AssertionError: "
            "assert 'rf_28333333_7' == 'rf_28333334_7'\n1 failed, 19 passed in 2.41s\n", 1)
    s.shell("rg -n 'time\\.time\\(\\)' payments/",
            "payments/refunds.py:9:        key = f\"rf_{int(time.time()) // 60}_{order_id}\"\n", 0)
    s.say("The idempotency key is derived from `time.time() // 60`, so two calls that straddle a minute "
          "boundary get different keys: that is the 1-in-10 failure.")
    s.end_run()
    s.start_run("Make the clock injectable and fix the test.")
    s.file_change([("payments/refunds.py", REFUNDS_PY, REFUNDS_PY_FIXED), ("tests/conftest.py", None, CONFTEST_PY)],
                  approval="approved")
    s.shell("pytest tests/test_refunds.py -q", "........\n8 passed in 0.61s\n", 0)
    s.file("outputs/flaky-analysis.md", "agent", "text/markdown",
           b"# test_refund_idempotency\n\nCause: key derived from the wall clock. Fix: injectable clock.\n")
    s.say("Done: `RefundService` takes a `clock` callable (default `time.time`) and the tests use a frozen "
          "clock fixture. 8 passed.")
    s.end_run()
    _fillers(s, zh=False)
    midnight = (s.clock // DAY_MS + 1) * DAY_MS
    if midnight - 15_000 < s.clock + 60_000:
        midnight += DAY_MS
    s.start_run("Run the refund tests 20 times to be sure.", at=midnight - 15_000)  # ends after midnight UTC
    s.shell("for i in $(seq 20); do pytest -q tests/test_refunds.py || exit 1; done",
            "8 passed in 0.58s\n" * 20, 0, approval="approved")
    s.clock = max(s.clock, midnight + 5_000)
    s.say("20 out of 20 runs passed.")
    s.end_run()


def _s3_access_log(s: _Script) -> None:
    log, counts = _access_log(s.rng)
    s.start_run("看看 /var/log/nginx/access.log 里昨天的 502 是哪个 upstream 返回的。")
    s.shell("cat /var/log/nginx/access.log", log, 0)  # over 64 KB: truncated, full text in .agent/tool-outputs
    s.reasoning("输出被截断了，直接用 awk 按 upstream 统计 502。")
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    summary = "".join(f"{n:>7} upstream={u}\n" for u, n in ranked)
    s.shell("awk '$9 == 502 {print $NF}' /var/log/nginx/access.log | sort | uniq -c | sort -rn", summary, 0)
    total = sum(counts.values())
    top, top_n = ranked[0]
    s.say(f"昨天共有 {total} 个 502，其中 {top_n} 个来自 upstream {top}，建议先检查这台机器上的服务。")
    s.end_run()
    s.start_run("把统计结果写成 markdown 报告放到 outputs。")
    report = "# 502 统计\n\n" + "".join(f"- {u}: {n}\n" for u, n in ranked)
    s.file_change([("outputs/502-summary.md", None, report)])
    s.file("outputs/502-summary.md", "agent", "text/markdown", report.encode())
    s.say("报告已写到 outputs/502-summary.md。")
    s.end_run()


def _s4_refactor(s: _Script) -> None:
    ws = s.workspace_dir
    s.start_run("Refactor src/config/loader.ts so env overrides are applied after file defaults.")
    s.read(f"{ws}/src/config/loader.ts", LOADER_TS)
    s.read("/home/app/.env", denied_rule="**/.env")
    s.mcp("docs", "search", {"query": "config precedence env file"},
          "ADR-7 (2024): environment variables override values from config files, which override defaults.")
    s.reasoning("ADR-7 says env > file > defaults; the spread order is wrong.")
    old = "{ ...defaults, ...envOverrides, ...fileConfig }"
    s.edit(f"{ws}/src/config/loader.ts", LOADER_TS, old, "{ ...defaults, ...fileConfig, ...envOverrides }")
    s.say("Env overrides now apply after file defaults (`{ ...defaults, ...fileConfig, ...envOverrides }`), per "
          "ADR-7. I could not read /home/app/.env: the profile's file access denies it.")
    s.end_run()
    s.clock += 60_000
    s.unknown("x.custom", {"source": "platform", "kind": "label", "labels": ["refactor", "needs-review"]},
              in_run=False)
    s.start_run("Clean the build directory and rebuild.")
    s.reasoning("Deleting build/ needs an approval in this profile.")
    s.shell("rm -rf build && npm run build", None, None, approval="expired")  # timed out: refused, never ran
    s.say("I did not run `rm -rf build && npm run build`: the approval request timed out, which counts as a "
          "refusal. Approve it next time or run it yourself.")
    s.end_run()
    _fillers(s, zh=False)


def _s5_build(s: _Script) -> None:
    ws = s.workspace_dir
    s.start_run("把 vite 升级到 7，并修复构建错误。")
    s.shell("npm install -D vite@7 vite-plugin-pwa@1",
            "added 3 packages, changed 11 packages, and audited 412 packages in 6s\n\nfound 0 vulnerabilities\n", 0)
    s.shell("npm run build", "> web@1.4.0 build\n> vite build\n\nerror during build:\n[vite]: Rollup failed to "
            "resolve import \"virtual:pwa-register\" from \"src/main.ts\".\n", 1)
    s.edit(f"{ws}/vite.config.ts", VITE_CONFIG, 'VitePWA({ registerType: "autoUpdate" })',
           'VitePWA({ registerType: "autoUpdate", injectRegister: "auto" })')
    s.shell("npm run build", "> web@1.4.0 build\n> vite build\n\n✓ 214 modules transformed.\n"
            "dist/index.html  0.46 kB\n✓ built in 3.12s\n", 0)
    s.say("vite 已升级到 7，构建通过。原因是 vite-plugin-pwa 1.x 需要在 vite.config.ts 里加 `injectRegister: 'auto'`。")
    s.end_run()
    s.start_run("再跑一次完整构建并打包 Docker 镜像。")
    s.reasoning("先 npm run build，再 docker build。")
    s.shell("npm run build && docker build -t web:1.4.0 .", None, None, complete=False)  # never completes
    s.clock += 95_000
    s.error("Claude Code process exited with code 137", info="process_exit", will_retry=False)
    s.end_run("failed", error="Claude Code process exited with code 137")


def _s6_prs(s: _Script) -> None:
    s.start_run("List the open PRs labelled release-2.4 and summarise them for the release notes.")
    prs = [{"number": 408, "title": "Add saved carts", "labels": ["release-2.4", "feature"], "checks": "passing"},
           {"number": 412, "title": "Fix VAT rounding for CHF", "labels": ["release-2.4", "fix"], "checks": "failing"},
           {"number": 415, "title": "Upgrade Postgres driver", "labels": ["release-2.4", "chore"], "checks": "passing"}]
    s.mcp("github", "list_pull_requests", {"owner": "example-org", "repo": "shop", "state": "open",
                                           "labels": ["release-2.4"]}, _j(prs))
    s.error("stream disconnected before completion: error sending request for url", will_retry=True,
            info={"responseStreamDisconnected": {"httpStatusCode": None}})
    s.reasoning("Three PRs: one feature, one fix, one chore.")
    s.web_search("keep a changelog release notes sections added fixed changed")
    s.unknown("context.compacted", {"threadId": s.psid, "turnId": s.run.turn_id,
                                    "item": {"type": "contextCompaction", "id": s.ids.uuid4()}})
    s.say("Release 2.4, open PRs:\n- Added: #408 saved carts\n- Fixed: #412 VAT rounding for CHF (checks failing)\n"
          "- Changed: #415 Postgres driver upgrade")
    s.end_run()
    s.start_run("Is #412 still failing CI?")
    s.mcp("github", "get_check_runs", {"owner": "example-org", "repo": "shop", "pull_number": 412},
          error="GitHub API rate limit exceeded (HTTP 403)")
    s.say("I could not check: the GitHub MCP server hit a rate limit (HTTP 403). The PR list still shows its "
          "checks as failing.")
    s.end_run()
    _fillers(s, zh=False)


def _s7_wal(s: _Script) -> None:
    s.start_run("SQLite 的 WAL 模式下，为什么读连接看不到别人未提交的写入？")
    s.reasoning("解释 WAL 的快照读：读事务开始时记下 WAL 中最后一个提交帧。")
    s.say("在 WAL 模式下，写入先追加到 -wal 文件。每个读事务开始时会记下当时最后一个已提交的帧（read mark），"
          "之后只读到这个位置为止；未提交的帧没有提交标记，读者永远不会用到它们，所以看不到一半的事务。", chunks=4)
    s.end_run()
    s.start_run("那 checkpoint 什么时候发生？")
    s.say("默认在提交后 WAL 超过 1000 页时自动做被动 checkpoint；最后一个连接关闭时也会 checkpoint 并删除 -wal。"
          "也可以手动执行 PRAGMA wal_checkpoint。", chunks=3)
    s.end_run()
    _fillers(s, zh=True)


def _s8_go(s: _Script) -> None:
    s.start_run("Bump the Go toolchain to 1.23 in go.mod and make sure it builds.")
    s.shell("go version", "go version go1.23.2 linux/amd64\n", 0)
    s.file_change([("go.mod", GO_MOD, GO_MOD.replace("go 1.22\n", "go 1.23\n\ntoolchain go1.23.2\n"))])
    s.shell("go build ./...", "", 0)
    s.file("outputs/build.log", "agent", "text/plain", b"go build ./...: ok\n")
    s.say("go.mod now says `go 1.23` with `toolchain go1.23.2`; `go build ./...` is clean.")
    s.end_run()
    s.start_run("Also update the Dockerfile base image.")
    s.say("I'll switch the builder stage to `golang:1.23-alpine` and", chunks=2, final=False)  # cut off
    s.end_run("interrupted")


# (script, provider, model, profile, api key, source, permission_mode, title, start offset ms, archive after ms,
#  workspace kept)
SCENARIOS = [
    (_s8_go, "codex", "gpt-5-codex", "codex-default", "old-integration", "api", "default",
     "Bump Go toolchain to 1.23", -40 * DAY_MS + 3_600_000, 3 * DAY_MS, False),
    (_s4_refactor, "claude", "claude-sonnet-4-5", "claude-default", "ci-platform", "ci", "default",
     "Refactor config loader", -6 * DAY_MS, 2 * DAY_MS, True),
    (_s5_build, "claude", "claude-sonnet-4-5", "claude-default", "feishu-bot", "feishu", "bypassPermissions",
     "升级依赖并修复构建", -4 * DAY_MS + 7_200_000, None, True),
    (_s1_nginx, "claude", "claude-sonnet-4-5", "ops-runbook", "feishu-bot", "feishu", "",
     "部署 nginx 并检查日志", -3 * DAY_MS + 3_600_000, None, True),
    (_s2_flaky, "codex", "gpt-5-codex", "codex-default", "ci-platform", "ci", "default",
     "Fix flaky test in payments service", -2 * DAY_MS + 10_800_000, None, True),
    (_s3_access_log, "codex", "gpt-5-codex", "codex-default", "feishu-bot", "feishu", "bypassPermissions",
     "分析 access.log 的 502 错误", -DAY_MS, None, True),
    (_s6_prs, "codex", "gpt-5", "codex-readonly", "ci-platform", "ci", "",
     "Summarise open PRs for the release notes", -DAY_MS + 14_400_000, None, True),
    (_s7_wal, "claude", "claude-haiku-4-5", "claude-default", "feishu-bot", "feishu", "default",
     "解释 WAL 模式", 1_800_000, None, True),
]


def _world(b: _Batch, ids: _Ids) -> dict:
    """Profiles, knowledge roots, API keys, settings, admin logins; returns names -> rows and the secrets."""
    kr = {}
    for name, path, desc, access, enabled, visible, checked in [
            ("runbooks", "/srv/knowledge/runbooks", "Ops runbooks (nginx, systemd)", "read", 1, 1, NOW_MS - 3_600_000),
            ("payments-docs", "/srv/knowledge/payments", "Payments service ADRs", "read", 1, 1, NOW_MS - 7_200_000),
            ("scratch", "/srv/knowledge/scratch", "Shared scratch space", "write", 0, 0, None)]:
        kr[name] = b.add("knowledge_roots", id=ids.uuid4(), name=name, path=path, description=desc, access=access,
                         enabled=enabled, visible=visible, checked_at=checked)
    profiles = {}
    for name, provider, model, mode, allowed, disallowed, skills, roots, is_default, builtin in [
            ("claude-default", "claude", "claude-sonnet-4-5", "default", [], [], [], [], 1, 1),
            ("codex-default", "codex", "gpt-5-codex", "default", [], [], [], [], 0, 1),
            ("ops-runbook", "claude", "claude-sonnet-4-5", "acceptEdits",
             ["Bash", "Read", "Edit", "WebFetch", "AskUserQuestion", "mcp__docs__search"], ["WebSearch"],
             ["nginx-triage"], ["runbooks"], 0, 0),
            ("codex-readonly", "codex", "gpt-5", "plan", [], ["fileChange"], [], ["payments-docs"], 0, 0)]:
        profiles[name] = b.add(
            "profiles", id=ids.uuid4(), name=name, provider=provider, model=model,
            system_prompt="" if builtin else f"You are the {name} agent. Be brief; ask before destructive commands.",
            permission_mode=mode, allowed_tools=_j(allowed), disallowed_tools=_j(disallowed), skills=_j(skills),
            file_access=_j({"read": ["workspace", "knowledge"], "write": ["workspace"],
                            "deny": ["/etc/shadow", "/root/.ssh/**", "**/.env"]}),
            knowledge_root_ids=_j([kr[r]["id"] for r in roots]), is_default=is_default, builtin=builtin,
            version=1 if builtin else 3, updated_at=NOW_MS - 20 * DAY_MS)
        for r in roots:
            b.add("profile_knowledge", profile_id=profiles[name]["id"], knowledge_root_id=kr[r]["id"])
    keys, secrets = {}, []
    for i, (name, enabled, allowed, default) in enumerate([
            ("feishu-bot", 1, ["claude-default", "ops-runbook", "codex-default"], "ops-runbook"),
            ("ci-platform", 1, list(profiles), "codex-default"),
            ("old-integration", 0, ["codex-default"], "codex-default"),
            ("staging-smoke", 1, ["claude-default"], "claude-default")]):
        raw = "ask_" + ids.token(40)  # made up; only its hash and prefix are stored
        keys[name] = b.add("api_keys", id=ids.uuid4(), name=name, key_hash=hashlib.sha256(raw.encode()).hexdigest(),
                           key_prefix=raw[:12], enabled=enabled,
                           allowed_profile_ids=_j([profiles[p]["id"] for p in allowed]),
                           default_profile_id=profiles[default]["id"], created_at=BASE_MS - (60 - 5 * i) * DAY_MS,
                           last_used_at=None)
        secrets.append(keys[name]["key_hash"])
    anthropic = "sk-ant-api03-madeup-" + ids.token(40)
    openai = "sk-proj-madeup-" + ids.token(40)
    webhook = "whsec_madeup_" + ids.token(32)
    cookie = ids.hex(64)
    settings = [
        ("paths", {"dataDir": "/srv/agent-server/data", "workspacesDir": "/srv/agent-server/workspaces"}),
        ("providers.claude", {"cliPath": "/usr/local/bin/claude", "env": {"ANTHROPIC_API_KEY": anthropic}}),
        ("providers.codex", {"cliPath": "/usr/local/bin/codex", "env": {"OPENAI_API_KEY": openai}}),
        ("security.denyCommands", ["rm -rf /", "mkfs*", "shutdown*", "curl * | sh"]),
        ("security.denyPaths", ["/etc/shadow", "/root/.ssh/**", "**/.env"]),
        ("network.allowHosts", ["registry.npmjs.org", "pypi.org", "github.com", "nginx.org", "*.example.internal"]),
        ("limits", {"maxConcurrentRuns": 4, "maxUploadBytes": 52_428_800, "toolOutputInlineBytes": TOOL_OUTPUT_CAP,
                    "interactionTimeoutMs": INTERACTION_TIMEOUT_MS}),
        ("retention", {"workspaceDaysAfterArchive": 7, "auditLogDays": 365}),
        ("notifications.webhook", {"url": "https://hooks.example.invalid/agent-server", "token": webhook,
                                   "events": ["run.completed", "interaction.requested"]}),
        ("admin.auth", {"cookieSecret": cookie, "sessionTtlHours": 24}),
    ]
    for i, (key, value) in enumerate(settings):
        b.add("settings", key=key, value=_j(value), updated_at=NOW_MS - (50 - i) * DAY_MS)
    secrets += [anthropic, openai, webhook, cookie]
    for created, expires in [(NOW_MS - 3 * DAY_MS, NOW_MS - 2 * DAY_MS), (NOW_MS - 7_200_000, NOW_MS + 79_200_000)]:
        secrets.append(b.add("admin_sessions", id=ids.b64url(32), created_at=created, expires_at=expires)["id"])
    for ts, summary, detail in [
            (NOW_MS - 45 * DAY_MS, "settings updated: limits", {"key": "limits"}),
            (BASE_MS - 45 * DAY_MS, "api key created: staging-smoke", {"apiKeyId": keys["staging-smoke"]["id"]}),
            (BASE_MS - 10 * DAY_MS, "api key disabled: old-integration", {"apiKeyId": keys["old-integration"]["id"]}),
            (NOW_MS - 7_200_000, "admin login", {"ip": "10.0.0.5"})]:
        b.add("audit_logs", ts=ts, actor="admin", session_id=None, kind="admin", summary=summary, detail=_j(detail))
    return {"profiles": profiles, "keys": keys, "secrets": secrets,
            "secret_settings": ["providers.claude", "providers.codex", "notifications.webhook", "admin.auth"]}


def build_agent_db(root: Path, *, seed: int = 0, extra_sessions: int = 0,
                   workspace_base: str | None = None, tool_ids: str = "server") -> Expected:
    """Write ``root/data/agent.db`` and the workspaces; return the expected figures.

    ``extra_sessions`` adds that many plain sessions (filler runs only) after the eight scenario ones.
    ``tool_ids``: where ``tool.started`` / ``tool.completed`` carry their call id (see
    :data:`TOOL_ID_SHAPES`); the events are otherwise the same.
    """
    root = Path(root)
    db_path = root / "data" / "agent.db"
    if db_path.exists():
        raise FileExistsError(db_path)
    rng = random.Random(seed)
    ids = _Ids(rng)
    b = _Batch()
    world = _world(b, ids)
    ws_base = workspace_base or str(root / "workspaces")
    specs = list(SCENARIOS)
    for i in range(extra_sessions):
        provider, title = EXTRA_TITLES[i % len(EXTRA_TITLES)]
        specs.append((None, provider, "claude-sonnet-4-5" if provider == "claude" else "gpt-5-codex",
                      f"{provider}-default", rng.choice(["feishu-bot", "ci-platform"]), "api",
                      rng.choice(["", "default"]), title if i < len(EXTRA_TITLES) else f"{title} #{i + 1}",
                      -rng.randint(5, 30) * DAY_MS, 2 * DAY_MS if rng.random() < 0.2 else None, True))
    sessions = {}
    for fn, provider, model, profile, key, source, mode, title, offset, archive_after, kept in specs:
        sid = ids.uuid4()
        start = BASE_MS + offset + rng.randint(0, 3_600_000)
        psid = ids.uuid4() if provider == "claude" else ids.uuid7(start)
        prof, api_key = world["profiles"][profile], world["keys"][key]
        effective = mode or prof["permission_mode"]
        ws_dir = f"{ws_base}/{sid}"
        ws_path = root / "workspaces" / sid if kept else None
        s = _Script(b, rng, sid=sid, provider=provider, model=model, psid=psid, workspace_dir=ws_dir,
                    workspace_path=ws_path, api_key_id=api_key["id"], permission_mode=effective, clock=start,
                    tool_ids=tool_ids)
        if fn is None:
            for _ in range(rng.randint(1, 3)):
                _filler(s, zh=any(ord(c) > 0x2E80 for c in title))
        else:
            fn(s)
        created = s.first_started - rng.randint(2_000, 30_000)
        updated = s.clock
        archived = archive_after is not None
        if archived:
            updated = s.clock + archive_after
            if fn is _s8_go:
                s.audit("admin", "session archived", {"sessionId": sid, "by": "admin"}, "admin", ts=updated)
        b.add("sessions", id=sid, api_key_id=api_key["id"], source=source, profile_id=prof["id"], provider=provider,
              model=model, permission_mode=mode, provider_session_id=psid, workspace_dir=ws_dir, title=title,
              last_seq=s.seq, created_at=created, updated_at=updated, archived=int(archived))
        if ws_path is not None:
            for sub in ("uploads", "outputs", ".agent/tool-outputs"):
                (ws_path / sub).mkdir(parents=True, exist_ok=True)
        t = s.tally
        t.tool_started_without_completed = len(s.open_tools)
        exp = SessionExpected(session_id=sid, title=title, provider=provider, model=model, profile=profile,
                              api_key=key, source=source, permission_mode=mode, effective_permission_mode=effective,
                              archived=archived, provider_session_id=psid, workspace_dir=ws_dir,
                              workspace_exists=ws_path is not None)
        exp.merge(t)
        sessions[sid] = exp
        last_run = max((r["started_at"] for r in b.rows["runs"] if r["session_id"] == sid), default=None)
        if last_run is not None and (api_key["last_used_at"] or 0) < last_run:
            api_key["last_used_at"] = last_run
        for k, row in s.usage.items():
            b.usage.setdefault(k, UsageRow()).add(row)
    usage = b.usage
    for (date, key_id, provider, model), row in sorted(usage.items()):
        b.add("usage_daily", date=date, api_key_id=key_id, provider=provider, model=model, runs=row.runs,
              input_tokens=row.input_tokens, output_tokens=row.output_tokens, cost_usd=row.cost_usd)
    # write the workspaces, then the database
    for path, data in b.files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
    db_path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(str(db_path), isolation_level=None)
    try:
        assert conn.execute("PRAGMA journal_mode = WAL").fetchone()[0] == "wal"
        conn.execute("PRAGMA foreign_keys = ON")
        _migrate(conn)
        conn.execute("BEGIN")
        _insert(conn, b)
        conn.execute("COMMIT")
        assert not conn.execute("PRAGMA foreign_key_check").fetchall()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()
    without_session = sum(1 for r in b.rows["audit_logs"] if r["session_id"] is None)
    return Expected(root=root, db_path=db_path, seed=seed, sessions=sessions, secrets=world["secrets"],
                    secret_settings=world["secret_settings"], truncated_outputs=b.truncated, usage_daily=dict(usage),
                    audit_logs_without_session=without_session, counts={t: len(b.rows[t]) for t in TABLES})


def _migrate(conn: sqlite3.Connection) -> None:
    """What Drizzle's migrator does: its table, then each file's statements and a row, in one transaction."""
    conn.execute(DRIZZLE_MIGRATIONS_DDL)
    conn.execute("BEGIN")
    for _tag, when, sql_text in MIGRATIONS:
        for statement in sql_text.split("--> statement-breakpoint"):
            if statement.strip():
                conn.execute(statement)
        conn.execute('INSERT INTO "__drizzle_migrations" ("hash", "created_at") VALUES (?, ?)',
                     (migration_hash(sql_text), when))
    conn.execute("COMMIT")


def _insert(conn: sqlite3.Connection, b: _Batch) -> None:
    for table in TABLES:
        rows = b.rows[table]
        if table in _TIME_ORDER:
            rows = sorted(rows, key=lambda r: r[_TIME_ORDER[table]])
        cols = COLUMNS[table]
        names = ", ".join(f"`{c}`" for c in cols)
        conn.executemany(f"INSERT INTO `{table}` ({names}) VALUES ({', '.join('?' * len(cols))})",
                         [tuple(r[c] for c in cols) for r in rows])


# ---------------------------------------------------------------------------------------------
# A live database: the server holding it open, appends from another connection, a pending write.

class Server:
    """Stands for the running agent-server: one idle connection kept open on ``agent.db``.

    While it is open, closing another connection never checkpoints, so committed rows stay in
    ``agent.db-wal`` (SQLite checkpoints and removes the WAL when the *last* connection closes).
    """

    def __init__(self, db_path: Path):
        self.conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=5)
        self.conn.execute("PRAGMA wal_autocheckpoint = 0")
        self.conn.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opens the WAL index

    def close(self) -> None:
        self.conn.close()


@contextmanager
def running_server(db_path: Path):
    server = Server(db_path)
    try:
        yield server
    finally:
        server.close()


def _writer(db_path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(db_path), isolation_level=None, timeout=5)
    conn.execute("PRAGMA wal_autocheckpoint = 0")  # never checkpoint: leave the rows in the -wal
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def _resume(conn: sqlite3.Connection, session_id: str, b: _Batch) -> _Script:
    row = conn.execute(
        "SELECT s.api_key_id, s.provider, s.model, s.provider_session_id, s.workspace_dir, s.last_seq, "
        "s.permission_mode, p.permission_mode FROM sessions s JOIN profiles p ON p.id = s.profile_id "
        "WHERE s.id = ?", (session_id,)).fetchone()
    if row is None:
        raise KeyError(session_id)
    key_id, provider, model, psid, ws_dir, last_seq, mode, profile_mode = row
    last_ts = conn.execute("SELECT MAX(ts) FROM events WHERE session_id = ?", (session_id,)).fetchone()[0] or NOW_MS
    total = None
    if provider == "codex":
        found = conn.execute("SELECT json_extract(payload, '$.tokenUsage.total') FROM events WHERE session_id = ? "
                             "AND type = 'run.completed' ORDER BY seq DESC LIMIT 1", (session_id,)).fetchone()
        total = json.loads(found[0]) if found and found[0] else None
    ws = Path(ws_dir)
    rng = random.Random(f"{session_id}:{last_seq}")
    # new tool events carry their ids as the database's earlier ones do
    tagged = conn.execute("SELECT COUNT(*), COUNT(json_extract(payload, '$.toolCallId')) FROM events "
                          "WHERE type IN ('tool.started', 'tool.completed')").fetchone()
    return _Script(b, rng, sid=session_id, provider=provider, model=model, psid=psid, workspace_dir=ws_dir,
                   workspace_path=ws if ws.is_dir() else None, api_key_id=key_id,
                   permission_mode=mode or profile_mode, clock=max(last_ts, NOW_MS), seq=last_seq,
                   thread_total=total, tool_ids="provider" if tagged[0] and not tagged[1] else "server")


def _latest_run(conn: sqlite3.Connection, s: _Script) -> None:
    found = conn.execute("SELECT r.id, r.started_at, (SELECT json_extract(e.payload, '$.turn.id') FROM events e "
                         "WHERE e.run_id = r.id AND e.type = 'run.started') FROM runs r WHERE r.session_id = ? "
                         "ORDER BY r.started_at DESC LIMIT 1", (s.sid,)).fetchone()
    if found is None:
        raise ValueError(f"session {s.sid} has no run to append to")
    s.run = _Run(id=found[0], turn_id=found[2], started_at=found[1])


def _flush(conn: sqlite3.Connection, s: _Script, b: _Batch, *, begin: str = "BEGIN IMMEDIATE",
           commit: bool = True) -> Added:
    """Write what the script added in one transaction: rows, sessions.last_seq/updated_at, usage_daily."""
    conn.execute(begin)
    try:
        _insert(conn, b)
        conn.execute("UPDATE sessions SET last_seq = ?, updated_at = ? WHERE id = ?", (s.seq, s.clock, s.sid))
        rows = {t: len(b.rows[t]) for t in TABLES if b.rows[t]}
        for (date, key_id, provider, model), u in s.usage.items():
            existed = conn.execute("SELECT 1 FROM usage_daily WHERE date = ? AND api_key_id = ? AND provider = ? "
                                   "AND model = ?", (date, key_id, provider, model)).fetchone()
            conn.execute("INSERT INTO usage_daily (date, api_key_id, provider, model, runs, input_tokens, "
                         "output_tokens, cost_usd) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (date, api_key_id, "
                         "provider, model) DO UPDATE SET runs = runs + excluded.runs, input_tokens = input_tokens + "
                         "excluded.input_tokens, output_tokens = output_tokens + excluded.output_tokens, "
                         "cost_usd = round(cost_usd + excluded.cost_usd, 6)",
                         (date, key_id, provider, model, u.runs, u.input_tokens, u.output_tokens, u.cost_usd))
            if not existed:
                rows["usage_daily"] = rows.get("usage_daily", 0) + 1
        if s.usage:
            conn.execute("UPDATE api_keys SET last_used_at = ? WHERE id = ?", (s.clock, s.api_key_id))
        for path, data in b.files.items():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
        if commit:
            conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    seqs = [r["seq"] for r in b.rows["events"]]
    return Added(session_id=s.sid, run_id=s.run.id if s.run else (b.rows["runs"][-1]["id"] if b.rows["runs"] else None),
                 seqs=seqs, tally=s.tally, rows=rows, usage=dict(s.usage))


def append_events(db_path: Path, session_id: str, n: int) -> Added:
    """Append ``n`` events to the session's latest run, from a connection of their own, committed and
    never checkpointed: deltas and assistant messages in turn (delta, delta, assistant.message, ...).
    The runs row is left as it is. Hold :func:`running_server` open for the rows to stay in the WAL."""
    b = _Batch()
    conn = _writer(db_path)
    try:
        s = _resume(conn, session_id, b)
        _latest_run(conn, s)
        parts: list[str] = []
        item_id = s.new_message_id()
        for i in range(n):
            if i % 3 == 2:
                s.message(item_id, "".join(parts))
                parts, item_id = [], s.new_message_id()
                s.call = None
            else:
                part = f"appended part {s.seq + 1}. " if s.rng.random() < 0.5 else f"追加的第 {s.seq + 1} 段。"
                parts.append(part)
                s.delta(item_id, part)
        return _flush(conn, s, b)
    finally:
        conn.close()


def add_run(db_path: Path, session_id: str, *, prompt: str = "Check the service once more.",
            command: str | None = "systemctl is-active app", output: str = "active\n", exit_code: int = 0,
            answer: str = "The service is active.") -> Added:
    """Append a whole, completed run (user.message, optional shell call, deltas, assistant.message,
    run.completed) and its runs row, audit row and usage_daily update, in one committed transaction
    that is never checkpointed."""
    b = _Batch()
    conn = _writer(db_path)
    try:
        s = _resume(conn, session_id, b)
        s.start_run(prompt, at=s.clock + 60_000)
        if command:
            s.shell(command, output, exit_code)
        s.say(answer)
        s.end_run()
        return _flush(conn, s, b)
    finally:
        conn.close()


class PendingWrite:
    """A writer connection inside ``BEGIN IMMEDIATE`` that has inserted a ``running`` run, ``n``
    events and the session's new ``last_seq``, and not committed. ``added`` says what it holds."""

    def __init__(self, db_path: Path, session_id: str, n: int = 6):
        if n < 2:
            raise ValueError("a run starts with two events (run.started, user.message)")
        self.conn = _writer(db_path)
        b = _Batch()
        try:
            s = _resume(self.conn, session_id, b)
            s.start_run("Deploy the new build to staging.", at=s.clock + 60_000)
            s.running_row()
            item_id = s.new_message_id()
            while s.tally.events < n:
                s.delta(item_id, f"part {s.seq + 1} ")
            self.added = _flush(self.conn, s, b, commit=False)
        except BaseException:
            self.conn.close()
            raise
        self.done = False

    def commit(self) -> Added:
        self.conn.execute("COMMIT")
        self.done = True
        return self.added

    def rollback(self) -> None:
        self.conn.execute("ROLLBACK")
        self.done = True

    def close(self) -> None:
        if not self.done:
            self.rollback()
        self.conn.close()

    def __enter__(self) -> PendingWrite:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def pending_write(db_path: Path, session_id: str, n: int = 6) -> PendingWrite:
    return PendingWrite(db_path, session_id, n)
