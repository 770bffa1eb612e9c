"""The chat page that `exactly serve` serves at `/`.

Without a browser: the page is served whole and open (the API key guards
/v1/ only; the page sends the key with its own requests), and nothing else
answers at `/`.

In a real browser (headless Chromium from Debian, driven by Selenium): type a
message and see the reply's tokens appear one after another, with its
figures; press stop mid-stream and see the server's KV blocks return to 0 in
/metrics; reload and hold a two-turn conversation (the second request
carries the first turn). A screenshot of the conversation is kept in
$EXACTLY_BUILD_DIR/test-artifacts/chat_page.png. Markup in a reply (as a model
may write it) is shown as text and never runs, and the page's
Content-Security-Policy stops an inline handler even where markup got in.
The browser part runs where chromium and chromedriver are installed
(`EXACTLY_BROWSER_TESTS=1 scripts/test` installs them first, and then their
absence is a failure); elsewhere it is skipped, saying so.
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
    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        if BROWSER_WANTED:
            pytest.fail("EXACTLY_BROWSER_TESTS=1 but chromium or chromedriver is missing (apt-get install chromium "
                        "chromium-driver)")
        pytest.skip("no chromium and chromedriver here: the browser test runs where they are installed, or with "
                    "EXACTLY_BROWSER_TESTS=1 scripts/test, which installs them")
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


def model_name(server) -> str:
    r = requests.get(server.url + "/v1/models", headers={"Authorization": "Bearer " + API_KEY}, timeout=10)
    return r.json()["data"][0]["id"]


def test_chat_in_a_browser_streams_stops_and_survives_a_reload(browser, server):
    browser.get(server.url + "/")
    browser.execute_script("localStorage.clear()")  # no key saved by an earlier visit
    browser.refresh()
    name = model_name(server)
    wait_until(lambda: "API key" in browser.find_element("id", "model").text, 10, "the page asking for the key")
    set_field(browser, "api-key", API_KEY)
    set_field(browser, "max-tokens", "200")
    wait_until(lambda: browser.find_element("id", "model").text == name, 10, "the model's name")

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

    # After a reload (settings kept, history not) the page chats again, and
    # the second turn sends the whole conversation.
    browser.refresh()
    wait_until(lambda: browser.find_element("id", "model").text == name, 10, "the model's name again")
    assert browser.find_element("id", "api-key").get_attribute("value") == API_KEY
    browser.execute_script(RECORD_REQUESTS)
    set_field(browser, "max-tokens", "60")
    for turn, text in enumerate(["Name three fruits.", "And three vegetables?"]):
        send(browser, text)
        wait_until(lambda: len(replies(browser)) == turn + 1 and
                   replies(browser)[turn].find_elements("css selector", ".figures"), 60, f"reply {turn + 1}")
    first_reply = replies(browser)[0].find_element("css selector", ".text").text
    assert first_reply.strip() and replies(browser)[1].find_element("css selector", ".text").text.strip()
    sent = browser.execute_script("return window.sentBodies")
    assert [m["role"] for m in sent[0]["messages"]] == ["user"]
    assert sent[1]["messages"] == [{"role": "user", "content": "Name three fruits."},
                                   {"role": "assistant", "content": first_reply},
                                   {"role": "user", "content": "And three vegetables?"}]
    assert sent[1]["max_tokens"] == 60 and sent[1]["stream"] is True

    artifacts = BUILD_DIR / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    assert browser.save_screenshot(str(artifacts / "chat_page.png"))


# Keeps the body of every chat request the page sends (and sends it on).
RECORD_REQUESTS = """
window.sentBodies = [];
const realFetch = window.fetch;
window.fetch = (url, options) => {
  if (url === "/v1/chat/completions") window.sentBodies.push(JSON.parse(options.body));
  return realFetch(url, options);
};
"""


# A reply as a model might write it: markup that would run or restyle the page
# if it were read as HTML. Served by a stand-in for fetch(), so the test does
# not depend on what the model chooses to say.
HOSTILE_PIECES = ['<img src="data:," onerror="window.injected = 1">', "<script>window.injected = 2</script>",
                  '</div><b id="bold">bold?</b>', " &amp; &lt;done&gt;"]
FAKE_REPLY = """
const pieces = arguments[0];
const realFetch = window.fetch;
window.fetch = (url, options) => {
  if (url !== "/v1/chat/completions") return realFetch(url, options);
  const encoder = new TextEncoder();
  const chunk = (delta, finish) => "data: " + JSON.stringify({choices: [{index: 0, delta, finish_reason: finish}]}) + "\\n\\n";
  const body = new ReadableStream({start(c) {
    for (const p of pieces) c.enqueue(encoder.encode(chunk({content: p}, null)));
    c.enqueue(encoder.encode(chunk({}, "stop") + "data: [DONE]\\n\\n"));
    c.close();
  }});
  return Promise.resolve(new Response(body, {status: 200, headers: {"Content-Type": "text/event-stream"}}));
};
"""


def test_markup_in_a_reply_is_shown_as_text_and_never_runs(browser, server):
    browser.get(server.url + "/")
    set_field(browser, "api-key", API_KEY)
    browser.execute_script(FAKE_REPLY, HOSTILE_PIECES)
    send(browser, "<i>user markup</i><img src=x onerror=\"window.injected = 3\">")
    reply = wait_until(lambda: replies(browser) and replies(browser)[-1].find_elements("css selector", ".figures"),
                       10, "the reply")
    assert replies(browser)[-1].find_element("css selector", ".text").text == "".join(HOSTILE_PIECES)
    user = browser.find_elements("css selector", ".msg.user")[-1]
    assert user.text == "<i>user markup</i><img src=x onerror=\"window.injected = 3\">"
    log = browser.find_element("id", "log")
    for tag in ("img", "script", "b", "i"):
        assert not log.find_elements("tag name", tag), f"a <{tag}> element got into the conversation"
    assert browser.execute_script("return window.injected === undefined")
    assert reply

    # Even markup that gets into the page by another way cannot run an inline
    # handler: the policy allows the page's own script (by its nonce) alone.
    browser.execute_script("""document.body.insertAdjacentHTML('beforeend',
        '<img src="data:," onerror="window.handlerRan = 1">');""")
    time.sleep(0.5)
    assert browser.execute_script("return window.handlerRan === undefined")
