"""Live pages in a real browser: headless Chromium on a real `agentbase serve --password-env` (logged
in, with its cookie) of the snapshot a real `agentbase watch` keeps up to date. An agent appends to
its transcript; the open conversation shows the new cards, and a tool result under its call, and the
open session list the new and changed rows, within 5 s of the export and without a reload (a
variable set at load survives, the reader's scroll position stays, and no card drawn before an update is
drawn again by it: marks the test sets on the cards' nodes stay), with a "live" badge; "paused"
while the tab is hidden and when the server is gone. Screenshots at 1400 and 390 px are saved to
$AGENTBASE_ARTIFACT_DIR (default: <tmp>/agentbase-artifacts), with the conversation's Markdown export after
the updates (live-conversation.md, its text checked).
"""

from __future__ import annotations

import time

import pytest

from conftest import serving
from datasette_agentbase.live_pages import REPLAY
from live_fixture import OTHER_SID, Archive, query, wait
from test_explorer_browser import artifact_dir, browser  # noqa: F401 (the browser fixture)
from transcripts import exec_call

PASSWORD = "live pages 直播 & more"
VAR = "AGENTBASE_LIVE_TEST_PASSWORD"
PAGE_S = 5.0  # what the issue asks: on the page within 5 s


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(the archive `agentbase watch` follows, the server of its snapshot, behind a login)."""
    archive = Archive(tmp_path_factory.mktemp("live"))
    try:
        with serving(archive.snapshot, "--password-env", VAR, env={VAR: PASSWORD, "AGENTBASE_CONFIG":
                     str(archive.root / "none.yml")}, ready="/-/agentbase/login") as server:
            yield archive, server
    finally:
        archive.stop()


def _log_in(driver, base: str, path: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(base + "/-/agentbase/login")
    driver.delete_all_cookies()  # nothing left from another server on this host
    driver.get(base + path)
    assert "/-/agentbase/login" in driver.current_url
    driver.find_element(By.ID, "ab-password").send_keys(PASSWORD)
    driver.find_element(By.CSS_SELECTOR, "form.ab-login input[type=submit]").click()
    WebDriverWait(driver, 15).until(lambda d: d.current_url.endswith(path))


def _live(driver) -> dict:
    return driver.execute_script("return window.agentbaseLive && JSON.parse(JSON.stringify(window.agentbaseLive))")


def _badge(driver) -> str:
    return driver.execute_script("const b = document.querySelector('.ab-live'); return b ? b.textContent : null")


def _shots(driver, name: str) -> None:
    """The page at 1400 px and at 390 px (a phone: no wider than the screen), then as it was."""
    size = driver.get_window_size()
    try:
        for width, height in ((1400, 1000), (390, 844)):
            driver.set_window_size(width, height)
            time.sleep(0.3)
            driver.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
            if width == 390:
                wide, screen = driver.execute_script(
                    "return [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
                assert wide <= screen, (name, wide, screen)
            path = artifact_dir() / f"live-{name}-{width}.png"
            driver.save_screenshot(str(path))
            assert path.stat().st_size > 5_000
            print(f"screenshot: {path}")
    finally:
        driver.set_window_size(size["width"], size["height"])


def _seen(driver, archive, before: str, predicate, what: str) -> tuple[float, float]:
    """Waits for the export of what was appended, then for ``predicate(driver)``: (seconds from the
    append to the export, seconds from the export to the page)."""
    appended = time.monotonic()
    archive.updated(before)
    exported = time.monotonic()
    shown = wait(lambda: predicate(driver), timeout=PAGE_S + 10, step=0.05)
    took = time.monotonic() - exported
    assert shown, f"{what}: not on the page {took:.1f} s after the export; the page's state: {_live(driver)}"
    now = driver.execute_script("return Math.round(performance.now())")
    assert took <= PAGE_S, (f"{what}: on the page {took:.1f} s after the export (more than {PAGE_S:g} s); "
                            f"its last requests (what, at, ms): {_asked(driver)}, now {now}")
    print(f"{what}: exported {exported - appended:.1f} s after the append, on the page {took:.1f} s later")
    return exported - appended, took


def _text(driver, selector: str) -> str:
    """The text of the element ``selector`` names now (read in one go: cards are replaced as they change)."""
    return driver.execute_script("const e = document.querySelector(arguments[0]); return e ? e.innerText : ''",
                                 selector)


def _asked(driver) -> list:
    """The page's last requests to the server: (what, when, how long), in ms."""
    return driver.execute_script(
        "return performance.getEntriesByType('resource').slice(-6).map(e => [e.name.split('/-/')[1], "
        "Math.round(e.startTime), Math.round(e.duration)])")


