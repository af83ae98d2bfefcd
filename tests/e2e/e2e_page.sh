#!/bin/sh
# tests/e2e/e2e_page.sh: --report FILE.html from every mode (single, dp, ddp,
# compare with --repeat and --predict, --scenario dp-device0 and no-sync) opened in
# headless Chromium (tests/browser/page_check.py): no console error, no
# request, one timeline lane per device and stream, one phase bar per column
# of compare's table, one bar per device of its share of its peak (drawn as
# long as the share, at 700 and 1400 px), the replicas' two curves on
# no-sync's, the same without scripts, a screenshot that is not
# blank.  A planted bad page must fail the check.  And the option's errors:
# a clash with another output, an unwritable folder, modes that draw nothing.
# Usage: sh tests/e2e/e2e_page.sh ./ddpbench
E2E=e2e_page
. "$(dirname "$0")/lib.sh"
CHECK="$(dirname "$0")/../browser/page_check.py"
PY=/usr/bin/python3
[ -x $PY ] || PY=python3

# short runs: seed-linear (batch 20) on the CPU, a few timed steps
S="--model seed-linear --backend cpu --steps 12 --warmup-steps 2 --quiet"

# ---- the errors -------------------------------------------------------------------
expect_error "are the same file" --mode single $S --trace "$T/same.html" --report "$T/same.html"
expect_error "--report $T/no/such/page.html" --mode single $S --report "$T/no/such/page.html"
expect_error "--report: not for --mode comm" --mode comm --report "$T/comm.html"
expect_error "--report: this scenario's runs do not finish" --scenario uneven --report "$T/u.html"

# ---- a page from every mode ---------------------------------------------------------
page() { # NAME LANES BARS PEAKS ARGS...
    name=$1 lanes=$2 bars=$3 peaks=$4
    shift 4
    "$BIN" "$@" --report "$T/$name.html" >"$T/$name.out" 2>&1
    rc=$?
    if [ $rc -ne 0 ] || [ ! -s "$T/$name.html" ]; then
        ko "$name: exit $rc, no page: $(tail -3 "$T/$name.out")"
        return
    fi
    ok
    ls "$T" | grep -q "^\.$name.html" && ko "$name: a temporary file was left" || ok
    PAGES="$PAGES $T/$name.html:$lanes:$bars:$peaks"
}
PAGES=
page single 1 1 1 --mode single $S
page dp 6 2 3 --mode dp --gpus 0,1,2 $S
page ddp 4 2 2 --mode ddp --gpus 0,1 $S
page compare 9 5 5 --mode compare --gpus 0,1 $S --repeat 2 --predict
page scenario 12 6 6 --scenario dp-device0 --steps 8 --warmup-steps 2
page nosync 8 4 4 --scenario no-sync
PAGES="$PAGES:2" # no-sync's page: the replicas' distance, with and without the mistake
# the GPU lesson beside the CPU's measured model (--hardware: app/predict/)
page gpu 9 5 5 --mode compare --gpus 0,1 $S --predict --hardware 2x-titan-rtx-nvlink
grep -q 'data-mode="gpu-ddp"' "$T/gpu.html" && grep -q 'Measured on this CPU' "$T/gpu.html" &&
    grep -q 'Modelled for 2x-titan-rtx-nvlink' "$T/gpu.html" && grep -q 'checked against' "$T/gpu.html" &&
    ok || ko "--hardware: the page lacks the modelled GPU chart beside the CPU's"
grep -q 'class="errbar"' "$T/compare.html" && ok || ko "compare --repeat --predict: no error bars"
grep -q 'class="curve" data-mode="ddp"' "$T/compare.html" && ok || ko "--predict: no curve"
grep -q 'scenario dp-device0: behaved as described' "$T/scenario.html" && ok ||
    ko "the scenario's page lacks its verdict"
# the README's caption is the page's own verdict (scripts/readme_picture.sh
# --quote), so its figures are its picture's: every figure quoted is one the
# page's verdict shows
q=$(sh "$(dirname "$0")/../../scripts/readme_picture.sh" --quote "$T/compare.html")
v=$(tr '\n' ' ' <"$T/compare.html" | sed 's/.*<p class="verdict">//; s/<\/p>.*//')
miss=
for n in $(echo "$q" | grep -oE '[0-9]+(\.[0-9]+)?(x|%| us| ms)?' | sort -u); do
    case "$v" in *"$n"*) ;; *) miss="$miss $n" ;; esac
done
[ -n "$q" ] && [ -z "$miss" ] && ok || ko "readme_picture --quote: '$q' holds figures the page's verdict lacks:$miss"

if need chromium; then
    mkdir -p "$T/shots"
    # shellcheck disable=SC2086 # the list is meant to split
    if $PY "$CHECK" "$(command -v chromium)" "$T/shots" $PAGES >"$T/check.out" 2>&1; then
        ok
    else
        ko "the pages in Chromium: $(cat "$T/check.out")"
    fi
    # a page that fetches, logs an error and lacks its figures must fail
    cat >"$T/bad.html" <<'EOF'
<!DOCTYPE html><html><head><title>bad</title></head><body>
<img src="http://127.0.0.1:9/x.png"><script>console.error("planted");</script>
<svg class="fig" width="400" height="30"><g class="peak" data-share="0.5"><rect class="track"
x="0" width="200" height="10"/><rect class="ev" x="0" width="180" height="10"/><text class="val"
x="210" y="10">60 GFLOP/s</text></g></svg></body></html>
EOF
    $PY "$CHECK" "$(command -v chromium)" "$T/shots" "$T/bad.html:1:1" >"$T/bad.out" 2>&1
    rc=$?
    [ $rc -eq 1 ] && ok || ko "a bad page passed the browser check (exit $rc)"
    for w in "a request for http://127.0.0.1:9/x.png" "console error: planted" "0 timeline lanes" \
        "screenshot is blank" "is drawn 0.900 of its track for a share of 0.500"; do
        grep -q "$w" "$T/bad.out" && ok || ko "the browser check missed '$w': $(cat "$T/bad.out")"
    done
fi
e2e_finish
