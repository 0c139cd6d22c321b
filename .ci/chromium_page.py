#!/usr/bin/env python3
"""Loads a page in headless Chromium and waits for an element's text to change.

Chromium is driven over its DevTools protocol (the `websockets` package):
open URL, then read `document.getElementById(ID).textContent` every 100 ms
until it differs from WAITING or TIMEOUT seconds pass; print the last text.
`--dump-dom` cannot do this: it dumps the page at its load event, before
anything the page does later (a WebSocket's answer) is in it.

Usage: chromium_page.py URL ID WAITING TIMEOUT -- CHROMIUM_ARGS...
"""
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time

import websockets


@contextlib.asynccontextmanager
async def open_page(url, timeout, chromium_args):
    """Chromium headless on URL: yields `call(method, params)`, a DevTools
    call in the page's session, and the deadline; stops Chromium after."""
    profile = tempfile.mkdtemp(prefix="chromium-page-")
    proc = subprocess.Popen(
        ["chromium", "--headless", "--remote-debugging-port=0", f"--user-data-dir={profile}", *chromium_args, "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = os.path.join(profile, "DevToolsActivePort")
        deadline = time.monotonic() + timeout
        while not os.path.exists(port_file) or len(open(port_file).read().split("\n")) < 2:
            if time.monotonic() > deadline:
                raise TimeoutError("chromium did not start")
            await asyncio.sleep(0.1)
        port, path = open(port_file).read().split("\n")[:2]
        async with websockets.connect(f"ws://127.0.0.1:{port}{path}", max_size=None) as browser:
            ids = iter(range(1, 1_000_000))

            async def call(method, params=None, session=None):
                msg = {"id": next(ids), "method": method, "params": params or {}}
                if session:
                    msg["sessionId"] = session
                await browser.send(json.dumps(msg))
                while True:
                    # Bounded by the page's deadline: a browser that never
                    # answers is reported (as the script's output), not
                    # left to the caller's outer timeout, which kills the
                    # script before it says anything.
                    left = max(0.1, deadline - time.monotonic())
                    try:
                        raw = await asyncio.wait_for(browser.recv(), timeout=left)
                    except asyncio.TimeoutError:
                        raise TimeoutError(f"chromium did not answer {method}") from None
                    reply = json.loads(raw)
                    if reply.get("id") == msg["id"]:
                        return reply.get("result", {})

            target = (await call("Target.createTarget", {"url": url}))["targetId"]
            session = (await call("Target.attachToTarget", {"targetId": target, "flatten": True}))["sessionId"]

            async def page_call(method, params=None):
                return await call(method, params, session)

            yield page_call, deadline
    finally:
        proc.kill()
        proc.wait()
        # Chromium's helper processes may still write into the profile
        # for a moment after the browser is gone: removed quietly (the
        # page's text is this script's output), once more after a pause.
        for _ in range(2):
            subprocess.run(["rm", "-rf", profile], check=False, stderr=subprocess.DEVNULL)
            if not os.path.exists(profile):
                break
            time.sleep(0.5)


async def evaluate(call, expr):
    """The value of a JavaScript expression in the page (None if it has none)."""
    result = await call("Runtime.evaluate", {"expression": expr, "returnByValue": True})
    return result.get("result", {}).get("value")


async def read_text(url, element, waiting, timeout, chromium_args):
    try:
        async with open_page(url, timeout, chromium_args) as (call, deadline):
            text = waiting
            while time.monotonic() < deadline:
                expr = f"(document.getElementById({json.dumps(element)}) || {{}}).textContent"
                value = await evaluate(call, expr)
                if isinstance(value, str):
                    text = value
                    if text != waiting:
                        break
                await asyncio.sleep(0.1)
            return text
    except TimeoutError as e:
        return str(e)


def main():
    if "--" not in sys.argv or len(sys.argv) < 6:
        print(__doc__, file=sys.stderr)
        return 2
    split = sys.argv.index("--")
    url, element, waiting, timeout = sys.argv[1:5]
    print(asyncio.run(read_text(url, element, waiting, float(timeout), sys.argv[split + 1 :])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
