#!/bin/sh
# Screenshot a report's first screen as a reader meets it: laptop size, headless Chromium; and
# check that nothing on the page is wider than the window (a table that would scroll sideways).
# usage: benchmarks/lab/screenshot_report.sh REPORT.html OUT.png [WIDTHxHEIGHT]   (default 1280x800)
# Needs Debian's `chromium` package (apt-get install -y chromium). Runs offline: the report
# embeds its figures and the flags below stop every background request. Exits 3 (after writing
# the screenshot) when a table is wider than the window, naming it.
set -eu
if [ $# -lt 2 ]; then
  echo "usage: $0 REPORT.html OUT.png [WIDTHxHEIGHT]" >&2; exit 2
fi
browser=${CHROMIUM:-chromium}
command -v "$browser" >/dev/null || { echo "$browser not found: apt-get install -y chromium (or set CHROMIUM)" >&2; exit 1; }
report=$(realpath "$1")
out=$(realpath -m "$2")
size=${3:-1280x800}
rm -f "$out"
profile=$(mktemp -d)
probe=$(mktemp --suffix=.html)
trap 'rm -rf "$profile" "$probe"' EXIT
flags="--headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
  --disable-sync --no-first-run --hide-scrollbars --user-data-dir=$profile --window-size=$(echo "$size" | tr x ,)"
# shellcheck disable=SC2086
"$browser" $flags --screenshot="$out" "file://$report" >/dev/null 2>&1
test -s "$out" || { echo "no screenshot written to $out" >&2; exit 1; }
echo "$out"
# The same page with a probe that writes every table's rendered width into the DOM.
{ cat "$report"; printf '%s' "<script>var w=innerWidth,o=[];document.querySelectorAll('table').forEach(function(t,i){
var r=t.getBoundingClientRect();if(r.right>w+1){o.push('table '+(i+1)+' ('+(t.rows[0]?t.rows[0].innerText.slice(0,60):'')+') '
+Math.round(r.width)+' px, right edge at '+Math.round(r.right))}});document.body.setAttribute('data-probe',
'window '+w+' px; tables '+document.querySelectorAll('table').length+'; wider: '+(o.join(' | ')||'none'))</script>"; } > "$probe"
# shellcheck disable=SC2086
probed=$("$browser" $flags --dump-dom "file://$probe" 2>/dev/null | grep -o 'data-probe="[^"]*"' | sed 's/^data-probe="//; s/"$//')
echo "$probed"
case "$probed" in
  *"wider: none") ;;
  *) exit 3 ;;
esac
