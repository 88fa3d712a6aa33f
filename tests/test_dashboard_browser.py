"""The dashboard in a real browser: headless Chromium (Debian's chromium and chromedriver, driven
by Selenium) against a real `agentbase serve` of the made-up snapshot of tests/dashboard_fixture.py.

The charts are drawn (SVG from the server, no script of the dashboard's), one colour per agent as
the browser paints it, presets and the filter form keep the other filters, nothing is loaded from
another host, no payload in an agent's or model's name runs, the page fits a 1280-pixel window.
Full-page screenshots go to $AGENTBASE_ARTIFACT_DIR (default: <tmp>/agentbase-artifacts).
Without Chromium the tests are skipped with a message; under CI=true that is a failure.
"""

from __future__ import annotations

from urllib.parse import parse_qsl, urlsplit

import pytest

import dashboard_fixture as DF
from conftest import serving
from test_explorer_browser import artifact_dir, browser  # noqa: F401 (browser: a fixture)

PAYLOAD_FLAGS = ["__xss_agent", "__xss_model"]


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`agentbase serve SNAPSHOT` on a free loopback port; yields its base URL once the dashboard answers."""
    snapshot = DF.build(tmp_path_factory.mktemp("dashboard-browser"))
    with serving(snapshot, ready="/-/agentbase") as server:
        yield server.base


def full_page_screenshot(driver, name: str):
    """The whole page in one picture (the window made as tall as the page), then the window back."""
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(height + 140, 8000))
    path = artifact_dir() / name
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 1600)
    assert path.stat().st_size > 20_000
    print(f"screenshot: {path}")
    return path


def query(url: str) -> dict:
    return dict(parse_qsl(urlsplit(url).query))


def click_and_wait(driver, element) -> None:
    """Follow a link or submit a form, and wait for the next page."""
    from selenium.webdriver.support.ui import WebDriverWait

    before = driver.current_url
    marker = driver.find_element("tag name", "html")
    element.click()
    WebDriverWait(driver, 20).until(lambda d: d.current_url != before and d.execute_script(
        "return document.readyState") == "complete" and d.find_element("tag name", "html") != marker)


def check_page(driver, base: str) -> None:
    """What every dashboard page must be in the browser."""
    assert "Traceback" not in driver.page_source
    assert driver.execute_script("return arguments[0].filter(k => window[k] !== undefined)", PAYLOAD_FLAGS) == []
    assert driver.execute_script("return document.querySelectorAll('img[src=\"x\"], [onerror]').length") == 0
    # nothing from another host: every resource the page loaded is this server's
    resources = driver.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(r.startswith(base + "/") for r in resources), resources
    # it fits the window: no horizontal scrolling
    assert driver.execute_script("return document.documentElement.scrollWidth <= window.innerWidth + 1")
    # one colour per agent, as painted: every element of a series, in every chart, table bar and legend
    painted = driver.execute_script("""
        const out = {};
        const add = (name, color) => { (out[name] = out[name] || new Set()).add(color); };
        document.querySelectorAll('svg [data-series]').forEach(g => {
            g.querySelectorAll('rect').forEach(r => add(g.dataset.series, getComputedStyle(r).fill));
        });
        document.querySelectorAll('.ab-legend-item[data-series] > i').forEach(i =>
            add(i.parentElement.dataset.series, getComputedStyle(i).backgroundColor));
        return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v]]));""")
    assert painted and all(len(colors) == 1 for colors in painted.values()), painted
    agents = [name for name in painted if not name.endswith("other agents")]
    assert len({painted[name][0] for name in agents}) == len(agents)
    return painted


def test_dashboard_in_chromium(served, browser):  # noqa: F811
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    driver = browser
    driver.get(served + "/-/agentbase?days=all")
    painted = check_page(driver, served)
    assert {"main@alpha", "main@beta", "ops", "codex", "pi", "local", DF.HOSTILE_AGENT} <= set(painted)
    # the charts are drawn: two bar charts with bars, the heatmap's 168 cells, a bar per model
    sizes = driver.execute_script("""
        return [...document.querySelectorAll('svg.ab-chart')].map(s => {
            const b = s.getBoundingClientRect(); return [s.getAttribute('aria-label'), Math.round(b.width),
            Math.round(b.height), s.querySelectorAll('rect').length]; });""")
    assert [s[0] for s in sizes] == ["Messages per day per agent", "Cost per day per agent (USD, each model call once)",
                                     "Messages by weekday and hour (Asia/Shanghai time)"]
    assert all(w > 800 and h > 150 and n > 20 for _, w, h, n in sizes), sizes
    assert len(driver.find_elements(By.CSS_SELECTOR, "rect.ab-heat")) == 7 * 24
    assert len(driver.find_elements(By.CSS_SELECTOR, "table.ab-models tr[data-model] svg.ab-rowbar")) >= 5
    body = driver.find_element(By.TAG_NAME, "body").text
    assert DF.HOSTILE_MODEL in body and DF.HOSTILE_AGENT in body  # as text
    assert "unpriced" in body and "main@alpha" in body
    full_page_screenshot(driver, "dashboard-all.png")

    # a filter, then a preset: the preset keeps the filter
    driver.get(served + "/-/agentbase?server=beta&days=all")
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, 'nav.ab-presets a[data-days="30"]'))
    assert query(driver.current_url) == {"server": "beta", "days": "30"}
    current = driver.find_element(By.CSS_SELECTOR, "nav.ab-presets a[aria-current=page]")
    assert current.text == "30 days"
    painted_beta = check_page(driver, served)
    assert "main@alpha" not in painted_beta and "main@beta" in painted_beta
    assert all(painted_beta[name] == painted[name] for name in painted_beta if name in painted)  # same colours
    full_page_screenshot(driver, "dashboard-beta-30-days.png")

    # the form: another source, the range and server kept
    Select(driver.find_element(By.NAME, "server")).select_by_value("")
    Select(driver.find_element(By.NAME, "source")).select_by_value("codex")
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, "form.ab-filters input[type=submit]"))
    assert query(driver.current_url) == {"days": "30", "source": "codex"}
    assert set(check_page(driver, served)) == {"codex"}
    # take the filter off with its chip: back to every source, 30 days
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, ".ab-chip a"))
    assert query(driver.current_url) == {"days": "30"}
    check_page(driver, served)

    # the latest day: one bar per agent, hours in the heatmap
    click_and_wait(driver, driver.find_element(By.CSS_SELECTOR, 'nav.ab-presets a[data-days="1"]'))
    assert query(driver.current_url) == {"days": "1"}
    check_page(driver, served)
    assert driver.execute_script("return [...document.querySelectorAll('rect.ab-heat')]"
                                 ".filter(r => r.dataset.count !== '0').length") > 0
    full_page_screenshot(driver, "dashboard-latest-day.png")
