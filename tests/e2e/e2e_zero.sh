#!/bin/sh
# tests/e2e/e2e_zero.sh: DDP's ZeRO stages from the command line: --mem-limit
# refuses plain DDP (exit 2, one line, what each stage would need) where
# ZeRO-3 fits and trains within it; compare --zero 1,2,3 puts a column per
# stage beside ddp, each agreeing with single; ZeRO-3's phase table shows the
# all-gathers it waited for; --predict models each stage and, under
# --mem-limit, the crossover.  Usage: sh tests/e2e/e2e_zero.sh ./ddpbench
E2E=e2e_zero
. "$(dirname "$0")/lib.sh"

# a deep narrow model: ZeRO-3 holds 1/4 of it and two layers, DDP all of it
M="--backend cpu --layers 64,256,256,256,256,256,256,10 --samples 512 --batch 64 --steps 4 \
   --gpus 0,1,2,3"

# DDP cannot fit 3 MiB per device; ZeRO-3 can, and its measured peak is within
expect_error "--mem-limit 3.0 MiB: ddp needs at least" $M --mode ddp --mem-limit 3M
grep -qF -- "--zero 3 needs" "$T/err" && ok || ko "the refusal does not say what ZeRO-3 needs: $(cat "$T/err")"
if "$BIN" $M --mode ddp --zero 3 --mem-limit 3M --json --quiet >"$T/z3.json" 2>"$T/err"; then
    python3 - "$T/z3.json" <<'EOF' && ok || ko "--zero 3 --mem-limit 3M: peak above the limit"
import json, sys
d = json.load(open(sys.argv[1]))
peak = d["mem_peak_bytes_max"]
print("e2e_zero: --zero 3 within --mem-limit 3M: peak %.2f MiB" % (peak / 1048576))
sys.exit(0 if 0 < peak <= 3 * 1048576 and d["config"]["zero"] == 3 else 1)
EOF
else
    ko "--zero 3 --mem-limit 3M did not train: $(cat "$T/err")"
fi
expect_error "--mem-limit: must be more than 0 bytes" $M --mode ddp --mem-limit 0
expect_error "--zero: a list of stages is for --mode compare" $M --mode ddp --zero 1,3
expect_error "--zero with --mode compare: not with --report" $M --zero 2 --report "$T/p.html"

# compare: a column per stage, every one agreeing with single
if "$BIN" $M --zero 1,2,3 >"$T/cmp" 2>"$T/err"; then
    grep -q "ZeRO stage 1, 2, 3 beside ddp" "$T/cmp" && ok || ko "compare heading: $(head -3 "$T/cmp")"
    for z in 1 2 3; do
        grep -q "parameters: zero-$z vs single agree" "$T/cmp" && ok ||
            ko "compare --zero: zero-$z does not agree: $(cat "$T/cmp")"
    done
    grep -q "^    gradients " "$T/cmp" && ok || ko "compare --zero: no gradients row"
else
    ko "compare --zero 1,2,3: $(cat "$T/err")"
fi

# ZeRO-3's own table: the gathers it waited for; the gradients reduce-scattered per layer
if "$BIN" $M --mode ddp --zero 3 >"$T/z3" 2>"$T/err"; then
    grep -q "^    all-gather wait " "$T/z3" && ok || ko "no all-gather wait row: $(cat "$T/z3")"
    grep -q "reduce-scatter per layer (ZeRO-3" "$T/z3" && ok || ko "no per-layer reduce-scatter table"
    grep -q "ZeRO-3: optimizer state, gradients and parameters sharded" "$T/z3" && ok ||
        ko "the heading does not name ZeRO-3"
else
    ko "ddp --zero 3: $(cat "$T/err")"
fi

# --predict: each stage's bytes (3(k-1)/k for ZeRO-3) and the crossover
if "$BIN" $M --mode ddp --predict --mem-limit 3M --zero 3 --max-bytes 1M >"$T/pred" 2>"$T/err"; then
    grep -q "ZeRO stages (--predict)" "$T/pred" && ok || ko "--predict: no ZeRO table"
    grep -q "crossover: from .* parameters a model fits ZeRO-3 and not DDP (this one among them)" \
        "$T/pred" && ok || ko "--predict: no crossover: $(tail -5 "$T/pred")"
else
    ko "--predict --zero 3: $(cat "$T/err")"
fi

# A rank that stalls in a sharded run: its peers' timeout names the
# collective once and what it moved ("all-gather of layer 1", never "all-gather
# of all-gather of layer 1").
for z in 1 3; do
    DDPBENCH_E2E_TAG=$TAG DDPBENCH_FAULT=stall:1:2 "$BIN" $M --mode ddp --zero $z --timeout 1 --quiet >/dev/null 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "^ddpbench: error: rank [0-9] (device [0-9]): timed out in [a-z-]* of \(layer\|bucket\) [0-9]*: rank 1 did not arrive within 1 s" "$T/err" &&
        ! grep -q " of [a-z-]* of " "$T/err" && ok ||
        ko "--zero $z, a stalled rank: exit $rc: $(cat "$T/err")"
done

e2e_finish
