"""The session browser in a real browser: headless Chromium (Debian's chromium and chromedriver, driven
by Selenium) against a real `agentbase serve` of the made-up snapshot of tests/session_list_fixture.py.

The home page lists the sessions newest first; the filter form, the presets, the date range and the
search box put their filters in the URL and show the sessions they select (checked against the
snapshot's session_list, filtered in Python as in tests/test_sessions_page.py); "Next page" walks the
whole list by keyset with nothing shown twice; the search links to the message search; a title opens
the conversation view; no payload in a label, prompt or agent name runs; nothing comes from another
host; the page fits a 1280-pixel window. Full-page screenshots go to $AGENTBASE_ARTIFACT_DIR
(default: <tmp>/agentbase-artifacts). Without Chromium the tests are skipped with a message; under
CI=true that is a failure.
"""

from __future__ import annotations

import sqlite3
from urllib.parse import parse_qsl, urlsplit

import pytest

import session_list_fixture as SF
from importer import derived
from test_dashboard_browser import click_and_wait, full_page_screenshot
from conftest import serving
from test_explorer_browser import browser  # noqa: F401 (browser: a fixture)
from test_sessions_page import matches

PAYLOAD_FLAGS = ["__xss_label", "__xss_prompt", "__xss_agent"]


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return SF.build(tmp_path_factory.mktemp("sessions-browser"))


@pytest.fixture(scope="module")
def every(built) -> list[dict]:
    conn = sqlite3.connect(f"file:{built}?mode=ro", uri=True)
    try:
        cur = conn.execute(f"SELECT * FROM {derived.TABLE}")
        names = [d[0] for d in cur.description]
        rows = [dict(zip(names, r)) for r in cur.fetchall()]
    finally:
        conn.close()
    return sorted(rows, key=lambda r: (r["last_message_at"], r["id"]), reverse=True)


@pytest.fixture(scope="module")
def served(built):
    """`agentbase serve SNAPSHOT` on a free loopback port; yields its base URL once the home page answers."""
    with serving(built, ready="/") as server:
        yield server.base


def query(url: str) -> dict:
    return dict(parse_qsl(urlsplit(url).query))


def shown(driver) -> list[int]:
    return [int(i) for i in driver.execute_script(
        "return [...document.querySelectorAll('table.ab-session-list tbody tr')].map(t => t.dataset.id)")]


def want(every, params: dict) -> list[int]:
    return [r["id"] for r in every if matches(r, params)]


def check_page(driver, base: str) -> None:
    """What every page of the list must be in the browser."""
    from selenium.common.exceptions import NoAlertPresentException

    assert "Traceback" not in driver.page_source
    try:
        alert = driver.switch_to.alert
        text = alert.text
        alert.dismiss()
        pytest.fail(f"a dialog opened: {text!r}")
    except NoAlertPresentException:
        pass
    assert driver.execute_script("return arguments[0].filter(k => window[k] !== undefined)", PAYLOAD_FLAGS) == []
    assert driver.execute_script("return document.querySelectorAll('img, [onerror], [onmouseover]').length") == 0
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(r.startswith(base + "/") for r in resources), resources
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")


