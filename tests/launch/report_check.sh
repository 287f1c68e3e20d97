#!/usr/bin/env bash
# Checks a report.html as a person would see it, in headless Chromium: it loads without console
# or network errors; a screenshot at a desktop window's width is mostly drawn (not blank) and
# the page is no wider than the window (plots use the page's width, nothing overflows it); in
# the rendered DOM there are NSVG charts, every one with data (a series with points, markers or
# bars), and no axis label or tooltip reads NaN, Infinity or in exponent notation (e-09, 1e+05).
# Usage: report_check.sh REPORT.html OUT_DIR NSVG [TITLE]
# On failure, OUT_DIR/why says why (exit 1); OUT_DIR keeps report.png and dom.html.
set -u
report=$1
out=$2
nsvg=$3
title=${4:-}
mkdir -p "$out"
why() { echo "$*" >"$out/why"; echo "report check: $*"; exit 1; }
chromium=$(command -v chromium || command -v chromium-browser) ||
  why "chromium is not installed (scripts/bootstrap.sh installs it)"
flags=(--headless --no-sandbox --disable-gpu --disable-background-networking --hide-scrollbars
       --disable-extensions --no-first-run --user-data-dir="$out/profile"
       --enable-logging=stderr --v=0)
timeout 120 "$chromium" "${flags[@]}" --window-size=1400,2400 --screenshot="$out/report.png" \
  "file://$report" >/dev/null 2>"$out/screenshot.log" ||
  why "chromium could not take a screenshot: $(tail -3 "$out/screenshot.log")"
timeout 120 "$chromium" "${flags[@]}" --window-size=1400,2400 --dump-dom "file://$report" \
  >"$out/dom.html" 2>"$out/dom.log" || why "chromium could not load the report: $(tail -3 "$out/dom.log")"
if grep -hE "CONSOLE|Uncaught|ERR_FILE|net::ERR" "$out/screenshot.log" "$out/dom.log" >"$out/errors"; then
  why "the report logged errors: $(head -3 "$out/errors")"
fi
# A page that looks at the two as a person would: the report in a frame at the window's width
# (how wide its charts are drawn, whether anything overflows the page), and the screenshot on
# a canvas (how much of it is drawn). Chromium runs its script and prints the result into the
# DOM it dumps.
cat >"$out/look.html" <<HTML
<!DOCTYPE html><html><body><pre id="result">pending</pre>
<iframe id="f" src="file://$report" style="width:1400px;height:2000px;border:0"></iframe>
<img id="shot" src="file://$out/report.png">
<script>
function look() {
  var r = {};
  try {
    var doc = document.getElementById("f").contentDocument;
    r.page_width = doc.documentElement.scrollWidth;
    r.charts = [];
    doc.querySelectorAll("svg.chart").forEach(function (s) {
      r.charts.push({id: s.getAttribute("data-chart"), width: s.getBoundingClientRect().width});
    });
    var img = document.getElementById("shot");
    var c = document.createElement("canvas");
    c.width = img.naturalWidth; c.height = img.naturalHeight;
    var g = c.getContext("2d");
    g.drawImage(img, 0, 0);
    var d = g.getImageData(0, 0, c.width, c.height).data, drawn = 0, n = 0;
    for (var i = 0; i < d.length; i += 4 * 7) { n++; if (Math.min(d[i], d[i + 1], d[i + 2]) < 235) drawn++; }
    r.shot = {width: c.width, height: c.height, drawn: drawn / n};
  } catch (e) { r.error = String(e); }
  document.getElementById("result").textContent = JSON.stringify(r);
}
window.addEventListener("load", look);
</script></body></html>
HTML
timeout 120 "$chromium" "${flags[@]}" --allow-file-access-from-files --window-size=1500,2400 \
  --virtual-time-budget=15000 --dump-dom "file://$out/look.html" >"$out/look.dom" 2>"$out/look.log" ||
  why "chromium could not look at the report: $(tail -3 "$out/look.log")"
python3 - "$out/look.dom" "$out/dom.html" "$nsvg" "$title" >"$out/why" 2>&1 <<'PY' || { cat "$out/why"; exit 1; }
import html, json, re, sys

look_path, dom_path, nsvg, title = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
m = re.search(r'<pre id="result">(.*?)</pre>', open(look_path).read(), re.S)
assert m, "the look page did not run"
look = json.loads(html.unescape(m.group(1)))
assert "error" not in look, look["error"]
shot = look["shot"]
assert shot["width"] >= 1400, shot
assert shot["drawn"] > 0.015, "the screenshot is nearly blank (%.1f %% drawn)" % (100 * shot["drawn"])
assert look["page_width"] <= 1400, "the page is %d px wide in a 1400 px window" % look["page_width"]
widths = [c["width"] for c in look["charts"]]
assert len(widths) == nsvg, look["charts"]
# Every chart drawn at least ~600 px wide in a 1400 px window: the page's width, in one or two
# columns (not 360 px).
assert min(widths) >= 600, look["charts"]

# The rendered DOM.
dom = open(dom_path).read()
svgs = re.findall(r"<svg[^>]*class=\"chart\"[^>]*>.*?</svg>", dom, re.S)
assert len(svgs) == nsvg, "%d charts, expected %d" % (len(svgs), nsvg)
for svg in svgs:
    name = re.search(r'data-chart="([^"]*)"', svg).group(1)
    points = sum(int(n) for n in re.findall(r'data-points="(\d+)"', svg))
    marks = len(re.findall(r'class="point"', svg))
    bars = len(re.findall(r'class="bar"[^>]*width="[1-9]', svg))
    assert points + marks + bars > 0, "chart %s has no data" % name
    assert "no data" not in svg, "chart %s says no data" % name
    labels = re.findall(r'class="tick"[^>]*>([^<]*)<', svg) + re.findall(r"<title>([^<]*)</title>", svg)
    for label in labels:
        assert not re.search(r"NaN|Infinity|\binf\b|\de[-+]\d", label), "chart %s has the label %r" % (name, label)
if title:
    assert title in dom, "the title %r is not in the page" % title
print("ok: %d charts with data, %d-%d px wide; %.0f %% of the screenshot drawn" %
      (len(svgs), min(widths), max(widths), 100 * shot["drawn"]))
PY
cat "$out/why"
