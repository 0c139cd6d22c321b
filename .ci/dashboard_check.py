#!/usr/bin/env python3
"""The admin dashboard in headless Chromium: it loads, its values match the
admin's /stats/prometheus, its charts update as traffic goes, a hostile
cluster name shows as text (no element made of it), and a screenshot is
written.

Usage: dashboard_check.py ADMIN_ADDR GATEWAY_ADDR SCREENSHOT.png -- CHROMIUM_ARGS...
Prints one line per check (`ok ...` / `FAIL ...`); exits 1 on a failure.
"""
import asyncio
import base64
import json
import re
import sys
import urllib.request

from chromium_page import evaluate, open_page

HOSTILE = "<img src=x onerror=alert(1)>"


def get(url):
    with urllib.request.urlopen(url, timeout=5) as r:
        return r.read().decode()


def traffic(gw, n):
    for _ in range(n):
        try:
            get(f"http://{gw}/")
        except Exception:
            pass


async def run(admin, gw, shot, chromium_args):
    failures = 0

    def check(what, ok, detail=""):
        nonlocal failures
        print(f"{'ok' if ok else 'FAIL'} {what}{': ' + detail if detail and not ok else ''}")
        failures += 0 if ok else 1

    async with open_page(f"http://{admin}/", 45, chromium_args) as (call, deadline):
        async def polls():
            text = await evaluate(call, "document.getElementById('status').textContent") or ""
            m = re.match(r"poll (\d+)", text)
            return int(m.group(1)) if m else 0

        async def wait_polls(n):
            while asyncio.get_running_loop().time() < deadline and await polls() < n:
                await asyncio.sleep(0.2)
            return await polls()

        check("the page loads and polls", await wait_polls(1) >= 1)
        # Traffic between polls: a rate, a latency and a chart point.
        for _ in range(3):
            traffic(gw, 20)
            await wait_polls(await polls() + 1)
        rows = await evaluate(call, """JSON.stringify([...document.querySelectorAll('#clusters > tr')].map(tr =>
            [...tr.children].map(td => td.querySelector('summary') ? td.querySelector('summary').textContent : td.textContent)))""")
        rows = json.loads(rows or "[]")
        by_name = {r[0]: r for r in rows}
        backend = by_name.get("backend")
        check("the backend cluster is listed", backend is not None, json.dumps(rows))
        if backend:
            check("its hosts are healthy", backend[1] == "1 / 1", backend[1])
            # name, hosts, ejected, sessions, req/s, 5xx, p50, p99, charts
            rate = float(backend[4]) if backend[4] not in ("–", "") else 0.0
            check("it shows a request rate", rate > 0, backend[4])
            check("it shows a p99", backend[7] not in ("–", ""), backend[7])
        listeners = json.loads(await evaluate(call, """JSON.stringify([...document.querySelectorAll('#listeners > tr')].map(tr =>
            [...tr.children].map(td => td.textContent)))""") or "[]")
        # name, address, state, chains (connections open), draining
        check("the listener shows its filter chains and its drain",
              bool(listeners) and len(listeners[0]) == 5 and ": " in listeners[0][3] and listeners[0][4] == "0",
              json.dumps(listeners))
        points = await evaluate(call, "[...document.querySelectorAll('#clusters polyline')].map(p => p.getAttribute('points').split(' ').length).reduce((a, b) => Math.max(a, b), 0)")
        check("its charts have points", (points or 0) >= 2, str(points))
        check("the hostile cluster name is text", HOSTILE in by_name, json.dumps(list(by_name)))
        imgs = await evaluate(call, "document.querySelectorAll('img').length")
        check("no element was made of it", imgs == 0, str(imgs))
        # The page's totals against the admin's Envoy series.
        # (Read again while requests still land between the two reads.)
        for _ in range(5):
            prom = get(f"http://{admin}/stats/prometheus?filter=upstream_rq_completed")
            m = re.search(r'envoy_cluster_upstream_rq_completed\{envoy_cluster_name="backend"\} (\d+)', prom)
            page = json.loads(get(f"http://{admin}/dashboard.json"))
            total = next((c["completed"] for c in page["clusters"] if c["name"] == "backend"), None)
            if m is not None and total == int(m.group(1)):
                break
            await asyncio.sleep(0.5)
        check("its counts match /stats/prometheus", m is not None and total == int(m.group(1)), f"{total} vs {m and m.group(1)}")
        await call("Emulation.setDeviceMetricsOverride", {"width": 1200, "height": 700, "deviceScaleFactor": 1, "mobile": False})
        data = (await call("Page.captureScreenshot", {"format": "png"})).get("data")
        if data:
            with open(shot, "wb") as f:
                f.write(base64.b64decode(data))
        check("a screenshot", bool(data))
    return failures


def main():
    if "--" not in sys.argv or len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        return 2
    split = sys.argv.index("--")
    admin, gw, shot = sys.argv[1:4]
    return 1 if asyncio.run(run(admin, gw, shot, sys.argv[split + 1 :])) else 0


if __name__ == "__main__":
    sys.exit(main())
