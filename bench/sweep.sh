#!/bin/sh
# bench/sweep.sh: one model over 1..N devices in each mode (single once, on
# one device), every run's --csv row in one CSV, and two SVG charts drawn
# with gnuplot: throughput and scaling efficiency (throughput / (devices x
# single's throughput)) against the device count.  Strong scaling keeps the
# global batch (the preset's, or --batch) whatever the device count; weak
# scaling keeps each device's batch (-B rows: --batch-per-device), so the
# global batch grows with the devices and single runs -B rows.  Under strong
# scaling --predict's alpha-beta prediction of DP and DDP on 1..8 devices is
# drawn beside the measured points, past the largest device count measured.
# -r N runs every point N times (fresh processes, one CSV row each): the
# charts show each point's mean with its 95% interval as an error bar
# (Student's t, as --repeat).  -k sweeps DDP's bucket cap on N devices instead
# (buckets.csv, buckets.svg).
#
# usage: bench/sweep.sh [-b BIN] [-m MODEL] [-n MAXDEV] [-s STEPS] [-M MODES]
#                       [-w strong|weak|both] [-B ROWS] [-r N] [-k "MIB ..."] [-o DIR] [-p]
#                       [-- more ddpbench options]
#   -b BIN     the ddpbench binary [./ddpbench]
#   -m MODEL   preset [mlp-small]
#   -n MAXDEV  largest device count [CPU cores, at most 8; on CUDA pass -n]
#   -s STEPS   optimizer steps per run (2 of them warm-up) [30]
#   -M MODES   modes to sweep ["single dp ddp"]
#   -w KIND    strong (fixed global batch), weak (fixed rows per device) or
#              both (each in its own subfolder of DIR) [strong]
#   -B ROWS    weak scaling: rows per device [64]
#   -r N       runs per point, for error bars [1]
#   -k "MIB .." DDP's --bucket-mb values to sweep on MAXDEV devices (e.g. "0.25 1 4 25 auto")
#   -o DIR     output folder [build/sweep]: sweep.csv, throughput.svg, efficiency.svg,
#              predicted.txt
#   -p         no plots: only the CSV (gnuplot not needed)
# e.g. bench/sweep.sh -- --backend cpu
#      bench/sweep.sh -w both -B 128 -- --backend cpu
#      bench/sweep.sh -m mlp-large -n 8 -s 50 -- --backend cuda
# The default run is short on a 2-core CPU (5 runs of 30 mlp-small steps).
# gnuplot (Debian's gnuplot-nox) is installed when missing if run as root;
# otherwise the script stops with the apt-get command to run.
set -eu

BIN=./ddpbench
MODEL=mlp-small
MAXDEV=
STEPS=30
MODES="single dp ddp"
OUT=build/sweep
PLOT=yes
SCALING=strong
ROWS=64
REPS=1
BUCKETS=
while getopts b:m:n:s:M:w:B:r:k:o:ph opt; do
    case $opt in
    b) BIN=$OPTARG ;;
    m) MODEL=$OPTARG ;;
    n) MAXDEV=$OPTARG ;;
    s) STEPS=$OPTARG ;;
    M) MODES=$OPTARG ;;
    w) SCALING=$OPTARG ;;
    B) ROWS=$OPTARG ;;
    r) REPS=$OPTARG ;;
    k) BUCKETS=$OPTARG ;;
    o) OUT=$OPTARG ;;
    p) PLOT=no ;;
    h) sed -n '2,/^[^#]/{/^#/s/^# \{0,1\}//p}' "$0"; exit 0 ;;
    *) echo "sweep: see $0 -h" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))

die() { echo "sweep: $*" >&2; exit 1; }

[ -x "$BIN" ] || die "no ddpbench binary at $BIN (run make, or pass -b)"
if [ -z "$MAXDEV" ]; then
    MAXDEV=$(nproc 2>/dev/null || echo 1)
    [ "$MAXDEV" -gt 8 ] && MAXDEV=8
