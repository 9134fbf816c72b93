"""The dashboard in a real browser: Debian's chromium, headless, driven by selenium through
Debian's chromium-driver, against a broker with traffic (``dashhelp``). Each page is loaded and
must show what the broker holds: the broker on the cluster page, the topic with the right max
offset and its queues on the topics page, the group's lag in a table and a chart, a message found
by key with its body, the dead letters and a resend done after logging in, a dead letter re-sent
from the DLQ page reaching a running consumer of its group and then shown consumed by that group
on its message's page, and the lag chart's drop after an offset reset. Each page's screenshot
goes to the test's tmp dir (``docs/img/`` holds a copy, refreshed by hand)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from dashhelp import (
    DEAD,
    DLQ_TOPIC,
    GROUP,
    LAG,
    PASSWORD,
    QUEUES,
    RATE_TOPIC,
    RESEND_DEAD,
    RESEND_GROUP,
    RESEND_TOPIC,
    TOPIC,
    USER,
    DashEnv,
    N,
    body,
    key,
    resend_body,
    send_more,
)
from rocketlite.client.instance import ClientConfig
from rocketlite.client.message import Message, MessageExt
from rocketlite.client.producer import Producer
from rocketlite.client.push_consumer import ConsumeStatus, PushConsumer

pytestmark = pytest.mark.integration
WAIT_S = 30


def _binary(*names: str) -> str:
    for name in names:
        if (path := shutil.which(name)) is not None:
            return path
    raise AssertionError(f"none of {names} installed: apt-get install chromium chromium-driver")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = webdriver.ChromeOptions()
    options.binary_location = _binary("chromium", "chromium-browser")
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1400,1000", "--no-first-run", "--disable-extensions"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options,
                              service=Service(executable_path=_binary("chromedriver")))
    driver.set_page_load_timeout(WAIT_S)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(scope="module")
def shots(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


READ_TABLE = """
const t = document.getElementById(arguments[0]);
if (t === null) return [[], []];
return [Array.from(t.querySelectorAll("thead th")).map(h => h.innerText),
        Array.from(t.querySelectorAll("tbody tr")).map(
            (r, i) => [r.dataset.key || "#" + i, Array.from(r.cells).map(c => c.innerText)])];
