"""The explorer in a real browser: headless Chromium (Debian's chromium and chromedriver, driven by
Selenium) against a real `agentbase serve` on a free loopback port.

The conversation view of a session whose text, thinking, tool arguments and tool results hold
<script> and <img onerror> payloads: no payload runs, thinking expands on click, tool results fold.
On a snapshot of every source kind (tests/conversation_fixtures.py): Markdown drawn (payloads in
links, images and raw HTML inert), diffs and file contents coloured, repeated errors folded,
expand and collapse all, find with next/previous, the page without JavaScript, the export links,
and the HTML export opened from disk (offline: it loads nothing).
Screenshots are saved to $AGENTBASE_ARTIFACT_DIR (default: <tmp>/agentbase-artifacts).
Without Chromium the test is skipped with a message; under CI=true that is a failure.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from conftest import serving
from conversation_fixtures import PAYLOAD_FLAGS as KIND_PAYLOAD_FLAGS
from conversation_fixtures import build_kinds_snapshot
from test_explorer import SID_C, build_snapshot

REPO = Path(__file__).resolve().parents[1]
CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--window-size=1280,1600"]
PAYLOAD_FLAGS = ["__xss_text", "__xss_img", "__xss_thinking", "__xss_args", "__xss_args2", "__xss_readargs",
                 "__xss_result", "__xss_err", "__xss_errmsg", "__xss_unknown"] + KIND_PAYLOAD_FLAGS


def _missing(message: str):
    if os.environ.get("CI") == "true":
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`agentbase serve` on the explorer tests' snapshot; yields its base URL."""
    snapshot = build_snapshot(tmp_path_factory.mktemp("browser"))
    with serving(snapshot) as server:
        yield server.base


@pytest.fixture(scope="module")
def served_kinds(tmp_path_factory):
    """`agentbase serve` on a snapshot of every source kind; yields (base URL, the sessions' ids)."""
    snapshot, ids = build_kinds_snapshot(tmp_path_factory.mktemp("browser-kinds"))
    with serving(snapshot) as server:
        yield server.base, ids


