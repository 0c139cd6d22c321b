#!/usr/bin/env python3
"""Table and figure of a load curve (benches/e2e/curve.sh).

Reads the results.tsv that curve.sh collects (compare.sh's per-run rows with
an `offered` column first: a rate in req/s, or `sat` for the closed-loop
run) and writes table.md and curve.svg into --out; with --docs, also puts
the table and a link to the figure between the load-curve markers of
docs/benchmarks.md and copies the figure to --docs-svg.

Standard library only; the SVG is written by hand. Can be rerun on a kept
results.tsv:  python3 benches/e2e/curve_report.py --results DIR/results.tsv --out DIR
"""
import argparse
import csv
import math
import os
import re
import shutil
import statistics
import sys
from xml.sax.saxutils import escape

ORDER = ["gateway", "baseline", "haproxy", "envoy", "wireproxy", "wire", "direct"]
NAMES = {"gateway": "gateway", "baseline": "baseline", "haproxy": "HAProxy", "envoy": "Envoy",
         "wireproxy": "wire_proxy", "wire": "wire_backend", "direct": "direct"}
STYLE = {  # colour, marker
    "gateway": ("#1f6fb4", "circle"),
    "haproxy": ("#e07b00", "square"),
    "envoy": ("#2a9a3a", "triangle"),
    "baseline": ("#7b4fb0", "diamond"),
}
OTHER = [("#8c564b", "diamond"), ("#666666", "diamond"), ("#c2185b", "diamond")]
SHORTFALL = 0.95  # achieved below this share of the offered rate: flagged
BEGIN, END = "<!-- load-curve:begin -->", "<!-- load-curve:end -->"


def num(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(x) else x


def med(vals):
    vals = [v for v in vals if v is not None]
    return statistics.median(vals) if vals else None


def rng(vals):
    vals = [v for v in vals if v is not None]
    return (min(vals), max(vals)) if vals else None


def load(path):
    rows = list(csv.DictReader(open(path), delimiter="\t"))
    rows = [r for r in rows if r.get("tool", "loadgen") == "loadgen"]
    if not rows:
        sys.exit(f"curve_report: no loadgen rows in {path}")
    return rows


def points_of(rows):
    rates = sorted({int(r["offered"]) for r in rows if r["offered"] != "sat"})
    pts = [str(x) for x in rates]
    if any(r["offered"] == "sat" for r in rows):
        pts.append("sat")
    return pts


def targets_of(rows):
    seen = {r["target"] for r in rows}
    return [t for t in ORDER if t in seen] + sorted(seen - set(ORDER))


def stats(rows, pts, targets):
    """(point, target) -> medians and ranges over rounds."""
    S = {}
    for p in pts:
        for t in targets:
            rs = [r for r in rows if r["offered"] == p and r["target"] == t]
            if not rs:
                continue
            cpu = [num(r["proxy_cpu_us_per_req"]) for r in rs]
            p99 = [num(r["p99_us"]) for r in rs]
            rps = [num(r["rps"]) for r in rs]
            S[(p, t)] = {
                "rps": med(rps), "cpu": med(cpu), "cpu_rng": rng(cpu),
                "p99": med(p99), "p99_rng": rng(p99), "n": len(rs),
                "errors": sum(int(r["errors"]) for r in rs),
            }
    return S


def paired(rows, p, a, b, key):
    """Ratios a ÷ b of runs in the same round (back to back), as compare.sh."""
    by = {(r["round"], r["target"]): r for r in rows if r["offered"] == p}
    vals = []
    for rd in sorted({r["round"] for r in rows if r["offered"] == p}, key=int):
        try:
            vals.append(float(by[(rd, a)][key]) / float(by[(rd, b)][key]))
        except (KeyError, ValueError, ZeroDivisionError):
            pass
    return [v for v in vals if not math.isnan(v)]


def cell(vals):
    if not vals:
        return "—"
    if len(vals) == 1:
        return f"{vals[0]:.2f}"
    return f"{statistics.median(vals):.2f} ({min(vals):.2f}–{max(vals):.2f})"


def short_of(p, s):
    return p != "sat" and s["rps"] is not None and s["rps"] < SHORTFALL * int(p)


def fmt_int(x):
    return "—" if x is None else f"{x:,.0f}"


def fmt_cpu(s):
    if s["cpu"] is None:
        return "—"
    lo, hi = s["cpu_rng"]
    return f"{s['cpu']:.1f}" if s["n"] == 1 else f"{s['cpu']:.1f} ({lo:.1f}–{hi:.1f})"


def table(rows, pts, targets, S, a):
    out = []
    rounds = len({r["round"] for r in rows})
    head = f"Load curve at {a.commit}" + (f", {a.date}" if a.date else "") + (f": {a.settings}" if a.settings else "")
    out.append(f"{head}. Open loop at each offered rate "
               f"(latency from the intended send time); saturation is closed loop. "
               f"Medians over {rounds} round(s), (min–max) where more than one; ratios are taken "
               f"within each round (targets back to back), then median (min–max).")
    if a.command:
        out.append("")
        out.append(f"`{a.command}`")
    out.append("")
    out.append("| offered req/s | target | achieved req/s | proxy CPU-µs/req | p99 µs | errors |")
    out.append("|---|---|---:|---:|---:|---:|")
    flagged = False
    for p in pts:
        label = "saturation" if p == "sat" else f"{int(p):,}"
        for t in targets:
            s = S.get((p, t))
            if not s:
                continue
            mark = ""
            if short_of(p, s):
                mark, flagged = " †", True
            out.append(f"| {label} | {NAMES.get(t, t)} | {fmt_int(s['rps'])}{mark} | {fmt_cpu(s)} | "
                       f"{fmt_int(s['p99'])} | {s['errors']} |")
    if flagged:
        out.append("")
        out.append(f"† achieved less than {SHORTFALL:.0%} of the offered rate: the run was saturated.")
    cols = []
    if "gateway" in targets and "haproxy" in targets:
        cols.append(("gateway ÷ HAProxy CPU-µs/req", "gateway", "haproxy", "proxy_cpu_us_per_req"))
        cols.append(("gateway ÷ HAProxy p99", "gateway", "haproxy", "p99_us"))
    if "gateway" in targets and "envoy" in targets:
        cols.append(("gateway ÷ Envoy CPU-µs/req", "gateway", "envoy", "proxy_cpu_us_per_req"))
    if "gateway" in targets and "baseline" in targets:
        cols.append(("gateway ÷ baseline CPU-µs/req", "gateway", "baseline", "proxy_cpu_us_per_req"))
    if cols:
        out.append("")
        out.append("| offered req/s | " + " | ".join(c[0] for c in cols) + " |")
        out.append("|---|" + "---:|" * len(cols))
        for p in pts:
            label = "saturation" if p == "sat" else f"{int(p):,}"
            out.append(f"| {label} | " + " | ".join(cell(paired(rows, p, a_, b_, k)) for _, a_, b_, k in cols) + " |")
    return "\n".join(out) + "\n"


# ---------------------------------------------------------------- SVG

def nice_step(span, n=5):
    raw = span / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 2.5, 5, 10):
        if m * mag >= raw:
            return m * mag
    return 10 * mag


