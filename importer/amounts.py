"""How an amount reads, the same wherever it is shown: ``agentbase report`` and ``stats``, the
explorer's pages, their JSON and CSV labels, the exported conversations.

- :func:`money`: US dollars with thousands separators and a fixed number of decimals (cents, or
  more for the small amounts of a model call), so that every row of a column reads alike; an
  amount too small for its last decimal reads ``<$0.01`` (never ``$0``, never an exponent).
- :func:`cost_label`: a page's cost cell: the priced calls' cost, ``unpriced`` where every call
  lacks a price (not $0), a dash where there is no call.
- :func:`marked_cost`: a terminal table's cost cell: ``unpriced``, or the cost with a ``*`` when
  some calls have no price (the table's note says what the mark means).
- :func:`compact`: a count in a narrow terminal column (``1.2k``, ``35M``).
"""

from __future__ import annotations

DASH = "–"  # (an en dash: no call, so no cost)


def money(value: float | None, decimals: int = 2, cents_from: float | None = None) -> str:
    """``value`` dollars with ``decimals`` decimals (cents from ``cents_from`` dollars up, when given):
    ``$1,234.50``, ``$0.0360``; a positive amount that would round to zero reads ``<$0.01``
    (``<$0.0001``, ...)."""
    value = value or 0.0
    if cents_from is not None and value >= cents_from:
        decimals = 2
    if 0 < value < 0.5 * 10 ** -decimals:
        return f"<${10 ** -decimals:.{decimals}f}"
    return f"${value:,.{decimals}f}"


def cost_label(cost: float | None, priced: int, unpriced: int, decimals: int = 2,
               cents_from: float | None = None) -> str:
    """A page's cost of ``priced`` calls (and ``unpriced`` calls without a price): its amount as
    :func:`money` writes it; ``unpriced`` where no call has a price; a dash without any call."""
    if priced:
        return money(cost, decimals, cents_from)
    return "unpriced" if unpriced else DASH


def marked_cost(cost: float, unpriced: int) -> str:
    """A terminal table's cost in cents: ``unpriced`` when there is no cost and some calls have no
    price, a ``*`` after it when some calls have none (never shown as $0)."""
    if unpriced and cost == 0:
        return "unpriced"
    return money(cost) + ("*" if unpriced else "")


def compact(n: int) -> str:
    """A count in three or four characters: ``999``, ``1.2k``, ``35M``, ``120G``."""
    for unit, size in (("G", 10**9), ("M", 10**6), ("k", 10**3)):
        if abs(n) >= size:
            value = n / size
            return f"{value:.1f}{unit}" if value < 100 else f"{value:.0f}{unit}"
    return str(n)