@pytest.fixture(scope="module")
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        _missing(f"Chromium not installed ({CHROMIUM}, {CHROMEDRIVER}): apt-get install chromium chromium-driver")
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        _missing("selenium is not installed: pip install -e '.[test]'")
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium look for drivers online
    profile = tempfile.mkdtemp(prefix="agentbase-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS + [f"--user-data-dir={profile}"]:
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def artifact_dir() -> Path:
    path = Path(os.environ.get("AGENTBASE_ARTIFACT_DIR") or Path(tempfile.gettempdir()) / "agentbase-artifacts")
    path.mkdir(parents=True, exist_ok=True)
    return path


def assert_nothing_ran(driver) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    time.sleep(0.3)  # give an onerror handler time to fire, were there one
    try:
        alert = driver.switch_to.alert
        text = alert.text
        alert.dismiss()
        pytest.fail(f"a dialog opened: {text!r}")
    except NoAlertPresentException:
        pass
    ran = driver.execute_script("return arguments[0].filter(k => window[k] !== undefined)", PAYLOAD_FLAGS)
    assert ran == [], f"payloads ran: {ran}"
    # nor did any payload become an element
    assert driver.execute_script(
        "return [...document.scripts].filter(s => s.textContent.includes('__xss')).length") == 0
    assert driver.execute_script("return document.querySelectorAll('img[src=\"x\"], [onerror]').length") == 0


def test_conversation_view_in_chromium(served, browser):
    from selenium.webdriver.common.by import By

    driver = browser
    snapshot_id = 3  # session C: the one with the payloads
    driver.get(f"{served}/-/agentbase/session/{snapshot_id}")
    assert SID_C in driver.page_source
    assert_nothing_ran(driver)
    # the payloads are on the page, as text
    body = driver.find_element(By.TAG_NAME, "body").text
    assert "<script>window.__xss_text=1</script> hello" in body
    assert "<script>window.__xss_errmsg=1</script> upstream overloaded" in body

    # thinking starts folded and expands on click
    thinking = driver.find_element(By.CSS_SELECTOR, "details.ab-thinking")
    inner = thinking.find_element(By.CSS_SELECTOR, ".ab-md")
    assert thinking.get_property("open") is False and not inner.is_displayed()
    thinking.find_element(By.TAG_NAME, "summary").click()
    assert thinking.get_property("open") is True and inner.is_displayed()
    assert "I should look at the <b>logs</b> first" in inner.text

    # tool results fold: the long one starts folded, the short error starts open; both toggle
    results = driver.find_elements(By.CSS_SELECTOR, "details.ab-result")
    assert len(results) == 2
    long_result, error_result = results
    output = long_result.find_element(By.CSS_SELECTOR, ".ab-output")
    assert long_result.get_property("open") is False and not output.is_displayed()
    long_result.find_element(By.TAG_NAME, "summary").click()
    assert long_result.get_property("open") is True and output.is_displayed()
    assert "line 39 of output" in output.text and "<script>window.__xss_result=1</script>" in output.text
    long_result.find_element(By.TAG_NAME, "summary").click()
    assert long_result.get_property("open") is False and not output.is_displayed()
    assert "ab-result-error" in error_result.get_attribute("class")
    assert error_result.get_property("open") is True
    error_result.find_element(By.TAG_NAME, "summary").click()
    assert error_result.get_property("open") is False
    error_result.find_element(By.TAG_NAME, "summary").click()

    # the PNG is drawn, the SVG is not
    images = driver.execute_script("return [...document.querySelectorAll('.ab-image img')]"
                                   ".map(i => [i.src.slice(0, 22), i.complete && i.naturalWidth])")
    assert images == [["data:image/png;base64,", 1]]
    for fold in (thinking, long_result):  # open for the picture
        if not fold.get_property("open"):
            fold.find_element(By.TAG_NAME, "summary").click()
    assert thinking.get_property("open") and long_result.get_property("open")
    assert_nothing_ran(driver)
    shot = artifact_dir() / "conversation-view.png"
    driver.save_screenshot(str(shot))
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")


@pytest.mark.parametrize("path", [
    "/snapshot/search?q=window",
    "/snapshot/messages?session_id=3",
    "/snapshot/messages/14",
    "/snapshot/tool_calls?session_id=3",
    "/snapshot/failed_tools",
    "/snapshot/thinking",
    "/snapshot/exec_commands?agent=%3Cimg%20src%3Dx%20onerror%3Dwindow.__xss_img%3D1%3E",
    "/snapshot/tool_calls?_search=window",
    "/-/agentbase",
])
def test_other_pages_run_no_payload(served, browser, path):
    browser.get(served + path)
    assert "Traceback" not in browser.page_source
    assert_nothing_ran(browser)
    if path == "/-/agentbase":
        browser.save_screenshot(str(artifact_dir() / "dashboard.png"))


# -- the conversation view of every source kind: Markdown, diffs, expand all, find, exports -------------------

def full_page_screenshot(driver, path: Path, cap: int = 9000) -> Path:
    """The whole page (up to ``cap`` pixels high), then the window as it was."""
    width, height = driver.get_window_size()["width"], driver.get_window_size()["height"]
    total = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(width, min(max(total + 40, height), cap))
    try:
        driver.save_screenshot(str(path))
    finally:
        driver.set_window_size(width, height)
    assert path.stat().st_size > 10_000
    print(f"screenshot: {path}")
    return path


def style(driver, element, prop: str) -> str:
    return driver.execute_script("return getComputedStyle(arguments[0])[arguments[1]]", element, prop)


def test_markdown_and_diffs_in_chromium(served_kinds, browser):
    from selenium.webdriver.common.by import By

    base, ids = served_kinds
    driver = browser
    driver.get(f"{base}/-/agentbase/session/{ids['reading']}")
    assert_nothing_ran(driver)
    body = driver.find_element(By.TAG_NAME, "body").text
    # Markdown drawn: a heading, a numbered list, a table, coloured code; the payloads are text
    heading = driver.find_element(By.XPATH, "//div[contains(@class,'ab-md')]/h2[text()='Plan']")
    assert heading.is_displayed() and float(style(driver, heading, "fontSize")[:-2]) > 16
    items = driver.find_elements(By.CSS_SELECTOR, ".ab-md ol > li")
    assert [i.text for i in items][:2] == ["Read src/app.py", "Change the greeting, then test it"]
    assert style(driver, items[0], "listStyleType") == "decimal"
    assert driver.find_element(By.CSS_SELECTOR, ".ab-md table th").text == "step"
    keyword = driver.find_element(By.CSS_SELECTOR, ".ab-md pre code.language-python .k")
    assert keyword.text == "def" and style(driver, keyword, "color") == "rgb(207, 34, 46)"
    assert "<script>window.__xss_md=1</script>" in body and "[bad one](javascript:window.__xss_link=1)" in body
    assert '<img src=x onerror="window.__xss_raw=1">' in body
    links = driver.execute_script("return [...document.querySelectorAll('.ab-conversation a.ab-link')]"
                                  ".map(a => [a.protocol, a.rel, a.textContent])")
    assert links and all(proto in ("https:", "mailto:") and rel == "nofollow noopener noreferrer"
                         for proto, rel, _ in links), links
    assert driver.execute_script("return document.querySelectorAll('.ab-conversation img').length") == 0
    # writes as the file, edits and patches as diffs, coloured
    removed = driver.find_element(By.CSS_SELECTOR, ".ab-diff .ab-diff-del")
    added = driver.find_element(By.CSS_SELECTOR, ".ab-diff .ab-diff-add")
    assert removed.text == '-    return "hi " + name'
    assert style(driver, removed, "backgroundColor") == "rgb(255, 235, 233)"
    assert style(driver, added, "backgroundColor") == "rgb(230, 255, 236)"
    assert "*** Update File: src/app.py" in body and '"greeting": "hello"' in body
    # the same error three times: shown once, with its count, the others folded
    assert [b.text for b in driver.find_elements(By.CSS_SELECTOR, ".ab-badge-repeat")] == ["× 3", "× 3"]
    folds = driver.find_elements(By.CSS_SELECTOR, "details.ab-repeats")
    assert len(folds) == 2 and not any(f.get_property("open") for f in folds)
    assert '"type": "overloaded_error",' in body  # the provider's error object, indented
    assert_nothing_ran(driver)
    full_page_screenshot(driver, artifact_dir() / "conversation-markdown-diffs.png")
    patch = driver.find_element(By.XPATH, "//span[contains(@class,'ab-diff-file') and text()='*** Begin Patch']")
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", patch)
    driver.save_screenshot(str(artifact_dir() / "conversation-diff.png"))


def test_expand_collapse_and_find_in_chromium(served_kinds, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    base, ids = served_kinds
    driver = browser
    driver.get(f"{base}/-/agentbase/session/{ids['codex']}")
    bar = driver.find_element(By.CSS_SELECTOR, ".ab-toolbar")
    assert bar.is_displayed()  # the script shows it

    def opened(selector):
        return driver.execute_script("return [...document.querySelectorAll(arguments[0])].map(d => d.open)", selector)

    thinking = opened(".ab-conversation details.ab-thinking")
    assert len(thinking) == 3 and not any(thinking)
    driver.find_element(By.XPATH, "//button[text()='Expand all thinking']").click()
    assert all(opened(".ab-conversation details.ab-thinking"))
    assert not any(opened(".ab-conversation details.ab-context"))  # only the thinking
    assert driver.find_element(By.XPATH, "//div[contains(@class,'ab-md')]/p[text()='Use a patch for the rename']") \
        .is_displayed()
    driver.find_element(By.XPATH, "//button[text()='Collapse all thinking']").click()
    assert not any(opened(".ab-conversation details.ab-thinking"))
    driver.find_element(By.XPATH, "//button[text()='Expand everything']").click()
    assert all(opened(".ab-conversation details"))
    driver.find_element(By.XPATH, "//button[text()='Collapse everything']").click()
    assert not any(opened(".ab-conversation details"))

    # find: every match marked, the first current, next / previous, the fold around a match opened
    find = driver.find_element(By.CSS_SELECTOR, ".ab-find-input")
    count = driver.find_element(By.CSS_SELECTOR, ".ab-find-count")
    find.send_keys("build output")
    WebDriverWait(driver, 5).until(lambda d: count.text == "1 of 1")
    current = driver.find_element(By.CSS_SELECTOR, "mark.ab-find-current")
    assert current.text == "build output" and current.is_displayed()  # inside thinking: opened
    find.clear()
    find.send_keys("rename")
    WebDriverWait(driver, 5).until(lambda d: count.text.endswith(" of 4"))
    assert count.text == "1 of 4"
    find.send_keys(Keys.ENTER)
    assert count.text == "2 of 4"
    driver.find_element(By.CSS_SELECTOR, ".ab-find-next").click()
    assert count.text == "3 of 4"
    find.send_keys(Keys.SHIFT, Keys.ENTER)
    assert count.text == "2 of 4"
    driver.find_element(By.CSS_SELECTOR, ".ab-find-prev").click()
    driver.find_element(By.CSS_SELECTOR, ".ab-find-prev").click()
    assert count.text == "4 of 4"  # round the end
    assert len(driver.find_elements(By.CSS_SELECTOR, "mark.ab-find-hit")) == 4
    assert driver.find_element(By.CSS_SELECTOR, "mark.ab-find-current").is_displayed()
    find.send_keys(Keys.ESCAPE)
    assert driver.find_elements(By.CSS_SELECTOR, "mark.ab-find-hit") == [] and count.text == ""
    # text is only wrapped, never reparsed: a search for markup finds it as text
    driver.get(f"{base}/-/agentbase/session/{ids['reading']}")
    find = driver.find_element(By.CSS_SELECTOR, ".ab-find-input")
    count = driver.find_element(By.CSS_SELECTOR, ".ab-find-count")
    find.send_keys("<script>window.__xss")
    WebDriverWait(driver, 5).until(lambda d: " of " in count.text)
    assert_nothing_ran(driver)
    find.clear()
    find.send_keys("missing.txt")  # 3 commands, 3 outputs (not the folds' one-line previews), 4 of them folded
    WebDriverWait(driver, 5).until(lambda d: count.text.endswith(" of 6"))
    for _ in range(5):
        find.send_keys(Keys.ENTER)
    assert count.text == "6 of 6"
    current = driver.find_element(By.CSS_SELECTOR, "mark.ab-find-current")
    assert current.is_displayed() and any(opened("details.ab-repeats"))
    driver.save_screenshot(str(artifact_dir() / "conversation-find.png"))
    print(f"screenshot: {artifact_dir() / 'conversation-find.png'}")
    # a link to a message folded among the repeats opens its fold
    hidden = driver.execute_script("return document.querySelector('details.ab-repeats section').id")
    driver.get(f"{base}/-/agentbase/session/{ids['reading']}#{hidden}")
    assert driver.find_element(By.ID, hidden).is_displayed()


def test_readable_without_javascript(served_kinds, browser):
    from selenium.webdriver.common.by import By

    base, ids = served_kinds
    driver = browser
    driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        driver.get(f"{base}/-/agentbase/session/{ids['reading']}")
        assert not driver.find_element(By.CSS_SELECTOR, ".ab-toolbar").is_displayed()
        assert driver.find_element(By.XPATH, "//div[contains(@class,'ab-md')]/h2[text()='Plan']").is_displayed()
        thinking = driver.find_element(By.CSS_SELECTOR, "details.ab-thinking")
        thinking.find_element(By.TAG_NAME, "summary").click()  # folds work without a script
        assert thinking.get_property("open")
        assert driver.find_element(By.CSS_SELECTOR, "a.ab-export-html").is_displayed()
        driver.save_screenshot(str(artifact_dir() / "conversation-no-javascript.png"))
    finally:
        driver.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})


