"""The chat page at `/` in headless Chromium: load it, send a message, see
the streamed answer, stop a generation, reload and find the conversation.
A screenshot lands in build/test-artifacts/."""
import os
import pathlib
import time

import pytest
import requests

ARTIFACTS = pathlib.Path(__file__).resolve().parents[2] / "build" / "test-artifacts"


def test_page_is_served_offline(server):
    r = requests.get(server.url + "/", timeout=10)
    assert r.status_code == 200
    assert r.headers["Content-Type"].startswith("text/html")
    html = r.text
    assert "<title>ingot chat</title>" in html and "/v1/chat/completions" in html
    # Offline: nothing is fetched from another host.
    assert "http://" not in html.replace("http://' +", "") and "https://cdn" not in html


@pytest.fixture
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    opts = webdriver.ChromeOptions()
    opts.binary_location = "/usr/bin/chromium"
    for a in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu", "--window-size=1200,900"):
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=opts)
    d.set_page_load_timeout(30)
    yield d
    d.quit()


def wait_for(cond, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        v = cond()
        if v:
            return v
        time.sleep(0.1)
    raise AssertionError("timed out")


def test_chat_in_a_browser(server, browser):
    from selenium.webdriver.common.by import By
    browser.get(server.url + "/")
    wait_for(lambda: "model:" in browser.find_element(By.ID, "model").text)
    box = browser.find_element(By.ID, "input")
    box.send_keys("Hello there")
    browser.find_element(By.ID, "send").click()
    # The streamed answer appears and generation ends.
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 1)
    wait_for(lambda: browser.find_element(By.ID, "send").is_enabled())
    answer = browser.find_element(By.CSS_SELECTOR, ".msg.assistant").text
    assert answer.replace("assistant", "").strip() != ""
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg .error")
    # Stop a generation: Stop is pressed while the request is in flight (in
    # the same task as Send, so even a fast model cannot finish first); the
    # reply stays empty and the UI returns to idle without an error.
    box.send_keys("Tell me a long story")
    stop_was_enabled = browser.execute_script(
        "document.getElementById('send').click();"
        "const on = !document.getElementById('stop').disabled;"
        "document.getElementById('stop').click(); return on;")
    assert stop_was_enabled
    wait_for(lambda: browser.find_element(By.ID, "send").is_enabled())
    wait_for(lambda: len(browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")) == 2)
    stopped = browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")[1].text
    assert stopped.replace("assistant", "").strip() == ""
    assert not browser.find_elements(By.CSS_SELECTOR, ".msg .error")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(ARTIFACTS / "chat.png"))
    # Conversations survive a reload (kept in the browser).
    browser.refresh()
    wait_for(lambda: browser.find_elements(By.CSS_SELECTOR, ".conv"))
    assert "Hello there" in browser.find_element(By.CSS_SELECTOR, ".conv").text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".msg.user")) == 2
