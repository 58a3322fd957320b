"""A real headless Chromium driven over its DevTools protocol (aiohttp's websocket client, which the bridge's venv
has): open a page, click an element as a mouse does (a trusted click, so the page's clipboard code runs as for a
person), read what the page shows and what the clipboard holds."""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import subprocess
from pathlib import Path

import aiohttp

CLIPBOARD = ["clipboardReadWrite", "clipboardSanitizedWrite"]


def chromium_binary() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class Browser:
    """`with Browser(tmp_path) as browser:` one Chromium, one page; every call waits for its answer."""

    def __init__(self, profile: Path, width: int = 1000, height: int = 1200) -> None:
        binary = chromium_binary()
        if binary is None:
            raise RuntimeError("chromium is not installed (Debian: apt-get install chromium)")
        self.process = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--remote-debugging-port=0",
             f"--user-data-dir={profile}", f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        for line in self.process.stderr:  # Chromium says where its protocol listens, then goes on
            found = re.search(r"DevTools listening on (ws://\S+)", line)
            if found:
                self.browser_url = found.group(1)
                break
        else:
            raise RuntimeError(f"chromium exited with {self.process.wait()} before it listened")
        self.process.stderr.close()
        self.loop = asyncio.new_event_loop()
        self.calls = 0
        self.loop.run_until_complete(self._connect())

    async def _connect(self) -> None:
        self.session = aiohttp.ClientSession()
        port = self.browser_url.split(":")[2].split("/")[0]
        async with self.session.get(f"http://127.0.0.1:{port}/json/list") as answer:
            targets = await answer.json()
        page = next(target for target in targets if target["type"] == "page")
        self.browser_ws = await self.session.ws_connect(self.browser_url, max_msg_size=0)
        self.page_ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)

    async def _call(self, socket, method: str, **params) -> dict:
        self.calls += 1
        await socket.send_json({"id": self.calls, "method": method, "params": params})
        while True:
            message = await socket.receive_json(timeout=30)
            if message.get("id") == self.calls:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def call(self, method: str, **params) -> dict:
        return self.loop.run_until_complete(self._call(self.page_ws, method, **params))

    def evaluate(self, expression: str, wait: bool = False):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=wait)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def open(self, url: str, ready: str = "true", timeout: float = 20) -> None:
        """Go to `url` and wait until it is loaded and the expression `ready` holds there."""
        origin = "/".join(url.split("/")[:3])
        self.loop.run_until_complete(self._call(self.browser_ws, "Browser.grantPermissions", permissions=CLIPBOARD,
                                                origin=origin))
        self.call("Page.navigate", url=url)
        deadline = self.loop.time() + timeout
        while not self.evaluate(f"document.readyState === 'complete' && location.href === {json.dumps(url)} && "
                                f"!!({ready})"):
            if self.loop.time() > deadline:
                raise AssertionError(f"{url} did not load with {ready} within {timeout} s")
            self.loop.run_until_complete(asyncio.sleep(0.05))

    def click(self, element_id: str) -> None:
        """A mouse's press and release on the element's centre: a trusted click, as a person's."""
        box = self.evaluate(f"JSON.stringify(document.getElementById({json.dumps(element_id)}).getBoundingClientRect())")
        rect = json.loads(box)
        x, y = rect["x"] + rect["width"] / 2, rect["y"] + rect["height"] / 2
        for kind in ("mousePressed", "mouseReleased"):
            self.call("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def clipboard(self) -> str:
        return self.evaluate("navigator.clipboard.readText()", wait=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        async def close() -> None:
            await self.page_ws.close()
            await self.browser_ws.close()
            await self.session.close()

        self.loop.run_until_complete(close())
        self.loop.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
