"""The chat page that `exactly serve` serves at `/`.

Without a browser: the page is served whole and open (the API key guards
/v1/ only; the page sends the key with its own requests), and nothing else
answers at `/`.

In a real browser (headless Chromium from Debian, driven by Selenium): type a
message and see the reply's tokens appear one after another, with its
figures; press stop mid-stream and see the server's KV blocks return to 0 in
/metrics; reload and chat again. A screenshot of the conversation is kept in
$EXACTLY_BUILD_DIR/test-artifacts/chat_page.png. The browser part runs when
EXACTLY_BROWSER_TESTS=1 (`EXACTLY_BROWSER_TESTS=1 scripts/test` installs
chromium and chromium-driver first); otherwise it is skipped, saying so.
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest
import requests

from test_server import ServerProcess

API_KEY = "page-key-7"
REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_DIR = Path(os.environ.get("EXACTLY_BUILD_DIR", REPO_ROOT / "build"))
BROWSER_WANTED = os.environ.get("EXACTLY_BROWSER_TESTS") == "1"


@pytest.fixture(scope="module")
def server(exactly_bin, model_path):
    s = ServerProcess(exactly_bin, model_path, "--api-key", API_KEY)
    yield s
    assert s.stop() == 0


def test_the_page_is_served_open_and_whole(server):
    r = requests.get(server.url + "/", timeout=10)  # no key: the page itself is no secret
    assert r.status_code == 200
    assert r.headers["Content-Type"] == "text/html; charset=utf-8"
    assert r.text.startswith("<!doctype html>") and r.text.rstrip().endswith("</html>")
    assert "/v1/chat/completions" in r.text and "Authorization" in r.text
    assert "default-src 'none'" in r.headers["Content-Security-Policy"]
    assert requests.get(server.url + "/v1/models", timeout=10).status_code == 401
    assert requests.post(server.url + "/", data="{}", timeout=10).status_code == 405


@pytest.fixture(scope="module")
def browser():
    if not BROWSER_WANTED:
        pytest.skip("the browser test runs with EXACTLY_BROWSER_TESTS=1 (scripts/test then installs Chromium)")
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("EXACTLY_BROWSER_TESTS=1 but chromium or chromedriver is missing (apt-get install chromium "
                    "chromium-driver)")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1100,800"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


def wait_until(condition, timeout: float, what: str, interval: float = 0.02):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    pytest.fail(f"timed out waiting for {what}")


def replies(driver):
    return driver.find_elements("css selector", ".msg.assistant")


def send(driver, text: str) -> None:
    box = driver.find_element("id", "input")
    box.send_keys(text)
    box.send_keys("\n")


def set_field(driver, field_id: str, value: str) -> None:
    """Sets a settings field as a person would: type, then leave the field."""
    element = driver.find_element("id", field_id)
    element.clear()
    element.send_keys(value)
    driver.find_element("id", "input").click()


def test_chat_in_a_browser_streams_stops_and_survives_a_reload(browser, server):
    browser.get(server.url + "/")
    set_field(browser, "api-key", API_KEY)
    set_field(browser, "max-tokens", "200")
    wait_until(lambda: browser.find_element("id", "model").text.endswith(".gguf"), 10, "the model's name")

    # A reply streams in: its text is seen growing before its figures arrive.
    send(browser, "Write a short poem about the sea.")
    reply = wait_until(lambda: replies(browser)[0] if replies(browser) else None, 10, "the reply")
    lengths = set()
    while not reply.find_elements("css selector", ".figures"):
        lengths.add(len(reply.find_element("css selector", ".text").text))
        time.sleep(0.02)
        assert len(lengths) < 10_000
    figures = reply.find_element("css selector", ".figures").text
    assert len([n for n in lengths if n > 0]) >= 3, f"the text was seen at lengths {sorted(lengths)} only"
    assert reply.find_element("css selector", ".text").text.strip()
    assert "first token" in figures and "tokens/s" in figures, figures

    # Stop mid-stream: the request is cancelled and its KV blocks return to the pool.
    set_field(browser, "max-tokens", "2000")
    send(browser, "Count from 1 to 1000, separated by commas.")
    wait_until(lambda: len(replies(browser)) == 2 and replies(browser)[1].find_element("css selector", ".text").text,
               30, "the second reply's first tokens")
    assert server.metrics()["exactly_kv_blocks_used"] > 0
    browser.find_element("id", "stop").click()
    stopped = wait_until(lambda: replies(browser)[1].find_elements("css selector", ".figures"), 10, "the stop")
    assert "stopped" in stopped[0].text
    m = server.wait_for_free_blocks(timeout=10)
    assert m["exactly_kv_blocks_used"] == 0 and m["exactly_num_requests_running"] == 0
    assert m['exactly_request_success_total{finished_reason="abort"}'] >= 1

    # After a reload (settings kept, history not) the page chats again.
    browser.refresh()
    wait_until(lambda: browser.find_element("id", "model").text.endswith(".gguf"), 10, "the model's name again")
    assert browser.find_element("id", "api-key").get_attribute("value") == API_KEY
    set_field(browser, "max-tokens", "60")
    send(browser, "Name three fruits.")
    wait_until(lambda: replies(browser) and replies(browser)[0].find_elements("css selector", ".figures"), 60,
               "the reply after the reload")
    assert replies(browser)[0].find_element("css selector", ".text").text.strip()

    artifacts = BUILD_DIR / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "chat_page.png"))
