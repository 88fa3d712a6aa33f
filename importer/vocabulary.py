"""The archive's words, the same for every kind (docs/vocabulary.md).

A message's ``role`` is one of :data:`ROLES`; what the kind itself called it is
kept in ``native_role`` (always set, also when it is the same word; None only when the
kind wrote none). Each kind
module maps its own words with the helpers here, and the store's migration
(store/migrations.py ``_migration_vocabulary``) maps rows archived before.
"""

from __future__ import annotations

USER = "user"  # what a person typed
ASSISTANT = "assistant"  # what a model produced: text, thinking, tool calls; carries the call's usage
TOOL_RESULT = "toolResult"  # a tool's output, paired with its call by tool_call_id
SYSTEM = "system"  # instructions and injected context (is_context = 1)
ROLES = (USER, ASSISTANT, TOOL_RESULT, SYSTEM)
# An entry of a record type its kind does not know: kept (never dropped), its ``custom_type`` (or, where
# the kind has no type to keep, its ``entry_type``) this word. Counted by import and `agentbase doctor`.
UNKNOWN = "unknown"

# OpenClaw and pi message roles (FORMAT.md section 6) -> the vocabulary. A role no
# table names is context the agent injected: system.
OPENCLAW_ROLES = {
    "user": USER,
    "assistant": ASSISTANT,
    "toolResult": TOOL_RESULT,
    "bashExecution": USER,  # pi's `!command`: a shell command a person typed, with its output
    "custom": SYSTEM,  # a hook's (extension's) message, injected into the context
    "hookMessage": SYSTEM,
    "branchSummary": SYSTEM,
    "compactionSummary": SYSTEM,
    "system": SYSTEM,
}


def openclaw_role(native: str | None) -> str:
    return OPENCLAW_ROLES.get(native, SYSTEM) if native is not None else SYSTEM
