"""Datasette plugin for AgentBase snapshots.

Registered under the ``datasette`` entry point by setup.py. The content-block
renderer and the conversation view arrive with the explorer; for now the
plugin only makes the archive's JSON columns readable.
"""

from __future__ import annotations

import json

from datasette import hookimpl
from markupsafe import Markup, escape

JSON_COLUMNS = {"content_blocks", "tool_calls_json", "arguments", "raw_json", "header_json"}


@hookimpl
def render_cell(value, column):
    """Pretty-print the archive's JSON columns (escaped) instead of one long line."""
    if column not in JSON_COLUMNS or not isinstance(value, str) or not value[:1] in "[{":
        return None
    try:
        pretty = json.dumps(json.loads(value), indent=2, ensure_ascii=False)
    except ValueError:
        return None
    return Markup('<pre class="agentbase-json">{}</pre>').format(escape(pretty))