"""


def table(driver: WebDriver, table_id: str) -> tuple[list[str], dict[str, list[str]]]:
    """The headings and the rows (``data-key``, else ``#<index>`` -> cell texts) of
    ``table#<table_id>``, read in one script: the pages redraw their tables as they poll, so
    elements found earlier go stale."""
    heads, body = driver.execute_script(READ_TABLE, table_id)
    return heads, dict(body)


def rows(driver: WebDriver, table_id: str) -> dict[str, list[str]]:
    return table(driver, table_id)[1]


def text(driver: WebDriver, element_id: str) -> str:
    got = driver.execute_script(
        "const e = document.getElementById(arguments[0]); return e === null ? null : e.innerText;",
        element_id)
    return got if isinstance(got, str) else ""


def click(driver: WebDriver, by: str, what: str) -> None:
    """Click an element of a page that may redraw it meanwhile (found again until it works)."""
    def once(d: WebDriver) -> bool:
        try:
            d.find_element(by, what).click()
            return True
        except StaleElementReferenceException:
            return False
    wait_for(driver, f"a clickable {what}", once)


def wait_for(driver: WebDriver, what: str, check: Callable[[WebDriver], object]) -> None:
    WebDriverWait(driver, WAIT_S, 0.2, ignored_exceptions=(StaleElementReferenceException,)).until(
        check, f"{what} not shown in {WAIT_S} s")


def login(driver: WebDriver) -> None:
    """Fill in the page's login form (the dashboard's credentials) and use it."""
    driver.find_element(By.ID, "login-user").send_keys(USER)
    driver.find_element(By.ID, "login-password").send_keys(PASSWORD)
    driver.find_element(By.ID, "login-save").click()


def no_error(driver: WebDriver) -> None:
    shown = driver.find_element(By.ID, "error")
    assert not shown.is_displayed(), shown.text


def test_cluster_page(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    browser.get(dash.url + "/cluster")
    wait_for(browser, "the broker", lambda d: dash.addr in rows(d, "brokers"))
    wait_for(browser, "the tps chart", lambda d: d.find_elements(By.CSS_SELECTOR, "#tps-chart canvas"))
    assert dash.addr in browser.find_element(By.CSS_SELECTOR, "#tps-chart .u-legend").text
    cells = rows(browser, "brokers")[dash.addr]
    assert "ASYNC_MASTER" in cells and any(c.startswith("rocketlite ") for c in cells)
    assert any(c.endswith(" %") for c in cells)  # the disk use
    wait_for(browser, "two tps samples",
             lambda d: d.execute_script("return tpsChart.times.length;") >= 2)
    no_error(browser)
    browser.save_screenshot(str(shots / "cluster.png"))


RATES_SHOWN = "return typeof rateChart === 'undefined' ? [] : Object.keys(rateChart.values);"
RATES = "return [rateChart.times, rateChart.series(arguments[0])];"
RATE_MORE = 10


def test_topics_page(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    browser.get(dash.url + "/topics")
    wait_for(browser, "the topic", lambda d: TOPIC in rows(d, "topics"))
    heads, found = table(browser, "topics")
    cells = found[TOPIC]
    assert cells[heads.index("max offset (sum of queues)")] == str(N)
    assert cells[heads.index("queues")] == str(QUEUES)
    click(browser, By.LINK_TEXT, TOPIC)
    wait_for(browser, "the queues", lambda d: len(rows(d, "queues")) == QUEUES)
    heads, queues = table(browser, "queues")
    assert sum(int(c[heads.index("max offset")]) for c in queues.values()) == N
    heads, configs = table(browser, "configs")  # as the broker holds it (GET_TOPIC_CONFIG)
    (cfg,) = configs.values()
    assert (cfg[heads.index("read queues")], cfg[heads.index("perm")]) == (str(QUEUES), "6")
    # the rate chart: messages per second from the growth of the max offsets between polls
    wait_for(browser, "the rate chart", lambda d: RATE_TOPIC in d.execute_script(RATES_SHOWN))
    asyncio.run(asyncio.wait_for(send_more(dash.ns, RATE_MORE), 30))
    wait_for(browser, "a rate", lambda d: any(d.execute_script(RATES, RATE_TOPIC)[1]))
    times, rates = browser.execute_script(RATES, RATE_TOPIC)
    # rate x the time between polls, summed, is what was sent (the one sent before is not counted)
    stored = sum((r or 0) * (t - t0) for t0, t, r in zip(times, times[1:], rates[1:], strict=False))
    assert abs(stored - RATE_MORE) < 0.5, (times, rates)
    no_error(browser)
    browser.save_screenshot(str(shots / "topics.png"))


def test_groups_page_charts_the_lag(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    browser.get(dash.url + f"/groups?group={GROUP}")
    wait_for(browser, "the group", lambda d: GROUP in rows(d, "groups"))
    heads, groups = table(browser, "groups")
    assert int(groups[GROUP][heads.index("lag")].replace(",", "")) == LAG
    wait_for(browser, "three polls", lambda d: int(text(d, "polls").split()[-1] or 0) >= 3)
    chart = browser.find_element(By.CSS_SELECTOR, "#lag-chart canvas")  # drawn once, kept
    assert chart.size["width"] > 300 and chart.size["height"] > 100
    assert GROUP in browser.find_element(By.CSS_SELECTOR, "#lag-chart .u-legend").text
    heads, queues = table(browser, f"queues-{GROUP}")
    lags = [int(c[heads.index("lag")]) for c in queues.values() if c[0] == DLQ_TOPIC]
    assert sum(lags) == LAG
    assert text(browser, "offline") == "offline: no member connected"
    no_error(browser)
    browser.save_screenshot(str(shots / "groups.png"))


def field(driver: WebDriver, name: str) -> WebElement:
    return driver.find_element(By.ID, "q-" + name)


def test_messages_page_finds_a_message_by_key(dash: DashEnv, browser: WebDriver,
                                              shots: Path) -> None:
    browser.get(dash.url + "/messages")
    wait_for(browser, "the search form", lambda d: d.find_elements(By.ID, "q-topic"))
    field(browser, "topic").send_keys(TOPIC)
    field(browser, "key").send_keys(key(11))
    browser.find_element(By.ID, "q-go").click()
    wait_for(browser, "the body", lambda d: d.find_elements(By.ID, "body"))
    assert browser.find_element(By.ID, "body").text == body(11)
    assert browser.find_element(By.ID, "found").text == "1 found"
    props = browser.find_element(By.ID, "properties").text
    assert f"KEYS {key(11)}" in props and "TAGS tagA" in props
    assert dash.msg_ids[key(11)] in browser.find_element(By.ID, "facts").text
    wait_for(browser, "the consumption state", lambda d: text(d, "consumed"))
    assert text(browser, "consumed") == "no group has an offset on this queue"
    no_error(browser)
    browser.save_screenshot(str(shots / "messages.png"))


def test_dlq_page_resends_after_login(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    browser.get(dash.url + "/dlq")
    wait_for(browser, "the DLQ", lambda d: GROUP in rows(d, "dlq"))
    click(browser, By.LINK_TEXT, GROUP)
    wait_for(browser, "the dead letters", lambda d: len(rows(d, "dead-letters")) == DEAD)
    assert DLQ_TOPIC in browser.find_element(By.ID, "dead-letters").text
    result = browser.find_element(By.ID, "resend-result")
    browser.find_element(By.ID, "resend-one").click()  # no login yet: refused
    wait_for(browser, "the refusal", lambda d: result.text.startswith("refused: log in"))
    login(browser)
    browser.find_element(By.ID, "resend-one").click()
    wait_for(browser, "the resend", lambda d: result.text.startswith("re-sent "))
    assert result.text == "re-sent 1 of 1 read"
    no_error(browser)
    browser.save_screenshot(str(shots / "dlq.png"))


def test_dlq_resend_is_consumed(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    """A dead letter re-sent from the DLQ page goes back to its topic: a running consumer of its
    group receives it, and the message's page shows that group has consumed it."""
    got: list[MessageExt] = []
    with live_consumer(dash.ns, RESEND_GROUP, RESEND_TOPIC, got):
        browser.get(dash.url + f"/dlq?group={RESEND_GROUP}")
        wait_for(browser, "the dead letters",
                 lambda d: len(rows(d, "dead-letters")) == RESEND_DEAD)
        heads, dead = table(browser, "dead-letters")
        assert sorted(c[heads.index("body")] for c in dead.values()) == [
            resend_body(i) for i in range(RESEND_DEAD)]
        oldest = dead["#0"]  # "Resend next" re-sends the oldest (first listed) not re-sent yet
        text_of_oldest = oldest[heads.index("body")]
        assert oldest[heads.index("original topic")] == RESEND_TOPIC
        result = browser.find_element(By.ID, "resend-result")
        login(browser)
        browser.find_element(By.ID, "resend-one").click()
        wait_for(browser, "the resend", lambda d: result.text.startswith("re-sent "))
        assert result.text == "re-sent 1 of 1 read"
        wait_for(browser, "the consumer's receipt", lambda d: got)
        (m,) = got  # only the re-sent one: the group had consumed the rest of its topic
        assert (m.topic, m.body.decode()) == (RESEND_TOPIC, text_of_oldest)
        assert m.msg_id != oldest[heads.index("msgId")]  # a new message, the dead letter's copy

        browser.get(dash.url + "/messages")
        wait_for(browser, "the search form", lambda d: d.find_elements(By.ID, "q-id"))
        field(browser, "topic").send_keys(RESEND_TOPIC)
        field(browser, "id").send_keys(m.msg_id)
        browser.find_element(By.ID, "q-go").click()
        wait_for(browser, "the body", lambda d: d.find_elements(By.ID, "body"))
        assert browser.find_element(By.ID, "body").text == text_of_oldest

        # the page shows the group's committed offset when it loads: once the state is shown
        # and is not "consumed" yet, load it again (the consumer commits every 0.5 s)
        def consumed(d: WebDriver) -> bool:
            cells = rows(d, "consumed").get(RESEND_GROUP)
            if cells is not None and cells[-1] == "consumed":
                return True
            if text(d, "consumed"):
                d.refresh()
            return False

        wait_for(browser, f"{RESEND_GROUP} consumed it", consumed)
        heads, groups = table(browser, "consumed")
        cells = groups[RESEND_GROUP]
        assert cells[heads.index("online")] == "1"  # the live consumer
        assert int(cells[heads.index("group's offset")]) > m.queue_offset
        no_error(browser)
        browser.execute_script("document.getElementById('consumed').scrollIntoView();")
        browser.save_screenshot(str(shots / "messages-consumed.png"))


