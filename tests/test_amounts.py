"""importer/amounts.py: one rule for an amount of money wherever it is shown (the CLI's tables, the
session list, the dashboard, the reports page, the conversation view and its exports)."""

from __future__ import annotations

from datasette_agentbase import browser, conversation, dashboard, reports
from importer import amounts as A


def test_money_rounds_and_says_what_rounds_to_zero():
    assert [A.money(v) for v in (0, None, 0.004, 0.005, 0.007, 0.036, 1234.5)] == [
        "$0.00", "$0.00", "<$0.01", "$0.01", "$0.01", "$0.04", "$1,234.50"]
    assert [A.money(v, 4) for v in (0, 0.00004, 0.00007, 0.0360, 1234.5)] == [
        "$0.0000", "<$0.0001", "$0.0001", "$0.0360", "$1,234.5000"]
    assert [A.money(v, 4, cents_from=1) for v in (0.99994, 1, 1234.567)] == ["$0.9999", "$1.00", "$1,234.57"]
    assert [A.money(v, 0) for v in (0, 500, 1500)] == ["$0", "$500", "$1,500"]
    assert not any("e-" in A.money(v, d) for v in (1e-9, 1.2e-5, 3e-7) for d in (2, 4))


def test_cost_labels_of_pages_and_terminal():
    assert [A.cost_label(0.5, 2, 1), A.cost_label(0.0, 0, 3), A.cost_label(0.0, 0, 0)] == ["$0.50", "unpriced", "–"]
    assert [A.marked_cost(0.0, 2), A.marked_cost(0.004, 1), A.marked_cost(2.5, 0)] == ["unpriced", "<$0.01*", "$2.50"]
    assert [A.compact(n) for n in (999, 1049, 99_949, 123_456, 150 * 10**9)] == ["999", "1.0k", "99.9k", "123k", "150G"]


def test_every_page_writes_an_amount_by_the_one_rule():
    tiny, big = 0.00003, 1234.5
    # the session list and the dashboard: cents from $1, four decimals under
    assert browser.cost_label({"cost_usd": tiny, "priced_calls": 1, "unpriced_calls": 0}) == "<$0.0001"
    assert dashboard.cost_label({"cost": tiny, "calls": 1, "unpriced_calls": 0}) == "<$0.0001"
    assert dashboard.money(big) == browser.cost_label({"cost_usd": big, "priced_calls": 1, "unpriced_calls": 0})
    # a model call in the conversation view (and its exports) and the dashboard's tooltips: four decimals
    assert conversation.money(tiny, 100) == dashboard.fmt_cost(tiny, exact=True) == "<$0.0001"
    assert conversation.money(big, 100) == "$1,234.5000" and conversation.money(None, 100) == "unpriced"
    # the reports page: cents on every row, as `agentbase report` writes them
    assert reports.cost_label({"cost": 0.004, "priced_calls": 1, "unpriced_calls": 0}) == "<$0.01"
    assert reports.cost_label({"cost": big, "priced_calls": 1, "unpriced_calls": 2}) == A.marked_cost(big, 0)