def test_the_session_list_in_chromium(served, browser, every):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    driver = browser
    driver.set_window_size(1280, 1600)
    driver.get(served + "/")
    check_page(driver, served)
    assert shown(driver) == [r["id"] for r in every[:50]]
    body = driver.find_element(By.TAG_NAME, "body").text
    assert SF.HOSTILE_LABEL in body and SF.TELEGRAM_TEXT in body and SF.FEISHU_TEXT in body  # markup as text
    assert driver.find_element(By.CSS_SELECTOR, ".ab-count").text == f"{len(every)} sessions"
    # one line per session: every row is one line of text high (the title cut, not wrapped)
    heights = driver.execute_script("""
        return [...document.querySelectorAll('table.ab-session-list tbody tr')].map(
            t => Math.round(t.getBoundingClientRect().height));""")
    assert max(heights) < 1.6 * min(heights), heights
    # the tables and SQL are one click away
    tables = driver.find_element(By.LINK_TEXT, "SQL/Tables")
    assert urlsplit(tables.get_attribute("href")).path == "/snapshot"
    full_page_screenshot(driver, "sessions-home.png")

    # the form: an agent and "has errors"; the URL holds them; the sessions are theirs
    Select(driver.find_element(By.NAME, "agent")).select_by_value("main")
    driver.find_element(By.NAME, "errors").click()
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, "form.ab-session-filters input[type=submit]"))
    assert query(driver.current_url) == {"agent": "main", "errors": "1"}
    assert shown(driver) == want(every, {"agent": "main", "errors": "1"}) and shown(driver)
    check_page(driver, served)
    # a preset keeps them
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, 'nav.ab-presets a[data-days="7"]'))
    assert query(driver.current_url) == {"agent": "main", "errors": "1", "days": "7"}
    assert driver.find_element(By.CSS_SELECTOR, "nav.ab-presets a[aria-current=page]").text == "7 days"
    assert shown(driver) == want(every, {"agent": "main", "errors": "1", "days": "7"}) and shown(driver)
    # the form keeps the preset, and the check boxes as they were
    assert driver.find_element(By.NAME, "errors").is_selected()
    Select(driver.find_element(By.NAME, "agent")).select_by_value("")
    driver.find_element(By.NAME, "thinking").click()
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, "form.ab-session-filters input[type=submit]"))
    assert query(driver.current_url) == {"days": "7", "errors": "1", "thinking": "1"}
    assert shown(driver) == want(every, {"days": "7", "errors": "1", "thinking": "1"}) and shown(driver)
    full_page_screenshot(driver, "sessions-7-days-errors-thinking.png")

    # a date range (the date inputs set as a person's picker would), the rest taken off with "reset"
    click_and_wait(driver, driver.find_element(By.LINK_TEXT, "reset"))
    assert query(driver.current_url) == {}
    driver.execute_script("""
        document.querySelector('input[name=from]').value = '2026-03-20';
        document.querySelector('input[name=to]').value = '2026-03-31';""")
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, "form.ab-session-filters input[type=submit]"))
    assert query(driver.current_url) == {"from": "2026-03-20", "to": "2026-03-31"}
    assert shown(driver) == want(every, {"from": "2026-03-20", "to": "2026-03-31"}) and shown(driver)
    assert "from 2026-03-20 to 2026-03-31" in driver.find_element(By.CSS_SELECTOR, ".ab-range").text
    click_and_wait(driver, driver.find_element(By.LINK_TEXT, "reset"))

    # the search box: Chinese, the session search; then the same words message by message
    box = driver.find_element(By.NAME, "q")
    box.send_keys("部署")
    before = driver.current_url
    box.send_keys(Keys.ENTER)
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, 20).until(lambda d: d.current_url != before and d.execute_script(
        "return document.readyState") == "complete")
    assert query(driver.current_url) == {"q": "部署"}
    found = shown(driver)
    # the session search: best first, over every message (its order: tests/test_session_search.py)
    assert set(want(every, {"q": "部署"})) <= set(found) and len(found) >= 3
    check_page(driver, served)
    full_page_screenshot(driver, "sessions-search.png")
    click_and_wait(driver, driver.find_element(By.LINK_TEXT, "Search messages for these words"))
    assert urlsplit(driver.current_url).path == "/snapshot/search" and query(driver.current_url) == {"q": "部署"}
    assert "部署" in driver.find_element(By.TAG_NAME, "body").text
    check_page(driver, served)

    # paging: five a page, "Next page" to the end; the whole list once, in order
    driver.get(served + "/?limit=5")
    seen, pages = [], 0
    while True:
        check_page(driver, served)
        seen += shown(driver)
        pages += 1
        if pages == 2:
            assert driver.find_element(By.LINK_TEXT, "← newest")
            full_page_screenshot(driver, "sessions-page-2.png")
        links = driver.find_elements(By.CSS_SELECTOR, "a[rel=next]")
        if not links:
            break
        assert "after" in query(links[0].get_attribute("href"))
        click_and_wait(driver, links[0])
        assert pages < 30
    assert seen == [r["id"] for r in every] and pages == -(-len(every) // 5)

    # a title opens the conversation view of its session
    driver.get(served + "/")
    first = driver.find_element(By.CSS_SELECTOR, "table.ab-session-list tbody tr a.ab-session-title")
    click_and_wait(driver, first)
    assert urlsplit(driver.current_url).path == f"/-/agentbase/session/{every[0]['id']}"
    assert "Traceback" not in driver.page_source
