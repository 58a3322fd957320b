"""A browser at the pod's address (RunPod's "Connect, HTTP 8080" button) gets a page for a person, seen by a real
headless Chromium through the real launcher and bridge with the phased stand-in vLLM: what the pod is, its phase as
the start goes on, its model and the Claude Code block, with no key, secret or detail of the key-protected status;
API clients get what they got before (a JSON 401 without the key, the relay with it)."""

from __future__ import annotations

import json
import re
import shutil
import subprocess

import pytest

from prebake_testing.net import request, wait_until
from prebake_testing.pods import KEY, Pod

SECRETS = {"HF_TOKEN": "hf_PlantedHubTokenAbcdefghijklmnop", "RUNPOD_API_KEY": "rpa_PLANTEDRUNPODKEY0123456789"}


@pytest.fixture(scope="module")
def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (Debian: apt-get install chromium; .ci/run installs it)")
    return found


def browse(chromium: str, tmp_path, url: str, *how: str) -> subprocess.CompletedProcess:
    """Headless Chromium on `url` (root needs --no-sandbox; a profile of its own per run)."""
    profile = tmp_path / f"profile-{len(list(tmp_path.glob('profile-*')))}"
    return subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                           f"--user-data-dir={profile}", *how, url], capture_output=True, text=True, timeout=90)


def dom(chromium: str, tmp_path, url: str) -> str:
    done = browse(chromium, tmp_path, url, "--dump-dom")
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout


def text_of(page: str, element_id: str) -> str:
    start = page.index(f'id="{element_id}"')
    return page[page.index(">", start) + 1:page.index("</", start)]


def assert_nothing_private(page: str, pod: Pod) -> None:
    for secret in (KEY, *SECRETS.values()):
        assert secret not in page, secret
    # what only the key-protected status shows: the launcher's reasons, vLLM's command and log, the GPUs
    full = pod.status()[1]
    private = [d["why"] for d in full["decisions"]] + [line for line in full["log"]["lines"] if len(line) > 20]
    private += [" ".join(full["vllm"]["argv"]), *(gpu["name"] for gpu in full["gpus"] or [])]
    assert private and not [text for text in private if text in page], [text for text in private if text in page]


def test_a_browser_gets_a_page_for_a_person_through_the_start(chromium, tmp_path):
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, **SECRETS})
    url = f"http://127.0.0.1:{pod.port}/"
    try:
        pod.wait_phase("starting", timeout=5)
        page = dom(chromium, tmp_path, url)
        assert text_of(page, "phase") == "starting" and text_of(page, "model") == "ornith", page
        assert text_of(page, "context") == "1,000,000" and 'http-equiv="refresh"' in page
        assert "held (up to 10 min, <code>VL_START_HOLD</code>)" in page, page
        block = text_of(page, "claude-code").replace("&quot;", '"').replace("&gt;", ">").replace("&amp;", "&")
        assert "export ANTHROPIC_MODEL=ornith" in block and 'ANTHROPIC_AUTH_TOKEN="$VLLM_API_KEY"' in block
        assert f"ANTHROPIC_BASE_URL=https://testpod-{pod.port}.proxy.runpod.net" in block, block
        assert "In fish, type <code>bash</code> first" in page
        assert_nothing_private(page, pod)
        for step in range(1, 5):
            pod.go(step)
        pod.wait_phase("serving")
        page = dom(chromium, tmp_path, url)
        assert text_of(page, "phase") == "serving" and 'http-equiv="refresh"' not in page, page
        assert_nothing_private(page, pod)
        shot = tmp_path / "pod-page.png"
        done = browse(chromium, tmp_path, url, f"--screenshot={shot}", "--window-size=1100,1300",
                      "--hide-scrollbars")
        assert done.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", done.stderr[-2000:]
        assert shot.stat().st_size > 20_000  # a rendered page, not a blank one
    finally:
        pod.stop()