@pytest.mark.parametrize("kind", ["claude", "claude_sub", "codex", "agent_server", "agent_server_codex", "langchain",
                                  "codex_child", "fork"])
def test_every_kind_in_chromium(served_kinds, browser, kind):
    from selenium.webdriver.common.by import By

    base, ids = served_kinds
    browser.get(f"{base}/-/agentbase/session/{ids[kind]}")
    assert "Traceback" not in browser.page_source
    assert_nothing_ran(browser)
    turns = browser.find_elements(By.CSS_SELECTOR, ".ab-turn, .ab-turn-usage")
    assert turns and all(t.size["height"] > 10 for t in turns)
    full_page_screenshot(browser, artifact_dir() / f"conversation-{kind.replace('_', '-')}.png", cap=4000)


def test_no_page_is_wider_than_a_phone(served_kinds, browser):
    """At 390 px: the session list as cards, the dashboard, and every kind's conversation fit the
    screen (tables and code scroll inside their own box, long paths break): nothing scrolls sideways."""
    base, ids = served_kinds
    pages = {"sessions": "/", "dashboard": "/-/agentbase"}
    pages.update({f"reports-{by}": f"/-/agentbase/reports?by={by}" for by in REPORTS})
    pages.update({f"conversation-{kind.replace('_', '-')}": f"/-/agentbase/session/{sid}" for kind, sid in ids.items()})
    wide = {}
    try:
        browser.set_window_size(390, 900)
        for name, path in pages.items():
            browser.get(base + path)
            assert "Traceback" not in browser.page_source
            width, screen = browser.execute_script(
                "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
            if width > screen:
                wide[name] = (width, screen)
            height = browser.execute_script("return Math.min(document.documentElement.scrollHeight, 3000)")
            browser.set_window_size(390, max(900, height))
            browser.save_screenshot(str(artifact_dir() / f"phone-{name}.png"))
            browser.set_window_size(390, 900)
        cards = browser.execute_script("return null")  # (the list's cards: checked on its own below)
        browser.get(base + "/")
        cards = browser.execute_script(
            "const r = document.querySelector('.ab-session-list tbody tr'); return r && getComputedStyle(r).display")
    finally:
        browser.set_window_size(1280, 1600)
    assert wide == {}, wide
    assert cards == "block"  # a card per session, not a table row


# -- the navigation bar and the reports ---------------------------------------------------------------------

REPORTS = ("day", "week", "month", "model", "session")
PLACES = ["Sessions", "Search", "Dashboard", "Reports", "SQL/Tables"]


def nav_pages(ids: dict) -> dict[str, tuple[str, str | None]]:
    """name -> (path, the place the bar marks)."""
    return {
        "sessions": ("/", "Sessions"),
        "search": ("/?q=greeting", "Search"),
        "conversation": (f"/-/agentbase/session/{ids['reading']}", "Sessions"),
        "dashboard": ("/-/agentbase", "Dashboard"),
        "reports": ("/-/agentbase/reports", "Reports"),
        "reports-session": ("/-/agentbase/reports?by=session", "Reports"),
        "database": ("/snapshot", "SQL/Tables"),
        "table": ("/snapshot/messages", "SQL/Tables"),
        "row": ("/snapshot/sessions/1", "SQL/Tables"),
        "canned-query": ("/snapshot/daily_cost", "SQL/Tables"),
        "sql": ("/snapshot?sql=select+count(*)+from+messages", "SQL/Tables"),
        "not-found": ("/-/agentbase/session/999999", None),
    }


def test_the_navigation_bar_on_every_page(served_kinds, browser):
    """Every page, the plugin's and Datasette's own (tables, rows, queries, an error), opens with the
    same bar, its own place marked, at 1400 px and at 390 px (where it fits the screen); its links
    lead where they say."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, ids = served_kinds
    pages = nav_pages(ids)
    marked, seen = {}, {}
    try:
        for width in (1400, 390):
            browser.set_window_size(width, 900)
            for name, (path, place) in pages.items():
                browser.get(base + path)
                assert "Traceback" not in browser.page_source
                bar = browser.find_element(By.CSS_SELECTOR, "header ul.ab-navbar")
                links = bar.find_elements(By.TAG_NAME, "a")
                assert bar.is_displayed() and [a.text for a in links] == PLACES, name
                current = [a.text for a in links if a.get_attribute("aria-current") == "page"]
                marked[name] = current[0] if current else None
                seen[name] = {a.text: a.get_attribute("href") for a in links}
                # the bar fits: every place is inside the window, none hidden under another
                right = browser.execute_script(
                    "return Math.max(...[...arguments[0].querySelectorAll('a')].map(a => a.getBoundingClientRect().right))",
                    bar)
                assert right <= browser.execute_script("return document.documentElement.clientWidth"), (name, width)
                full_page_screenshot(browser, artifact_dir() / f"nav-{name}-{width}.png", cap=2400)
    finally:
        browser.set_window_size(1280, 1600)
    assert marked == {name: place for name, (_, place) in pages.items()}
    hrefs = seen["table"]
    assert [urlsplit(hrefs[p]).path for p in PLACES] == ["/", "/", "/-/agentbase", "/-/agentbase/reports", "/snapshot"]
    assert urlsplit(hrefs["Search"]).fragment == "search"
    # Search lands on the session browser's search box
    browser.get(hrefs["Search"])
    box = browser.find_element(By.CSS_SELECTOR, "#search input[name=q]")
    assert box.is_displayed()
    # a conversation's crumbs lead back to the session browser (not the raw table), then its agent's sessions
    browser.get(base + pages["conversation"][0])
    crumbs = browser.find_elements(By.CSS_SELECTOR, "header .crumbs a")
    assert urlsplit(crumbs[0].get_attribute("href")).path == "/" and crumbs[0].text == "sessions"
    agent = dict(parse_qsl(urlsplit(crumbs[1].get_attribute("href")).query))
    assert agent == {"agent": "main", "server": "alpha"}
    # newer and older: the sessions around this one in the list's order
    listed = json.loads(urllib.request.urlopen(base + "/-/agentbase/sessions.json?limit=500", timeout=30).read())
    order = [r["id"] for r in listed["rows"]]
    here = order.index(ids["reading"])
    newer = browser.find_elements(By.CSS_SELECTOR, ".ab-neighbours a.ab-newer")
    older = browser.find_elements(By.CSS_SELECTOR, ".ab-neighbours a.ab-older")
    if here > 0:
        assert newer[0].get_attribute("href").endswith(f"/-/agentbase/session/{order[here - 1]}")
    if here + 1 < len(order):
        assert older[0].get_attribute("href").endswith(f"/-/agentbase/session/{order[here + 1]}")
        older[0].click()
        WebDriverWait(browser, 10).until(
            lambda d: urlsplit(d.current_url).path == f"/-/agentbase/session/{order[here + 1]}")
    # the title is never a bare UUID, and the badge line says each thing once, each explained on hover
    for sid in order:
        browser.get(f"{base}/-/agentbase/session/{sid}")
        title = browser.find_element(By.CSS_SELECTOR, "h1.ab-title").text
        assert not re.fullmatch(r"[0-9a-f-]{36}", title.strip()), sid
        badges = browser.find_elements(By.CSS_SELECTOR, ".ab-session-meta .ab-badge")
        texts = [b.text for b in badges]
        assert len(texts) == len(set(texts)) and all(b.get_attribute("title") for b in badges), (sid, texts)
    # Datasette's menu lists every place
    browser.get(base + "/snapshot")
    browser.find_element(By.CSS_SELECTOR, "details.nav-menu > summary").click()
    menu = [a.text for a in browser.find_elements(By.CSS_SELECTOR, ".nav-menu-inner a")]
    assert menu[:5] == PLACES


def test_reports_in_chromium(served_kinds, browser):
    """The Reports page: each report a click away, the totals row on top, filters kept from one report to
    the next, a row's link to its sessions, CSV and JSON; screenshots at 1400 and 390 px."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    def query_becomes(expected: dict) -> None:
        """The page a click goes to (the click may return before the browser has gone there)."""
        WebDriverWait(driver, 10).until(lambda d: dict(parse_qsl(urlsplit(d.current_url).query)) == expected)

    base, ids = served_kinds
    driver = browser
    driver.set_window_size(1400, 1000)
    driver.get(base + "/-/agentbase/reports")
    assert_nothing_ran(driver)
    kinds = driver.find_elements(By.CSS_SELECTOR, "nav.ab-report-kinds a")
    assert [k.text for k in kinds] == ["daily", "weekly", "monthly", "per model", "per session"]
    assert driver.find_element(By.CSS_SELECTOR, "nav.ab-report-kinds a[aria-current=page]").text == "daily"
    # an agent chosen in the form is kept when another report is picked
    Select(driver.find_element(By.NAME, "agent")).select_by_value("main")
    driver.find_element(By.CSS_SELECTOR, "form.ab-report-filters input[type=submit]").click()
    query_becomes({"agent": "main"})
    driver.find_element(By.CSS_SELECTOR, 'nav.ab-report-kinds a[data-by="week"]').click()
    query_becomes({"by": "week", "agent": "main"})
    rows = driver.find_elements(By.CSS_SELECTOR, "table.ab-report tbody tr")
    assert rows[0].get_attribute("class") == "ab-total" and rows[0].text.startswith("Total")
    data = json.loads(urllib.request.urlopen(base + "/-/agentbase/reports.json?by=week&agent=main", timeout=30).read())
    assert len(rows) == len(data["rows"]) + 1
    assert rows[0].find_elements(By.TAG_NAME, "td")[4].text == data["total"]["cost"]
    # a week's link: that week's sessions in the session browser
    week = data["rows"][0]
    rows[1].find_element(By.CSS_SELECTOR, "a.ab-row-sessions").click()
    query_becomes({"agent": "main", "from": week["from"], "to": week["to"]})
    assert driver.find_elements(By.CSS_SELECTOR, "table.ab-session-list tbody tr")
    # CSV and JSON of what the page shows
    driver.get(base + "/-/agentbase/reports?by=model")
    csv_href = driver.find_element(By.CSS_SELECTOR, "a.ab-export-csv").get_attribute("href")
    with urllib.request.urlopen(csv_href, timeout=30) as r:
        assert r.headers["Content-Type"].startswith("text/csv")
        lines = r.read().decode().splitlines()
    assert lines[0].startswith("model,messages,model_calls") and lines[1].startswith("Total,")
    json_href = driver.find_element(By.CSS_SELECTOR, "a.ab-export-json").get_attribute("href")
    assert json.loads(urllib.request.urlopen(json_href, timeout=30).read())["by"] == "model"
    try:
        for by in REPORTS:
            for width in (1400, 390):
                driver.set_window_size(width, 900)
                driver.get(f"{base}/-/agentbase/reports?by={by}")
                assert_nothing_ran(driver)
                full_page_screenshot(driver, artifact_dir() / f"reports-{by}-{width}.png", cap=4000)
    finally:
        driver.set_window_size(1280, 1600)


def test_export_links_and_the_offline_html_in_chromium(served_kinds, browser, tmp_path):
    from selenium.webdriver.common.by import By

    base, ids = served_kinds
    driver = browser
    driver.get(f"{base}/-/agentbase/session/{ids['reading']}")
    hrefs = {cls: driver.find_element(By.CSS_SELECTOR, f"a.{cls}").get_attribute("href")
             for cls in ("ab-export-json", "ab-export-md", "ab-export-html")}
    # the JSON opens in the browser: every message with its blocks
    driver.get(hrefs["ab-export-json"])
    doc = json.loads(driver.find_element(By.TAG_NAME, "body").text)
    assert doc["session"]["session_uuid"].startswith("dddddddd") and len(doc["messages"]) == 24
    # the Markdown and the HTML are downloads
    with urllib.request.urlopen(hrefs["ab-export-md"], timeout=30) as r:
        assert r.headers["Content-Disposition"].startswith("attachment;")
        assert r.read().decode().startswith("# greeting fix")
    with urllib.request.urlopen(hrefs["ab-export-html"], timeout=30) as r:
        assert r.headers["Content-Disposition"].startswith("attachment;")
        saved = tmp_path / "session.html"
        saved.write_bytes(r.read())
    # opened from disk: drawn with its own stylesheet, its script works, it fetched nothing
    driver.get(saved.as_uri())
    assert_nothing_ran(driver)
    turn = driver.find_element(By.CSS_SELECTOR, "section.ab-turn-assistant")
    assert style(driver, turn, "borderLeftWidth") == "6px"
    assert driver.execute_script("return performance.getEntriesByType('resource').length") == 0
    assert driver.find_element(By.CSS_SELECTOR, ".ab-toolbar").is_displayed()
    driver.find_element(By.XPATH, "//button[text()='Expand all thinking']").click()
    assert all(driver.execute_script("return [...document.querySelectorAll('details.ab-thinking')].map(d => d.open)"))
    assert driver.find_elements(By.CSS_SELECTOR, "a[href^='http'], a[href^='/']") == []
    assert "safe link (https://example.com/docs?a=1&b=2)" in driver.find_element(By.TAG_NAME, "body").text
    full_page_screenshot(driver, artifact_dir() / "export-offline.png")


# -- canned-query forms and table pages ----------------------------------------------------------------------

def _shot(driver, name: str) -> Path:
    # the whole page, not only the window: the form, the rows and what follows them
    height = driver.execute_script("return Math.min(document.documentElement.scrollHeight, 4000)")
    driver.set_window_size(1280, max(900, height + 40))
    shot = artifact_dir() / name
    driver.save_screenshot(str(shot))
    driver.set_window_size(1280, 1600)
    assert shot.stat().st_size > 10_000
    print(f"screenshot: {shot}")
    return shot


def test_query_form_in_chromium(served, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    driver = browser
    driver.get(f"{served}/snapshot/exec_commands")
    # the drop-downs hold the snapshot's agents, servers and kinds, "any" first and chosen
    agent = Select(driver.find_element(By.ID, "ab-p-agent"))
    assert [o.text for o in agent.options] == ["any", "main", "ops"] and agent.first_selected_option.text == "any"
    assert [o.text for o in Select(driver.find_element(By.ID, "ab-p-server")).options] == ["any", "alpha", "beta"]
    assert [o.text for o in Select(driver.find_element(By.ID, "ab-p-source")).options] == ["any", "openclaw"]
    day = driver.find_element(By.ID, "ab-p-day")
    assert day.get_attribute("type") == "date" and day.get_property("type") == "date"  # the browser's date input
    effective = driver.find_element(By.CSS_SELECTOR, ".ab-effective")
    assert effective.is_displayed()
    assert effective.text == "The day was empty: showing 2026-04-06, the latest day with a shell command."
    assert not driver.find_elements(By.NAME, "after")  # where a page starts is not a field
    _shot(driver, "query-form.png")

    # choose an agent and a day, send the form: the URL says so, the rows follow
    agent.select_by_visible_text("main")
    driver.execute_script("arguments[0].value = '2026-04-05'", day)
    assert day.get_property("value") == "2026-04-05"  # a valid date: the input keeps it
    driver.find_element(By.CSS_SELECTOR, ".ab-query-form input[type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: "day=2026-04-05" in d.current_url)
    assert "agent=main" in driver.current_url and "after=" not in driver.current_url
    commands = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "table.ab-rows td.col-command")]
    assert commands == ["df -h /srv", "systemctl restart nginx"]
    assert Select(driver.find_element(By.ID, "ab-p-agent")).first_selected_option.text == "main"
    assert driver.find_element(By.ID, "ab-p-day").get_property("value") == "2026-04-05"
    assert not driver.find_elements(By.CSS_SELECTOR, ".ab-effective")  # a day was given
    _shot(driver, "query-form-chosen.png")


def test_malformed_day_in_chromium(served, browser):
    from selenium.webdriver.common.by import By

    driver = browser
    driver.get(f"{served}/snapshot/exec_commands?day=2026-13-45")
    message = driver.find_element(By.CSS_SELECTOR, ".ab-bad-param")
    assert message.is_displayed()
    assert message.text == "day '2026-13-45' is not a day: YYYY-MM-DD (for example 2026-04-05)."
    field = driver.find_element(By.ID, "ab-p-day")
    assert field.get_property("value") == "2026-13-45"  # as typed, to be corrected
    assert driver.find_element(By.CSS_SELECTOR, "label.ab-invalid").is_displayed()
    assert not driver.find_elements(By.CSS_SELECTOR, "table.ab-rows, .zero-results")
    assert "Traceback" not in driver.page_source and "SQL" not in message.text
    _shot(driver, "query-malformed-day.png")


def test_costs_in_chromium(served, browser):
    from selenium.webdriver.common.by import By

    driver = browser
    driver.get(f"{served}/snapshot/daily_cost")
    total = driver.find_element(By.CSS_SELECTOR, "table.ab-rows tr.ab-total")
    cells = {td.get_attribute("class").split()[0]: td.text for td in total.find_elements(By.TAG_NAME, "td")}
    assert cells["col-day"] == "Total" and cells["col-total_tokens"] == "7,215" and cells["col-cost_usd"] == "0.106"
    assert cells["col-cost"] == "$0.1060 + 1 unpriced"
    assert total.find_element(By.TAG_NAME, "td").value_of_css_property("font-weight") in ("700", "bold")
    tokens = driver.find_elements(By.CSS_SELECTOR, "table.ab-rows td.col-total_tokens")
    assert [t.text for t in tokens] == ["450", "1,200", "3,000", "2,565", "7,215"]
    assert tokens[1].value_of_css_property("text-align") == "right"
    assert "is_total" not in [th.text for th in driver.find_elements(By.CSS_SELECTOR, "table.ab-rows th")]
    _shot(driver, "daily-cost.png")
    driver.get(f"{served}/snapshot/monthly_cost")
    assert driver.find_element(By.ID, "ab-p-month").get_property("type") == "month"
    assert "showing 2026-04, the latest month with usage" in driver.find_element(By.CSS_SELECTOR, ".ab-effective").text
    _shot(driver, "monthly-cost.png")


def test_table_pages_in_chromium(served, browser):
    import sqlite3
    import urllib.request

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver = browser
    with urllib.request.urlopen(f"{served}/snapshot/messages.json?_shape=array&_size=1") as r:
        every = list(__import__("json").load(r)[0])
    driver.get(f"{served}/snapshot/messages?_sort=id")
    shown = [th.get_attribute("data-column") for th in driver.find_elements(By.CSS_SELECTOR, "table.rows-and-columns th")]
    hidden = driver.find_element(By.CSS_SELECTOR, ".ab-hidden-columns")
    assert hidden.is_displayed() and "internal columns not shown" in hidden.text
    assert "message_uuid" not in shown and "parent_message_uuid" not in shown and "text_preview" in shown
    assert shown == [c for c in every if c in shown]  # the snapshot's order
    assert len(shown) < len(every)
    # the day facet: newest first
    days = [li.text.split()[0] for li in driver.find_elements(By.CSS_SELECTOR, "#facet-day li")]
    assert days == ["2026-04-06", "2026-04-05"]
    # the schema: folded, under the rows
    schema = driver.find_element(By.CSS_SELECTOR, "details.ab-schema")
    assert schema.get_property("open") is False and not schema.find_element(By.TAG_NAME, "pre").is_displayed()
    _shot(driver, "messages-table.png")
    hidden.find_element(By.LINK_TEXT, "show all columns").click()
    WebDriverWait(driver, 10).until(lambda d: "_col=" in d.current_url)
    shown = [th.get_attribute("data-column") for th in driver.find_elements(By.CSS_SELECTOR, "table.rows-and-columns th")]
    assert shown == every
    assert "hide the internal ones" in driver.find_element(By.CSS_SELECTOR, ".ab-hidden-columns").text

    # nothing matches: a sentence, not a schema dump
    driver.get(f"{served}/snapshot/messages?agent_id=nobody")
    empty = driver.find_element(By.CSS_SELECTOR, ".ab-empty")
    assert empty.is_displayed() and empty.text.startswith('No rows match where agent_id = "nobody".')
    assert "CREATE TABLE" not in driver.page_source
    _shot(driver, "messages-empty.png")

    # tool_calls: searchable (command, tool, arguments, result)
    driver.get(f"{served}/snapshot/tool_calls")
    box = driver.find_element(By.ID, "_search")
    box.send_keys("nginx")
    box.submit()
    WebDriverWait(driver, 10).until(lambda d: "_search=nginx" in d.current_url)
    commands = [td.text for td in driver.find_elements(By.CSS_SELECTOR, "table.rows-and-columns td.col-command")]
    assert commands == ["systemctl restart nginx"]
    shown = [th.get_attribute("data-column") for th in driver.find_elements(By.CSS_SELECTOR, "table.rows-and-columns th")]
    assert "call_id" not in shown and "command" in shown
    _shot(driver, "tool-calls-search.png")
    assert_nothing_ran(driver)


# -- with a password: the login -------------------------------------------------------------------------------

LOGIN_PASSWORD = "correct horse battery staple 部署"
LOGIN_VAR = "AGENTBASE_BROWSER_TEST_PASSWORD"


@pytest.fixture(scope="module")
def served_locked(tmp_path_factory):
    """`agentbase serve SNAPSHOT --password-env VAR` (the password only in the environment); yields
    (base URL, the server's pid, its private temporary folder, its output files)."""
    work = tmp_path_factory.mktemp("browser-locked")
    snapshot = build_snapshot(work)
    tmp = work / "tmp"
    tmp.mkdir()
    out, err = work / "stdout.txt", work / "stderr.txt"
    env = {LOGIN_VAR: LOGIN_PASSWORD, "TMPDIR": str(tmp), "AGENTBASE_CONFIG": str(work / "none.yml")}
    with serving(snapshot, "--password-env", LOGIN_VAR, env=env, ready="/-/agentbase/login",
                 output=(out, err)) as server:
        yield server.base, server.pid, tmp, (out, err)


def test_login_in_chromium(served_locked, browser):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    base, pid, tmp, outputs = served_locked
    driver = browser
    driver.get(base + "/-/agentbase/login")
    driver.delete_all_cookies()  # nothing left from the other server on this host

    # an anonymous visitor: the conversation view sends them to the login page, the data stays away
    driver.get(f"{base}/-/agentbase/session/3")
    assert "/-/agentbase/login?next=" in driver.current_url
    assert SID_C not in driver.page_source and "__xss" not in driver.page_source
    for path in ("/snapshot/messages.json", "/snapshot/exec_commands.json", "/-/versions.json"):
        driver.get(base + path)
        assert "Login required" in driver.page_source and SID_C not in driver.page_source, path
    driver.get(base + "/snapshot/messages")
    assert "/-/agentbase/login" in driver.current_url and "__xss" not in driver.page_source

    # a wrong password is refused
    driver.get(f"{base}/-/agentbase/session/3")
    driver.find_element(By.ID, "ab-password").send_keys("correct horse battery")
    driver.find_element(By.CSS_SELECTOR, "form.ab-login input[type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: "Wrong password" in d.page_source)
    assert SID_C not in driver.page_source
    driver.save_screenshot(str(artifact_dir() / "login.png"))

    # the right one: back to the conversation view, which works as without a password
    driver.find_element(By.ID, "ab-password").send_keys(LOGIN_PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "form.ab-login input[type=submit]").click()
    WebDriverWait(driver, 10).until(lambda d: d.current_url.endswith("/-/agentbase/session/3"))
    assert SID_C in driver.page_source
    assert_nothing_ran(driver)
    assert "<script>window.__xss_text=1</script> hello" in driver.find_element(By.TAG_NAME, "body").text
    cookie = driver.get_cookie("ds_actor")
    assert cookie and cookie["httpOnly"] and LOGIN_PASSWORD not in cookie["value"]
    assert driver.execute_script("return document.cookie").find("ds_actor") == -1  # scripts cannot read it
    driver.save_screenshot(str(artifact_dir() / "conversation-view-logged-in.png"))
    driver.get(base + "/snapshot/exec_commands")
    assert "tail -n 5 /var/log/quokka.log" in driver.page_source
    assert LOGIN_PASSWORD not in driver.page_source and "correct horse" not in driver.current_url

    # the password is nowhere but the environment: not on the command line, in the output, or on disk
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        assert LOGIN_PASSWORD.encode() not in f.read()
    for path in [*tmp.rglob("*"), *outputs]:
        if path.is_file():
            assert LOGIN_PASSWORD.encode() not in path.read_bytes(), path
    assert any(p.name == "metadata.json" for p in tmp.rglob("*"))  # the serve's own files were checked

    # without the cookie the door is shut again
    driver.delete_all_cookies()
    driver.get(f"{base}/-/agentbase/session/3")
    assert "/-/agentbase/login" in driver.current_url and SID_C not in driver.page_source