CHART_SERIES = """
const plot = lagChart.plot, i = plot.series.findIndex(s => s.label === arguments[0]);
return i < 0 ? [] : Array.from(plot.data[i]);
"""


def test_groups_page_reset_changes_the_lag_chart(dash: DashEnv, browser: WebDriver,
                                                 shots: Path) -> None:
    browser.get(dash.url + f"/groups?group={GROUP}")
    browser.execute_script("sessionStorage.clear();")
    wait_for(browser, "the reset buttons", lambda d: d.find_elements(By.ID, f"reset-end-{DLQ_TOPIC}"))
    wait_for(browser, "two polls", lambda d: len(d.execute_script(CHART_SERIES, GROUP)) >= 2)
    before = browser.execute_script(CHART_SERIES, GROUP)
    assert before[-1] == LAG + 1  # the one dead letter the DLQ test re-sent
    result = browser.find_element(By.ID, "reset-result")
    browser.find_element(By.ID, f"reset-end-{DLQ_TOPIC}").click()
    wait_for(browser, "the refusal", lambda d: result.text.startswith("refused: log in"))
    login(browser)
    browser.find_element(By.ID, f"reset-end-{DLQ_TOPIC}").click()
    wait_for(browser, "the reset", lambda d: result.text.startswith(f"reset {DLQ_TOPIC}: "))
    wait_for(browser, "the lag's drop in the chart",
             lambda d: d.execute_script(CHART_SERIES, GROUP)[-1] == 0)
    series = browser.execute_script(CHART_SERIES, GROUP)
    assert LAG + 1 in series  # the chart keeps the lag before the reset
    heads, groups = table(browser, "groups")
    assert groups[GROUP][heads.index("lag")] == "0"
    no_error(browser)
    browser.save_screenshot(str(shots / "groups.png"))  # with the drop