def _turn_ids(driver) -> list[str]:
    return driver.execute_script("return [...document.querySelectorAll('.ab-conversation > [id]')].map(e => e.id)")


def _mark_cards(driver) -> None:
    driver.execute_script(
        "const cards = [...document.querySelectorAll('.ab-conversation > [id]')];"
        "cards.forEach((e, i) => { e.__abKept = true; if (i < cards.length - arguments[0]) "
        "e.setAttribute('data-ab-test-kept', '1'); });"
        "window.__abMarked = cards.map(e => [e.id, true, e.hasAttribute('data-ab-test-kept')]);", REPLAY)


def _unmarked(driver) -> dict:
    """The cards marked by _mark_cards that lost their mark (drawn again): by attribute, by property."""
    return driver.execute_script(
        "const cards = [...document.querySelectorAll('.ab-conversation > [id]')];"
        "const had = window.__abMarked;"
        "const now = new Map(cards.map(e => [e.id, e]));"
        "return {attribute: had.filter(([id, p, a]) => a && !(now.get(id) && now.get(id).hasAttribute("
        "'data-ab-test-kept'))).map(h => h[0]),"
        " property: had.filter(([id, p]) => p && !(now.get(id) && now.get(id).__abKept)).map(h => h[0])};")


def _oracle_turns(archive, session_id: int) -> list[str]:
    """The cards a conversation of this fixture shows: every message on the active path but the
    tool results (each drawn under its call), in order."""
    return [f"m{r[0]}" for r in query(archive.snapshot, "SELECT id FROM messages WHERE session_id = ? AND "
                                      "is_active_path = 1 AND role != 'toolResult' ORDER BY seq, id", (session_id,))]


def test_a_conversation_follows_the_transcript(site, browser):
    archive, server = site
    driver = browser
    sid = archive.session_id()
    path = f"/-/agentbase/session/{sid}"
    _log_in(driver, server.base, path)
    assert wait(lambda: (_live(driver) or {}).get("state") == "live", timeout=10), _live(driver)
    assert _badge(driver) == "live"
    assert _turn_ids(driver) == _oracle_turns(archive, sid)
    driver.execute_script("window.__abLoadedOnce = 'the same page'; window.scrollTo(0, 400);"
                          "window.__abBlocked = []; document.addEventListener('securitypolicyviolation',"
                          " e => window.__abBlocked.push(e.violatedDirective + ' ' + e.blockedURI))")
    scrolled = driver.execute_script("return window.scrollY")
    assert scrolled == 400  # (the page is long enough to scroll: the reader is in its middle)
    before_html = driver.execute_script("return document.querySelector('.ab-conversation').children.length")
    # every card drawn now is marked (an attribute on all but the last ones, which an answer sends again and
    # which then stay as they are when equal; a property on every one): an update that drew them again would
    # leave cards without their marks
    _mark_cards(driver)

    # an agent writes a question and an answer
    c = archive.chain
    before = archive.append(c.user("zebrafinch live question 斑胸草雀"),
                            c.assistant([{"type": "text", "text": "kestrel live answer"}]))
    _seen(driver, archive, before, lambda d: "kestrel live answer" in _text(d, ".ab-conversation"), "a new answer")
    assert driver.execute_script("return window.__abLoadedOnce") == "the same page"  # no reload
    assert driver.execute_script("return window.scrollY") == scrolled  # the reader's place kept
    assert _turn_ids(driver) == _oracle_turns(archive, sid)  # every card once, in order
    assert driver.execute_script("return document.querySelector('.ab-conversation').children.length") \
        == before_html + 2
    assert _unmarked(driver) == {"attribute": [], "property": []}  # the first cards are the same nodes
    state = _live(driver)
    assert state["state"] == "live" and state["updates"] >= 1 and state["added"] == 2
    assert _badge(driver) == "live · 2 new"
    # the totals follow: the messages the snapshot holds for the session, counted there
    count = query(archive.snapshot, "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,))[0][0]
    assert f"of {count:,}" in _text(driver, "table.ab-totals")

    # a tool call, then (a cycle later) its result: the call's card is drawn again with the result under it;
    # a reader at the end of the page stays at the end (as tail -f)
    driver.execute_script("window.scrollTo(0, document.documentElement.scrollHeight)")
    before = archive.append(c.assistant([exec_call("toolu_live_1", "uptime # ospreycheck")]))
    _seen(driver, archive, before, lambda d: "ospreycheck" in _text(d, ".ab-conversation"),
          "a tool call")
    assert driver.execute_script("const e = document.documentElement;"
                                 "return window.innerHeight + window.scrollY >= e.scrollHeight - 2")
    card = _turn_ids(driver)[-1]
    assert "no result recorded" in _text(driver, "#" + card)
    # a second append: its card came, and not one card before it was drawn again (the two new ones neither)
    assert _unmarked(driver) == {"attribute": [], "property": []}
    assert _live(driver)["added"] == 3
    driver.execute_script("document.querySelectorAll('#' + arguments[0] + ' details').forEach(d => d.open = true)",
                          card)
    before = archive.append(c.result("toolu_live_1", "load average: 0.42 harrierresult"))
    _seen(driver, archive, before, lambda d: "harrierresult" in _text(d, "#" + card),
          "its result, under the call")
    assert _turn_ids(driver) == _oracle_turns(archive, sid) and _turn_ids(driver)[-1] == card
    assert "no result recorded" not in _text(driver, "#" + card)
    assert driver.execute_script("return window.__abLoadedOnce") == "the same page"
    assert driver.execute_script("return window.__abBlocked") == []  # the CSP let everything it did through
    _shots(driver, "conversation")
    # its Markdown export, asked by the page with its cookie, holds the same turns: the call with its result
    # under it, under one heading
    md = driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "fetch(arguments[0], {credentials: 'same-origin'}).then(r => r.text()).then(done, e => done('' + e));",
        f"{path}.md")
    (artifact_dir() / "live-conversation.md").write_text(md, encoding="utf-8")
    turn = md[md.index("uptime # ospreycheck"):]
    assert md.rindex("\n## assistant · ", 0, md.index("uptime # ospreycheck")) > md.index("kestrel live answer")
    assert "**result**" in turn and "harrierresult" in turn and "\n## " not in turn

    # a hidden tab pauses (nothing is asked of the server), a visible one follows again at once
    here = driver.current_window_handle
    driver.switch_to.new_window("tab")
    time.sleep(1.0)
    driver.close()
    driver.switch_to.window(here)
    assert wait(lambda: (_live(driver) or {}).get("state") == "live", timeout=5)
    assert "paused: the tab is hidden" in _live(driver)["log"]