def test_api_clients_get_what_they_got_before(tmp_path):
    """No text/html in Accept, or a key (right or wrong): the bridge's JSON 401, or the relay to vLLM; the page never
    answers another path or method."""
    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY})
    html = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
    try:
        pod.wait_phase("starting", timeout=5)
        for headers in ({}, {"accept": "application/json"}, {**html, "x-api-key": "not-this-pods"},
                        {**html, "authorization": "Bearer not-this-pods"}):
            status, head, body = request(pod.port, "GET", "/", None, headers)
            assert status == 401 and head["content-type"] == "application/json", (headers, status, head)
            assert json.loads(body)["error"]["type"] == "authentication_error"
        for method, path in (("GET", "/v1/models"), ("POST", "/"), ("GET", "/index.html")):
            status, head, _ = request(pod.port, method, path, None, html)
            assert status == 401 and head["content-type"] == "application/json", (method, path, status)
        for step in range(1, 5):
            pod.go(step)
        pod.wait_phase("serving")
        with_key = {"authorization": f"Bearer {KEY}"}
        before = request(pod.port, "GET", "/", None, with_key)
        after = request(pod.port, "GET", "/", None, {**html, **with_key})
        assert before[0] == after[0] != 200 and before[2] == after[2] and b"<html" not in after[2], (before, after)
    finally:
        pod.stop()


@pytest.mark.parametrize("phase", ["starting", "compiling", "serving", "swapping", "failed"])
def test_the_page_at_every_phase_escapes_what_it_shows(phase):
    """Every phase has its line (swapping and failed are outside the start's steps); a why from vLLM's log or a
    swap's model names are text, never markup."""
    from entrypoint.claudecode import paste_block
    from entrypoint.serving.welcome import render

    public = {"phase": phase, "why": "<script>alert(1)</script>", "phase_since": "2026-12-04T00:00:00Z",
              "image": {"variant": "a40", "revision": "abc", "vllm": "0.27.1"},
              "swap": {"models": {"ornith": "serving", "<b>qwen</b>": "sleeping"}} if phase == "swapping" else None}
    block = {"model": "ornith", "context": 524288, "base_url": '"$POD"', "paste": paste_block('"$POD"', "ornith", 524288)}
    page = render(public, block, 600.0)
    assert f'id="phase">{phase}<' in page and "None" not in page and "<script>alert" not in page and "<b>qwen" not in page
    assert ("http-equiv" in page) == (phase != "serving")
    assert "&lt;script&gt;" in page and "524,288" in page


def test_a_browser_at_the_status_address_gets_the_page_with_the_idle_stop_and_a_block_that_copies_whole(
        chromium, tmp_path):
    """The README names POD/prebake/status: a browser there (no key) got a JSON 401. Now it gets the page, as at `/`
    and `/prebake/status.txt`; the page says when the pod stops itself, its block wraps (no line behind a horizontal
    scroll, in a narrow window) and its button copies the whole block, as the status JSON carries it. An API client
    gets what it got before."""
    from prebake_testing.browser import Browser

    pod = Pod(tmp_path, {"VLLM_API_KEY": KEY, "VL_IDLE_STOP": "30", **SECRETS})
    base = f"http://127.0.0.1:{pod.port}"
    try:
        for step in range(1, 5):
            pod.go(step)
        pod.wait_phase("serving")
        block = pod.status()[1]["claude_code"]["paste"]
        with Browser(tmp_path / "profile-cdp", width=700) as browser:
            for path in ("/prebake/status", "/prebake/status.txt", "/"):
                browser.open(base + path, ready="document.getElementById('copy')")
                assert browser.evaluate("document.getElementById('phase').textContent") == "serving", path
                idle = browser.evaluate("document.getElementById('idle-stop').textContent")
                assert idle.startswith("Idle stop: ") and "30 min" in idle and "(times in UTC)" in idle, idle
                assert re.search(r"stop it at \d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", idle) or "awake" in idle, idle
                hidden = browser.evaluate("(e => e.scrollWidth - e.clientWidth)(document.getElementById('claude-code'))")
                assert hidden == 0, (path, hidden)
                browser.click("copy")
                wait_until(lambda: browser.evaluate("document.getElementById('copied').textContent"), 5, "the copy")
                assert browser.clipboard() == block, path
                assert browser.evaluate("document.getElementById('copied').textContent") == \
                    f"copied, {len(block.splitlines())} lines"
                assert_nothing_private(browser.evaluate("document.documentElement.outerHTML"), pod)
        html = {"accept": "text/html,application/xhtml+xml,*/*;q=0.8"}
        for path in ("/prebake/status", "/prebake/status.txt"):
            status, head, body = request(pod.port, "GET", path, None, {"accept": "application/json"})
            assert status == 401 and head["content-type"] == "application/json", (path, status)
            status, head, body = request(pod.port, "GET", path, None, {**html, "authorization": f"Bearer {KEY}"})
            assert status == 200 and b"<html" not in body, (path, head)  # with the key: the status, as before
            status, head, body = request(pod.port, "HEAD", path, None, html)
            assert status == 401, (path, status)  # the page answers GET only
    finally:
        pod.stop()