def fmt_rate(x):
    if x >= 1000:
        v = x / 1000
        return f"{v:.0f}k" if abs(v - round(v)) < 1e-9 else f"{v:.1f}k"
    return f"{x:.0f}"


def fmt_us(x):
    if x >= 1e6:
        return f"{x / 1e6:g} s"
    if x >= 1000:
        return f"{x / 1000:g} ms"
    return f"{x:g} µs"


def marker(shape, x, y, color, hollow, size=4.5):
    fill = "#ffffff" if hollow else color
    common = f'fill="{fill}" stroke="{color}" stroke-width="1.6"'
    if shape == "circle":
        return f'<circle cx="{x:.1f}" cy="{y:.1f}" r="{size:.1f}" {common}/>'
    if shape == "square":
        s = size * 0.9
        return f'<rect x="{x - s:.1f}" y="{y - s:.1f}" width="{2 * s:.1f}" height="{2 * s:.1f}" {common}/>'
    if shape == "triangle":
        s = size * 1.2
        return (f'<polygon points="{x:.1f},{y - s:.1f} {x + s:.1f},{y + s * 0.8:.1f} '
                f'{x - s:.1f},{y + s * 0.8:.1f}" {common}/>')
    s = size * 1.2
    return f'<polygon points="{x:.1f},{y - s:.1f} {x + s:.1f},{y:.1f} {x:.1f},{y + s:.1f} {x - s:.1f},{y:.1f}" {common}/>'


def text(x, y, s, size=12, anchor="middle", color="#222", extra=""):
    return (f'<text x="{x:.1f}" y="{y:.1f}" font-size="{size}" text-anchor="{anchor}" '
            f'fill="{color}"{extra}>{escape(s)}</text>')