fi
case $MAXDEV in '' | *[!0-9]* | 0) die "-n: '$MAXDEV' is not a device count >= 1" ;; esac
case $SCALING in strong | weak | both) ;; *) die "-w: '$SCALING' is not strong, weak or both" ;; esac
case $ROWS in '' | *[!0-9]* | 0) die "-B: '$ROWS' is not a row count >= 1" ;; esac
case $REPS in '' | *[!0-9]* | 0) die "-r: '$REPS' is not a run count >= 1" ;; esac

# gnuplot first: a missing plotter should not cost the runs
if [ $PLOT = yes ] && ! command -v gnuplot >/dev/null 2>&1; then
    if [ "$(id -u)" -eq 0 ]; then
        echo "sweep: installing gnuplot-nox" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y gnuplot-nox >&2 ||
            { apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y gnuplot-nox >&2; } ||
            die "could not install gnuplot; run: apt-get update && apt-get install -y gnuplot-nox"
    else
        die "gnuplot is missing; run as root: apt-get update && apt-get install -y gnuplot-nox (or pass -p)"
    fi
fi

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT


# run MODE N [ddpbench options]: -r runs on devices 0..N-1, their rows appended
run() {
    rmode=$1
    rn=$2
    shift 2
    list=0
    i=1
    while [ $i -lt "$rn" ]; do list="$list,$i"; i=$((i + 1)); done
    # weak scaling: -B rows per device (single: -B rows on its one device)
    set -- ${PER:+--batch-per-device "$PER"} "$@"
    r=1
    while [ $r -le "$REPS" ]; do
        if [ "$REPS" -gt 1 ]; then
            echo "sweep: $rmode on $rn device(s), run $r of $REPS" >&2
        else
            echo "sweep: $rmode on $rn device(s)" >&2
        fi
        if ! "$BIN" --mode "$rmode" --model "$MODEL" --steps "$STEPS" --gpus "$list" --csv --quiet \
            "$@" >"$TMP/out" 2>"$TMP/err"; then
            cat "$TMP/err" >&2
            die "$rmode on $rn device(s) failed"
        fi
        head -n 1 "$TMP/out" >"$TMP/header"
        tail -n +2 "$TMP/out" >>"$TMP/rows"
        r=$((r + 1))
    done
}

# -k: DDP's bucket cap on MAXDEV devices, one row per cap, and its chart
if [ -n "$BUCKETS" ]; then
    mkdir -p "$OUT"
    list=0
    i=1
    while [ $i -lt "$MAXDEV" ]; do list="$list,$i"; i=$((i + 1)); done
    : >"$TMP/brows"
    for mb in $BUCKETS; do
        echo "sweep: ddp on $MAXDEV device(s), --bucket-mb $mb" >&2
        "$BIN" --mode ddp --model "$MODEL" --steps "$STEPS" --gpus "$list" --bucket-mb "$mb" \
            --csv --quiet "$@" >"$TMP/out" 2>"$TMP/err" || { cat "$TMP/err" >&2; die "--bucket-mb $mb failed"; }
        head -n 1 "$TMP/out" | sed 's/^/bucket_mb,/' >"$TMP/bheader"
        tail -n +2 "$TMP/out" | sed "s/^/$mb,/" >>"$TMP/brows"
    done
    cat "$TMP/bheader" "$TMP/brows" >"$OUT/buckets.csv"
    echo "sweep: wrote $OUT/buckets.csv" >&2
    [ $PLOT = yes ] || exit 0
    tcol=$(head -n 1 "$OUT/buckets.csv" | tr ',' '\n' | grep -n '^throughput_samples_per_s$' | cut -d: -f1)
    awk -F, -v t="$tcol" 'NR > 1 && $1 != "auto" { print $1, $t }' "$OUT/buckets.csv" >"$TMP/b.dat"
    awk -F, -v t="$tcol" 'NR > 1 && $1 == "auto" { print $t }' "$OUT/buckets.csv" >"$TMP/bauto"
    auto_line=
    [ -s "$TMP/bauto" ] && auto_line=", $(cat "$TMP/bauto") with lines dt 2 lc rgb 'gray' title '--bucket-mb auto'"
    gnuplot <<EOF