@contextlib.contextmanager
def background_loop() -> Iterator[Callable[[Any], Any]]:
    """An event loop in a thread, for clients that live while the browser looks; yields ``run``,
    which runs a coroutine there and returns its result (30 s at most)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    def run(coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, loop).result(30)

    try:
        yield run
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        loop.close()


@contextlib.contextmanager
def live_producer(ns: str, group: str) -> Iterator[str]:
    """A Producer of ``group`` connected (one message sent) while the browser looks; its client
    id."""
    with background_loop() as run:
        p = Producer(group, namesrv_addr=ns)
        try:
            run(p.start())
            run(p.send(Message(RATE_TOPIC, b"live")))
            assert p.instance is not None
            yield p.instance.client_id
        finally:
            run(p.shutdown())


@contextlib.contextmanager
def live_consumer(ns: str, group: str, topic: str, got: list[MessageExt]) -> Iterator[None]:
    """A PushConsumer of ``group`` on ``topic`` running while the browser looks, appending what
    it consumes to ``got``; it commits its offsets every 0.5 s, so the dashboard sees them."""
    with background_loop() as run:
        c = PushConsumer(group, config=ClientConfig(namesrv_addr=ns, rebalance_interval=0.5,
                                                    heartbeat_interval=1.0,
                                                    persist_offset_interval=0.5))
        c.subscribe(topic, "*")

        def take(msgs: list[MessageExt]) -> ConsumeStatus:
            got.extend(msgs)
            return ConsumeStatus.CONSUME_SUCCESS

        c.register_listener(take)
        try:
            run(c.start())
            yield
        finally:
            run(c.shutdown())


def test_producers_page(dash: DashEnv, browser: WebDriver, shots: Path) -> None:
    with live_producer(dash.ns, "DashLiveP") as client_id:
        browser.get(dash.url + "/producers")
        wait_for(browser, "the form", lambda d: d.find_elements(By.ID, "p-group"))
        browser.find_element(By.ID, "p-group").send_keys("DashLiveP")
        browser.find_element(By.ID, "p-topic").send_keys(RATE_TOPIC)
        browser.find_element(By.ID, "p-go").click()
        wait_for(browser, "the connection", lambda d: client_id in rows(d, "producers"))
        heads, found = table(browser, "producers")
        assert found[client_id][heads.index("language")] == "PYTHON"
        assert found[client_id][heads.index("version")] == "V5_3_3"  # by name, as mqadmin
        no_error(browser)
        browser.save_screenshot(str(shots / "producers.png"))
    print(f"screenshots in {shots}")