def test_the_session_list_follows_the_archive(site, browser):
    archive, server = site
    driver = browser
    driver.get(server.base + "/")
    if "/-/agentbase/login" in driver.current_url:
        _log_in(driver, server.base, "/")
    assert wait(lambda: (_live(driver) or {}).get("state") == "live", timeout=10), _live(driver)
    driver.execute_script("window.__abLoadedOnce = 'the same list'")
    sid = archive.session_id()

    def row_text(d, session_id):
        return d.execute_script("const r = document.querySelector('tr[data-id=\"' + arguments[0] + '\"]');"
                                "return r ? r.textContent : null", session_id)

    # a new session: its row comes first, the count says two
    before = archive.add_session(text="a second session, heronsearch")
    _seen(driver, archive, before, lambda d: d.execute_script(
        "return document.querySelectorAll('.ab-session-list tbody tr').length") == 2, "a new session's row")
    other = archive.session_id(OTHER_SID)
    order = driver.execute_script("return [...document.querySelectorAll('.ab-session-list tbody tr')]"
                                  ".map(r => +r.dataset.id)")
    oracle = [r[0] for r in query(archive.snapshot, "SELECT id FROM sessions ORDER BY last_message_at DESC, id DESC")]
    assert order == oracle and other in order
    assert _text(driver, ".ab-count") == "2 sessions"
    assert driver.execute_script("return window.__abLoadedOnce") == "the same list"

    # the first one grows: its row changes (its message count, counted in the snapshot) and moves up
    c = archive.chain
    before = archive.append(c.user("one more question"), c.assistant([{"type": "text", "text": "one more answer"}]))
    count = lambda: query(archive.snapshot, "SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,))[0][0]
    _seen(driver, archive, before, lambda d: f"{count():,}" in (row_text(d, sid) or "") and d.execute_script(
        "return +document.querySelector('.ab-session-list tbody tr').dataset.id") == sid, "a changed row")
    assert driver.execute_script("return window.__abLoadedOnce") == "the same list"
    assert _badge(driver).startswith("live")
    _shots(driver, "sessions")

    # the server goes away: the page says "paused" and stays as it was
    server.stop()
    assert wait(lambda: (_live(driver) or {}).get("state") == "paused", timeout=10), _live(driver)
    assert _badge(driver) == "paused"
    assert driver.execute_script("return window.__abLoadedOnce") == "the same list"
    assert row_text(driver, other) is not None
    driver.save_screenshot(str(artifact_dir() / "live-sessions-paused.png"))