set terminal svg size 800,480 dynamic enhanced font 'sans,12'
set grid
set logscale x 2
set xlabel '--bucket-mb (MiB)'
set ylabel 'samples/s'
set yrange [0:*]
set output '$OUT/buckets.svg'
set title "$MODEL, ddp on $MAXDEV devices: throughput by bucket cap"
plot '$TMP/b.dat' using 1:2 with linespoints lw 2 pt 7 title 'ddp'$auto_line
EOF
    echo "sweep: wrote $OUT/buckets.svg" >&2
    exit 0
fi

# sweep KIND DIR [ddpbench options]: every mode over 1..MAXDEV devices, the
# CSV and the charts in DIR
sweep() {
kind=$1
OUT=$2
shift 2
PER=
[ "$kind" = weak ] && PER=$ROWS
mkdir -p "$OUT"
CSV=$OUT/sweep.csv
: >"$TMP/rows"
rm -f "$TMP"/*.dat
for m in $MODES; do
    if [ "$m" = single ]; then
        run single 1 "$@"
        continue
    fi
    n=1
    while [ $n -le "$MAXDEV" ]; do
        run "$m" "$n" "$@"
        n=$((n + 1))
    done
done
[ -s "$TMP/rows" ] || die "no runs (modes: $MODES)"
cat "$TMP/header" "$TMP/rows" >"$CSV"
echo "sweep: wrote $CSV" >&2

# the chart data, one file per mode: devices, mean throughput, efficiency,
# and the 95% interval's half-widths of both (mean +- t(0.975, n-1) s / sqrt(n)
# over the -r runs; 0 for one run)
col() { head -n 1 "$CSV" | tr ',' '\n' | grep -n "^$1\$" | cut -d: -f1; }
C_MODE=$(col mode)
C_DEV=$(col devices)
C_TP=$(col throughput_samples_per_s)
awk -F, -v m="$C_MODE" -v d="$C_DEV" -v t="$C_TP" -v dir="$TMP" '
    function t975(df) {
        split("12.706 4.303 3.182 2.776 2.571 2.447 2.365 2.306 2.262 2.228 2.201 2.179 2.160 2.145 2.131 2.120 2.110 2.101 2.093 2.086", q, " ")
        return df <= 20 ? q[df] : 1.96 + 2.4 / df
    }
    NR == 1 { next }
    {
        k = $m " " $d
        if (!(k in n)) { order[++nk] = k; mode[k] = $m; dev[k] = $d }
        n[k]++; s[k] += $t; ss[k] += $t * $t
    }
    END {
        single = 0
        for (i = 1; i <= nk; i++) if (mode[order[i]] == "single") single = s[order[i]] / n[order[i]]
        printf "%.3f\n", single > (dir "/single_tp")
        for (i = 1; i <= nk; i++) {
            k = order[i]; mean = s[k] / n[k]; half = 0
            if (n[k] > 1) {
                v = (ss[k] - n[k] * mean * mean) / (n[k] - 1)
                half = t975(n[k] - 1) * sqrt(v > 0 ? v : 0) / sqrt(n[k])
            }
            f = single > 0 ? 1 / (dev[k] * single) : 0
            printf "%d %.3f %.4f %.3f %.4f\n", dev[k], mean, mean * f, half, half * f >> (dir "/" mode[k] ".dat")
        }
    }' "$CSV"

# strong scaling: --predict's DP and DDP throughput on 1..8 devices, from one
# single run and the measured collectives (ddpbench's table): all eight, past
# the largest device count measured, where the model is all there is
if [ "$kind" = strong ]; then
    "$BIN" --mode single --model "$MODEL" --steps "$STEPS" --predict --quiet "$@" >"$TMP/pred" 2>&1 ||
        echo "sweep: --predict failed; charts without the prediction" >&2
    awk -v dir="$TMP" '
        /^  devices +dp step/ { on = 1; next }
        /^  \(ring/ { on = 0 }
        on && $1 + 0 >= 1 && $1 + 0 <= 8 {
            print $1, $4 >> (dir "/dp_pred.dat"); print $1, $8 >> (dir "/ddp_pred.dat") }' "$TMP/pred"
    if [ -s "$TMP/ddp_pred.dat" ]; then
        echo "devices dp_predicted_samples_per_s ddp_predicted_samples_per_s" >"$OUT/predicted.txt"
        paste -d' ' "$TMP/dp_pred.dat" "$TMP/ddp_pred.dat" | awk '{ print $1, $2, $4 }' >>"$OUT/predicted.txt"
        echo "sweep: wrote $OUT/predicted.txt" >&2
    fi
fi

[ $PLOT = yes ] || return 0
# the axis reaches the predicted curve's end (8 devices) when there is one
XMAX=$MAXDEV
[ -s "$TMP/ddp_pred.dat" ] && [ "$XMAX" -lt 8 ] && XMAX=8
plots_tp=
plots_eff=
for m in $MODES; do
    [ -s "$TMP/$m.dat" ] || continue
    sep=${plots_tp:+, }
    # the error bars are the -r runs' 95% intervals (0 wide for one run)
    style="yerrorlines lw 2 pt 7"
    [ "$m" = single ] && style="yerrorbars pt 9 ps 2"
    plots_tp="$plots_tp$sep'$TMP/$m.dat' using 1:2:4 with $style title '$m'"
    plots_eff="$plots_eff$sep'$TMP/$m.dat' using 1:(\$3*100):(\$5*100) with $style title '$m'"
    if [ -s "$TMP/${m}_pred.dat" ]; then
        plots_tp="$plots_tp, '$TMP/${m}_pred.dat' using 1:2 with lines dt 3 lw 2 title '$m predicted'"
    fi
done
single_tp=$(cat "$TMP/single_tp")
ideal_tp=
# the ideal line needs single's throughput: devices x single
[ "$single_tp" != 0.000 ] && ideal_tp=", $single_tp*x with lines dt 2 lc rgb 'gray' title 'ideal (devices x single)'"
backend=$(awk -F, 'NR == 2 { print $2 }' "$CSV")
scale="strong scaling: global batch $(awk -F, -v c="$(col batch)" 'NR == 2 { print $c }' "$CSV")"
[ "$kind" = weak ] && scale="weak scaling: $ROWS rows per device"
eff_plot="plot $plots_eff, 100 with lines dt 2 lc rgb 'gray' title 'ideal'"
if [ -z "$ideal_tp" ]; then
    echo "sweep: no single run, so no efficiency chart (add single to -M)" >&2
    eff_plot="unset output"
fi
gnuplot <<EOF
set terminal svg size 800,480 dynamic enhanced font 'sans,12'
set key top left
set grid
set xlabel 'devices'
set xrange [0.5:$XMAX.5]
set xtics 1
set output '$OUT/throughput.svg'
set title "$MODEL on $backend: throughput ($scale)"
set ylabel 'samples/s'
set yrange [0:*]
set offsets 0, 0, graph 0.1, 0
plot $plots_tp$ideal_tp
set output '$OUT/efficiency.svg'
set title "$MODEL on $backend: scaling efficiency against single ($scale)"
set ylabel 'efficiency (%)'
set key bottom left
$eff_plot
EOF
[ -n "$ideal_tp" ] || rm -f "$OUT/efficiency.svg"
echo "sweep: wrote the charts in $OUT" >&2
}

if [ "$SCALING" = both ]; then
    base=$OUT
    sweep strong "$base/strong" "$@"
    sweep weak "$base/weak" "$@"
else
    sweep "$SCALING" "$OUT" "$@"
fi