def svg(rows, pts, targets, S, a):
    W, H = 1100, 550
    top, ph = 106, 320          # plot area: y from top to top+ph
    pw = 400                   # plot width of each panel
    lefts = (85, 85 + pw + 145)
    rates = [int(p) for p in pts if p != "sat"]
    has_sat = "sat" in pts
    xmax = max(rates) if rates else 1
    step = nice_step(xmax, 4)
    xmax = math.ceil(xmax / step) * step
    rate_w = pw * (0.80 if has_sat else 0.97)
    sat_x = pw * 0.92
    styles = {}
    k = 0
    for t in targets:
        if t in STYLE:
            styles[t] = STYLE[t]
        else:
            styles[t] = OTHER[k % len(OTHER)]
            k += 1
    nt = len(targets)

    def X(left, p, ti):
        jitter = (ti - (nt - 1) / 2) * 4.0   # targets side by side, bars apart
        if p == "sat":
            return left + sat_x + jitter
        return left + int(p) / xmax * rate_w + jitter

    o = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
         f'font-family="DejaVu Sans, Helvetica, Arial, sans-serif">',
         f'<rect width="{W}" height="{H}" fill="#ffffff"/>',
         text(W / 2, 28, f"Load curve: {', '.join(NAMES.get(t, t) for t in targets)} — {a.commit}"
              + (f", {a.date}" if a.date else ""),
              17, extra=' font-weight="bold"'),
         text(W / 2, 50, a.settings, 12, color="#555"),
         text(W / 2, 68, "open loop at each offered rate (loadgen; latency from the intended send time); "
              "sat. = closed loop (achieved req/s under it)", 12, color="#555")]

    panels = [
        ("cpu", "proxy CPU-µs per request", "median; bars: min–max over rounds", False),
        ("p99", "p99 latency (log scale)", "median; bars: min–max over rounds", True),
    ]
    for (key, title, note, logy), left in zip(panels, lefts):
        vals = []
        for (p, t), s in S.items():
            if s[key] is not None and s[key] > 0:
                vals.append(s[key])
                if s[key + "_rng"]:
                    vals.extend(v for v in s[key + "_rng"] if v > 0)
        if not vals:
            vals = [1.0]
        if logy:
            lo = 10 ** math.floor(math.log10(min(vals)))
            hi = 10 ** math.ceil(math.log10(max(vals)))
            if hi <= lo:
                hi = lo * 10

            def Y(v, lo=lo, hi=hi):
                return top + ph - (math.log10(v) - math.log10(lo)) / (math.log10(hi) - math.log10(lo)) * ph
            ticks, minor = [], []
            d = lo
            while d <= hi * 1.0001:
                ticks.append(d)
                for m in (2, 5):
                    if d * m < hi:
                        minor.append(d * m)
                d *= 10
            labelled = ticks + (minor if len(ticks) <= 3 else [])
        else:
            ys = nice_step(max(vals) * 1.05, 5)
            hi = math.ceil(max(vals) * 1.05 / ys) * ys

            def Y(v, hi=hi):
                return top + ph - v / hi * ph
            ticks = [i * ys for i in range(int(round(hi / ys)) + 1)]
            minor = []
            labelled = ticks
        # frame, grid, ticks
        o.append(text(left + pw / 2, top - 10, title, 14, extra=' font-weight="bold"'))
        for v in sorted(set(ticks + minor)):
            y = Y(v)
            o.append(f'<line x1="{left}" y1="{y:.1f}" x2="{left + pw}" y2="{y:.1f}" '
                     f'stroke="{"#e4e4e4" if v in ticks else "#f1f1f1"}" stroke-width="1"/>')
            o.append(f'<line x1="{left - 5}" y1="{y:.1f}" x2="{left}" y2="{y:.1f}" stroke="#333"/>')
            if v in labelled:
                lab = fmt_us(v) if logy else f"{v:g}"
                o.append(text(left - 8, y + 4, lab, 11, anchor="end"))
        o.append(f'<rect x="{left}" y="{top}" width="{pw}" height="{ph}" fill="none" stroke="#333"/>')
        xv = 0
        while xv <= xmax + 1e-9 and rates:
            x = left + xv / xmax * rate_w
            o.append(f'<line x1="{x:.1f}" y1="{top + ph}" x2="{x:.1f}" y2="{top + ph + 5}" stroke="#333"/>')
            o.append(text(x, top + ph + 19, fmt_rate(xv), 11))
            xv += step
        if has_sat:
            sep = left + (rate_w + sat_x) / 2
            o.append(f'<line x1="{sep:.1f}" y1="{top}" x2="{sep:.1f}" y2="{top + ph}" stroke="#999" '
                     f'stroke-dasharray="4,3"/>')
            o.append(f'<line x1="{left + sat_x:.1f}" y1="{top + ph}" x2="{left + sat_x:.1f}" '
                     f'y2="{top + ph + 5}" stroke="#333"/>')
            o.append(text(left + sat_x, top + ph + 19, "sat.", 11, extra=' font-style="italic"'))
        o.append(text(left + rate_w / 2, top + ph + 40, "offered load (req/s)", 12))
        ylab = "CPU-µs per request" if key == "cpu" else "p99 latency"
        cy = top + ph / 2
        o.append(text(left - 58, cy, ylab, 12, extra=f' transform="rotate(-90 {left - 58:.1f} {cy:.1f})"'))
        if any(s["n"] > 1 for s in S.values()):
            o.append(text(left + rate_w / 2, top + ph + 58, note, 11, color="#666"))
        # series
        for ti, t in enumerate(targets):
            color, shape = styles[t]
            line = []
            for p in pts:
                s = S.get((p, t))
                if not s or s[key] is None or s[key] <= 0:
                    continue
                x, y = X(left, p, ti), Y(s[key])
                if p != "sat":
                    line.append(f"{x:.1f},{y:.1f}")
                r = s[key + "_rng"]
                if r and s["n"] > 1 and r[0] > 0 and r[1] > r[0]:
                    y0, y1 = Y(r[0]), Y(r[1])
                    o.append(f'<line x1="{x:.1f}" y1="{y0:.1f}" x2="{x:.1f}" y2="{y1:.1f}" stroke="{color}" '
                             f'stroke-width="1.2" opacity="0.7"/>')
                    for yy in (y0, y1):
                        o.append(f'<line x1="{x - 3:.1f}" y1="{yy:.1f}" x2="{x + 3:.1f}" y2="{yy:.1f}" '
                                 f'stroke="{color}" stroke-width="1.2" opacity="0.7"/>')
            if len(line) > 1:
                o.append(f'<polyline points="{" ".join(line)}" fill="none" stroke="{color}" stroke-width="2"/>')
            for p in pts:
                s = S.get((p, t))
                if not s or s[key] is None or s[key] <= 0:
                    continue
                x, y = X(left, p, ti), Y(s[key])
                o.append(marker(shape, x, y, color, short_of(p, s)))
        if has_sat:  # achieved req/s at saturation, under "sat.", one line per target
            for ti, t in enumerate(targets):
                s = S.get(("sat", t))
                if s and s["rps"]:
                    o.append(text(left + sat_x, top + ph + 32 + 12 * ti, fmt_rate(round(s["rps"], -2)), 10,
                                  color=styles[t][0]))
    # legend
    ly = H - 22
    items = [(NAMES.get(t, t), *styles[t]) for t in targets]
    widths = [len(n) * 7.5 + 40 for n, _, _ in items]
    extra = any(short_of(p, s) for (p, t), s in S.items())
    total = sum(widths) + (230 if extra else 0)
    x = W / 2 - total / 2
    for (name, color, shape), w in zip(items, widths):
        o.append(f'<line x1="{x:.1f}" y1="{ly - 4}" x2="{x + 24:.1f}" y2="{ly - 4}" stroke="{color}" stroke-width="2"/>')
        o.append(marker(shape, x + 12, ly - 4, color, False))
        o.append(text(x + 30, ly, name, 12, anchor="start"))
        x += w
    if extra:
        o.append(marker("circle", x + 8, ly - 4, "#555", True))
        o.append(text(x + 18, ly, f"hollow: achieved < {SHORTFALL:.0%} of offered", 12, anchor="start", color="#555"))
    o.append("</svg>")
    return "\n".join(o) + "\n"


