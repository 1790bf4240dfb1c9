#!/usr/bin/env python3
"""An SVG chart of req/s and p99 per scenario, from a JSON in idemgen-bench's shape.

Usage: bench/http/chart.py RESULTS.json OUT.svg

Reads `{"scenarios": [{"name", "throughput_rps", "p99_ms", ...}]}` (bench/http/run.sh's JSON, or
idemgen-bench's `--json`) and draws two panels of grouped bars: requests per second and p99
latency, one group per scenario, one bar per series (the `strategy` of run.sh's entries, else
the client count of idemgen-bench's). Plain SVG, no dependencies.
"""
import json
import sys
from xml.sax.saxutils import escape

COLOURS = ["#3366cc", "#dc7633", "#2e8b57", "#8e44ad", "#c0392b", "#7f8c8d"]


def series_of(entry):
    if "strategy" in entry:
        delay = entry.get("one_way_delay_ms")
        return entry["strategy"] if delay is None else f"{entry['strategy']} +{delay:g} ms"
    return f"{entry.get('clients', '?')} clients"


def nice_max(value):
    if value <= 0:
        return 1.0
    step = 10 ** (len(str(int(value))) - 1)
    for k in (1, 2, 2.5, 5, 10):
        if value <= k * step:
            return k * step
    return 10 * step


def panel(out, top, title, unit, groups, series, value, width, height):
    left, bottom = 70, 60
    plot_w, plot_h = width - left - 20, height - bottom - 40
    values = [value(e) for g in groups.values() for e in g.values() if value(e) is not None]
    vmax = nice_max(max(values, default=1))
    out.append(f'<text x="{left}" y="{top + 20}" font-size="14" font-weight="bold">{escape(title)}</text>')
    y0 = top + 40 + plot_h
    for i in range(5):
        v = vmax * i / 4
        y = y0 - plot_h * i / 4
        out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        out.append(f'<text x="{left - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">{v:g}</text>')
    out.append(f'<text x="14" y="{top + 40 + plot_h / 2:.1f}" font-size="11" '
               f'transform="rotate(-90 14 {top + 40 + plot_h / 2:.1f})" text-anchor="middle">{escape(unit)}</text>')
    group_w = plot_w / max(len(groups), 1)
    bar_w = group_w * 0.8 / max(len(series), 1)
    for gi, (name, entries) in enumerate(groups.items()):
        gx = left + gi * group_w + group_w * 0.1
        for si, s in enumerate(series):
            e = entries.get(s)
            v = value(e) if e else None
            if v is None:
                continue
            h = plot_h * v / vmax
            x = gx + si * bar_w
            out.append(f'<rect x="{x:.1f}" y="{y0 - h:.1f}" width="{bar_w - 2:.1f}" height="{h:.1f}" '
                       f'fill="{COLOURS[si % len(COLOURS)]}"><title>{escape(name)}, {escape(s)}: {v:.2f} {escape(unit)}</title></rect>')
            out.append(f'<text x="{x + (bar_w - 2) / 2:.1f}" y="{y0 - h - 3:.1f}" font-size="9" '
                       f'text-anchor="middle">{v:.0f}</text>' if v >= 10 else
                       f'<text x="{x + (bar_w - 2) / 2:.1f}" y="{y0 - h - 3:.1f}" font-size="9" '
                       f'text-anchor="middle">{v:.2f}</text>')
        out.append(f'<text x="{gx + group_w * 0.4:.1f}" y="{y0 + 16}" font-size="11" '
                   f'text-anchor="middle">{escape(name)}</text>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{y0}" y2="{y0}" stroke="#333"/>')


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: chart.py RESULTS.json OUT.svg")
    data = json.load(open(sys.argv[1]))
    groups, series = {}, []
    for e in data.get("scenarios", []):
        s = series_of(e)
        if s not in series:
            series.append(s)
        groups.setdefault(e["name"], {})[s] = e
    width, height = max(640, 150 * len(groups) + 90), 320
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{2 * height + 40}" '
           f'font-family="sans-serif">', f'<rect width="100%" height="100%" fill="white"/>']
    panel(out, 0, "Throughput per scenario", "requests/s", groups, series,
          lambda e: e.get("throughput_rps"), width, height)
    panel(out, height, "p99 latency per scenario", "ms", groups, series,
          lambda e: e.get("p99_ms"), width, height)
    for si, s in enumerate(series):
        x = 80 + si * 170
        out.append(f'<rect x="{x}" y="{2 * height + 12}" width="12" height="12" fill="{COLOURS[si % len(COLOURS)]}"/>')
        out.append(f'<text x="{x + 18}" y="{2 * height + 22}" font-size="12">{escape(s)}</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
