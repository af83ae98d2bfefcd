#!/bin/sh
# tests/e2e/e2e_dp.sh: --mode dp end to end: a run, an injected device fault
# (exit 1, a message naming the device, no hang) and bad --gpus lists (exit 2).
# Usage: sh tests/e2e/e2e_dp.sh ./ddpbench
E2E=e2e_dp
. "$(dirname "$0")/lib.sh"
SMALL="--backend cpu --layers 16,32,4 --samples 256 --batch 30 --steps 6 --quiet"

fail() {
    ko "$*"
    sed 's/^/    /' "$T/out" "$T/err"
}

# run EXPECTED_STATUS ARGS...: run ddpbench (60 s at most) and check its exit status.
run() {
    want=$1
    shift
    timeout 60 "$BIN" "$@" >"$T/out" 2>"$T/err"
    got=$?
    if [ "$got" -ne "$want" ]; then
        fail "ddpbench $* exited $got, expected $want"
        return 1
    fi
    ok
    return 0
}

# ---- a run on 1, 2 and 3 devices (3: batch 30 splits 10,10,10; 4: 8,8,8,6)
for g in 0 0,1 0,1,2 0,1,2,3; do
    n=$(echo "$g" | tr ',' '\n' | wc -l)
    if run 0 --mode dp --gpus "$g" $SMALL; then
        grep -q "result: dp on cpu, $n device" "$T/out" || fail "--gpus $g: no dp result line"
        # the phase table has one column per device
        cols=$(grep '^    step (wall)' "$T/out" | awk '{ print NF - 2 }')
        [ "$cols" = "$n" ] || fail "--gpus $g: $cols device columns, expected $n"
    fi
done

# ---- dp and single agree on the final loss (same batch, same data order)
if run 0 --mode single $SMALL; then
    single=$(sed -n 's/^  final loss *//p' "$T/out")
    if run 0 --mode dp --gpus 0,1,2 $SMALL; then
        dp=$(sed -n 's/^  final loss *//p' "$T/out")
        awk -v a="$single" -v b="$dp" \
            'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * (1 + a)) }' ||
            fail "final loss: single $single vs dp $dp"
    fi
fi

# ---- an injected device error: exit 1, the device named, promptly
if DDPBENCH_FAULT=error:1:3 run 1 --mode dp --gpus 0,1,2 $SMALL; then
    grep -q "^ddpbench: error: device 1: injected fault at step 3" "$T/err" ||
        fail "fault: message does not name device 1 and step 3"
fi
if DDPBENCH_FAULT=error:0:0 run 1 --mode dp --gpus 0,1 $SMALL; then
    grep -q "^ddpbench: error: device 0: injected fault at step 0" "$T/err" ||
        fail "fault on device 0: message"
fi

# ---- bad --gpus lists: exit 2 with one error line naming the option
for bad in "0,0" "" "-1" "0,-1" "a" "0,,1"; do
    if run 2 --mode dp --gpus "$bad" $SMALL; then
        grep -q "^ddpbench: error: --gpus" "$T/err" ||
            fail "--gpus '$bad': message does not name --gpus"
        [ "$(wc -l <"$T/err")" -eq 1 ] || fail "--gpus '$bad': more than one line on stderr"
    fi
done

e2e_finish