def update_docs(path, table_md, svg_src, svg_dst):
    doc = open(path, encoding="utf-8").read()
    pat = re.compile(re.escape(BEGIN) + r".*?" + re.escape(END), re.S)
    if len(pat.findall(doc)) != 1:
        sys.exit(f"curve_report: {path} needs exactly one {BEGIN} … {END} block")
    os.makedirs(os.path.dirname(svg_dst), exist_ok=True)
    shutil.copyfile(svg_src, svg_dst)
    link = os.path.relpath(svg_dst, os.path.dirname(os.path.abspath(path)))
    block = (f"{BEGIN}\n{table_md}\n![Load curve: proxy CPU-µs per request and p99 latency against the "
             f"offered rate]({link})\n{END}")
    doc = pat.sub(lambda _: block, doc)
    with open(path, "w", encoding="utf-8") as f:
        f.write(doc)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--results", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--commit", default="unknown")
    ap.add_argument("--date", default="")
    ap.add_argument("--settings", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--docs")
    ap.add_argument("--docs-svg")
    a = ap.parse_args()
    rows = load(a.results)
    pts = points_of(rows)
    targets = targets_of(rows)
    S = stats(rows, pts, targets)
    os.makedirs(a.out, exist_ok=True)
    md = table(rows, pts, targets, S, a)
    with open(os.path.join(a.out, "table.md"), "w", encoding="utf-8") as f:
        f.write(md)
    svg_path = os.path.join(a.out, "curve.svg")
    with open(svg_path, "w", encoding="utf-8") as f:
        f.write(svg(rows, pts, targets, S, a))
    if a.docs:
        update_docs(a.docs, md, svg_path, a.docs_svg or os.path.join(os.path.dirname(a.docs), "img", "load-curve.svg"))


if __name__ == "__main__":
    main()
