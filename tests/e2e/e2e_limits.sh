#!/bin/sh
# tests/e2e/e2e_limits.sh: nothing lost, nothing hung, nothing silently
# accepted, as an adversarial user would try it:
#  - outputs: a device (mknod), a symbolic link or a FIFO as --save,
#    --checkpoint or --trace is refused and left as it was; a rename that
#    will fail (another user's file in a sticky directory) is refused before
#    training; a live writer's temporary (its lock held) survives another
#    write of the same name while a dead one's goes; clashing paths; one
#    failing output (stdout on /dev/full or a pipe whose reader left,
#    --trace on a full disk) keeps the others;
#  - hangs: a FIFO as any input; ulimit -v (OpenBLAS's spin, the CUDA
#    libraries); --steps 2^40 runs in bounded memory and /dev/shm; a
#    10^6-column CSV in bounded memory and time;
#  - divergence: a NaN loss stops the run naming the step and keeps a good
#    --save; NaN --init/--resume data and an edited checkpoint are refused;
#  - messages: a newline or ESC in a path, control codes in every
#    __metadata__ entry and baseline string, a subnormal or huge number in
#    every baseline figure, --timeout 0.001, DP out of
#    memory, --help into /dev/full, --warmup-steps past the run;
#  - signals: SIGINT/SIGTERM stop every mode with 130/143 and a line; an
#    inherited ignore is honoured; a SIGALRM from outside ends it as unhandled.
# Cases that need root (mknod, setpriv, mount) say so and skip without it.
# Usage: sh tests/e2e/e2e_limits.sh ./ddpbench
E2E=e2e_limits
. "$(dirname "$0")/lib.sh"
KEEP="" # pids of helpers we started (flock holders), killed on the way out
MNT=""
e2e_on_exit() {
    for p in $KEEP $(leftovers); do kill -KILL "$p" 2>/dev/null; done
    [ -n "$MNT" ] && umount "$MNT" 2>/dev/null
}
RUN="--mode single --backend cpu --layers 6,5,3 --act relu --loss ce --samples 60 --batch 6 --optim adam --lr 0.01 --quiet"
ROOT=$([ "$(id -u)" = 0 ] && echo yes)
skip() { echo "$E2E: skipped: $*"; }
# expect_exit RC WORDS CMD...: exit status RC and WORDS on stderr
expect_exit() {
    want=$1 words=$2
    shift 2
    "$@" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq "$want" ] && grep -qF -- "$words" "$T/err" && ok ||
        ko "$*: exit $rc (expected $want), stderr: $(head -c 400 "$T/err")"
}

"$BIN" $RUN --steps 4 --save "$T/good.st" --checkpoint "$T/ck.st" >/dev/null 2>&1 || ko "a plain run"

# ---- outputs: what may be replaced ---------------------------------------------
if [ -n "$ROOT" ] && mknod "$T/null" c 1 3 2>/dev/null; then
    for opt in --save --checkpoint --trace; do
        expect_error "$opt $T/null: is a character device, not a regular file" $RUN --steps 2 $opt "$T/null"
        [ -c "$T/null" ] && ok || ko "$opt: the device node was replaced"
    done
else
    skip "the device-node target (mknod needs root)"
fi
printf 'keep me' >"$T/target"
ln -s "$T/target" "$T/link.st"
expect_error "--save $T/link.st: is a symbolic link" $RUN --steps 2 --save "$T/link.st"
[ -L "$T/link.st" ] && [ "$(cat "$T/target")" = "keep me" ] && ok || ko "the link or its target changed"
mkfifo "$T/fifo"
expect_error "--trace $T/fifo: is a FIFO" $RUN --steps 2 --trace "$T/fifo"

# A rename the kernel will refuse, found up front: root's file in a sticky
# directory, written by another user.
if [ -n "$ROOT" ] && command -v setpriv >/dev/null; then
    mkdir "$T/sticky" && chmod 1777 "$T/sticky" && chmod 755 "$T"
    printf 'roots' >"$T/sticky/w.st"
    setpriv --reuid=65534 --regid=65534 --clear-groups "$BIN" $RUN --steps 2 \
        --save "$T/sticky/w.st" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q "sticky directory" "$T/err" && ok ||
        ko "sticky rename: exit $rc: $(cat "$T/err")"
    [ "$(cat "$T/sticky/w.st")" = roots ] && ok || ko "sticky: the file changed"
    chmod 700 "$T"
else
    skip "the sticky-directory rename (setpriv needs root)"
fi

# Temporaries: a dead writer's goes, a live writer's (its lock held, under
# a PID this namespace does not have, as from another container) stays.
dead="$T/.w2.st.tmp.999999999.AAAAAA" live="$T/.w2.st.tmp.999999998.BBBBBB"
: >"$dead"
: >"$live"
flock "$live" sleep 60 &
KEEP="$KEEP $!"
sleep 0.3
"$BIN" $RUN --steps 2 --save "$T/w2.st" >/dev/null 2>&1 || ko "write beside temporaries"
[ ! -e "$dead" ] && ok || ko "the dead writer's temporary survived"
[ -e "$live" ] && ok || ko "the live writer's temporary was deleted"

# Clashing paths: refused before anything runs, whatever the spelling.
expect_error "are the same file" $RUN --steps 2 --checkpoint "$T/same.st" --save "$T/./same.st"
expect_error "are the same file" $RUN --steps 2 --checkpoint "$T/ck.st" --trace "$T/ck.st"
# a --hardware or --workload profile is an input too (a shipped name is not a file)
cp "$(dirname "$0")/../../app/predict/hardware/8x-a100-sxm.json" "$T/hw.json"
for o in report trace save checkpoint; do
    expect_error "--$o $T/hw.json and --hardware $T/hw.json are the same file" $RUN --steps 2 \
        --hardware "$T/hw.json" --$o "$T/hw.json"
done
grep -q '"name"' "$T/hw.json" && ok || ko "--hardware's profile was overwritten"
printf 'a,b,c\n1,2,0\n3,4,1\n5,6,0\n' >"$T/d.csv"
ln "$T/d.csv" "$T/hard.csv"
expect_error "--save $T/hard.csv and --data $T/d.csv are the same file" --mode single --backend cpu \
    --layers 2,3 --loss ce --data "$T/d.csv" --batch 2 --steps 1 --save "$T/hard.csv"
# Outputs that do not exist yet behind a bind mount: one folder, two paths.
if [ -n "$ROOT" ] && mkdir "$T/A" "$T/B" && mount --bind "$T/A" "$T/B" 2>/dev/null; then
    MNT="$T/B"
    expect_error "--save $T/A/w.st and --trace $T/B/w.st are the same file" $RUN --steps 2 \
        --save "$T/A/w.st" --trace "$T/B/w.st"
    expect_error "--save $T/B/t.x.npy and --emit-pytorch $T/A/t.x.npy are the same file" $RUN \
        --steps 2 --emit-pytorch "$T/A/t.py" --save "$T/B/t.x.npy"
    [ -z "$(ls -A "$T/A")" ] && ok || ko "bind mount: files written: $(ls -A "$T/A")"
    umount "$MNT" && MNT=""
else
    skip "outputs behind a bind mount (mount --bind needs root)"
fi
"$BIN" $RUN --steps 6 --resume "$T/ck.st" --checkpoint "$T/ck.st" >/dev/null 2>&1 && ok ||
    ko "--resume and --checkpoint may share a file"

# One output failing costs none of the others.
"$BIN" $RUN --steps 2 --save "$T/kept.st" >/dev/full 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && [ -s "$T/kept.st" ] && grep -q "stdout: write failed.*written: --save" "$T/err" && ok ||
    ko "stdout on /dev/full: exit $rc, save $(ls "$T/kept.st" 2>&1): $(cat "$T/err")"
# A reader that left (| grep -m1): the pipe's reader is gone before the run
# writes, so every write to stdout fails; no process dies of SIGPIPE (a
# DDP rank included), the files are written, exit 1 with the line.
closed_stdout() {
    rm -f "$T/pipe" && mkfifo "$T/pipe"
    (exec 3<"$T/pipe") &
    rd=$!
    exec 4>"$T/pipe" # returns once the reader opened it
    wait $rd         # and closed it
    "$@" >&4 4>&-
    rc=$?
    exec 4>&-
    return $rc
}
for m in single dp ddp compare; do
    rm -f "$T/kept.st" "$T/kept.json"
    g="--gpus 0,1" sv="--save $T/kept.st" w="--save $T/kept.st, --trace $T/kept.json"
    [ $m = single ] && g=""
    [ $m = compare ] && sv="" w="--trace $T/kept.json"
    closed_stdout "$BIN" $RUN --mode $m $g --steps 3 --log-every 1 $sv --trace "$T/kept.json" \
        2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && [ -s "$T/kept.json" ] && { [ -z "$sv" ] || [ -s "$T/kept.st" ]; } &&
        grep -qF "ddpbench: error: stdout: write failed: Broken pipe (written: $w)" "$T/err" &&
        [ "$(wc -l <"$T/err")" -eq 1 ] && ok ||
        ko "$m, stdout's reader gone: exit $rc, files $(ls "$T" | grep kept): $(cat "$T/err")"
done
if [ -n "$ROOT" ] && mkdir "$T/full" && mount -t tmpfs -o size=8k none "$T/full" 2>/dev/null; then
    MNT="$T/full"
    rm -f "$T/kept.st"
    "$BIN" $RUN --steps 30 --save "$T/kept.st" --trace "$T/full/t.json" >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && [ -s "$T/kept.st" ] && grep -q "No space left.*written: --save" "$T/err" &&
        [ -z "$(ls -A "$T/full")" ] && ok ||
        ko "--trace on a full disk: exit $rc, save $(ls "$T/kept.st" 2>&1): $(cat "$T/err") $(ls -A "$T/full")"
    umount "$MNT" && MNT=""
else
    skip "--trace on a full disk (mounting a tmpfs needs root)"
fi

# ---- hangs ------------------------------------------------------------------------
for what in "--data $T/fifo" "--init $T/fifo" "--resume $T/fifo" "--baseline $T/fifo"; do
    timeout 10 "$BIN" $RUN --steps 2 $what >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 2 ] && grep -q "is a FIFO, not a regular file" "$T/err" && ok ||
        ko "$what: exit $rc (124: it blocked): $(cat "$T/err")"
done
head -c 96 /dev/zero >"$T/zeros"
mknpy "$T/x.npy" '<f4' '(4, 6)' False "$T/zeros"
timeout 10 "$BIN" --mode single --backend cpu --layers 6,3 --loss mse --data "$T/x.npy" \
    --targets "$T/fifo" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 2 ] && grep -q "fifo: is a FIFO" "$T/err" && ok || ko "--targets FIFO: exit $rc: $(cat "$T/err")"

# ulimit -v: a clear failure where OpenBLAS's buffer does not fit, a run
# at about 1 GB, and a CPU run far below what the CUDA libraries would take.
(ulimit -v 100000 && exec timeout -k 5 30 "$BIN" $RUN --steps 3) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "address-space limit (ulimit -v 100000)" "$T/err" && ok ||
    ko "ulimit -v 100000: exit $rc (124/137: it hung): $(cat "$T/err")"
for mode in "single" "dp --gpus 0,1"; do
    (ulimit -v 1000000 && exec timeout -k 5 60 "$BIN" --mode $mode --backend auto --steps 6 --quiet) \
        >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 0 ] && ok || ko "ulimit -v 1000000, $mode: exit $rc: $(cat "$T/err")"
done
for backend in cpu auto; do
    (ulimit -v 400000 && exec timeout -k 5 60 "$BIN" $RUN --backend $backend --steps 3) >"$T/out" 2>"$T/err"
    rc=$?
    [ $rc -eq 0 ] && ok || ko "ulimit -v 400000, --backend $backend: exit $rc: $(cat "$T/err")"
done

# --steps 2^40: runs, with its step statistics and DDP's segment bounded.
for mode in single ddp; do
    env --default-signal=INT "$BIN" --mode $mode --gpus "$([ $mode = ddp ] && echo 0,1 || echo 0)" \
        --backend cpu --layers 4,4 --loss mse --samples 16 --batch 4 --steps 1099511627776 --quiet \
        >"$T/out" 2>"$T/err" &
    pid=$!
    # two seconds of steps, counted from when it can take the signal (and,
    # in ddp, has its segment), not from its start
    catching $pid 15 || ko "--steps 2^40 $mode: no SIGTERM handler after 20 s"
    i=0
    while [ $mode = ddp ] && ! grep -q /dev/shm/ddpbench /proc/$pid/maps 2>/dev/null && [ $i -lt 200 ]; do
        sleep 0.1
        i=$((i + 1))
    done
    sleep 2
    rss=$(awk '/^VmRSS/ { print $2 }' /proc/$pid/status 2>/dev/null)
    shm=$(awk '/\/dev\/shm\/ddpbench/ { split($1, a, "-"); s += ("0x" a[2]) - ("0x" a[1]) } END { print s + 0 }' \
        /proc/$pid/maps 2>/dev/null)
    kill -TERM $pid
    wait $pid
    rc=$?
    [ $rc -eq 143 ] && grep -q "stopped: interrupted by SIGTERM" "$T/err" && ok ||
        ko "--steps 2^40 $mode: exit $rc: $(cat "$T/err")"
    [ -n "$rss" ] && [ "$rss" -lt 200000 ] && ok || ko "--steps 2^40 $mode: RSS ${rss:-?} kB"
    [ "$mode" = single ] || { [ "$shm" -gt 0 ] && [ "$shm" -lt 67108864 ] && ok ||
        ko "--steps 2^40 ddp: the segment maps $shm bytes"; }
done

# A 10^6-column CSV (2 rows, 4 MB): loads and trains in bounded memory and time.
awk 'BEGIN { for (r = 0; r < 2; r++) { for (c = 0; c < 1000000; c++) printf "%s%d", c ? "," : "", (c + r) % 10; print "" } }' \
    >"$T/wide.csv"
t0=$(date +%s)
(ulimit -v 900000 && exec timeout -k 5 60 "$BIN" --mode single --backend cpu --data "$T/wide.csv" \
    --layers 999999,1 --loss mse --batch 1 --steps 1 --quiet) >"$T/out" 2>"$T/err"
rc=$?
secs=$(($(date +%s) - t0))
[ $rc -eq 0 ] && [ $secs -lt 30 ] && ok || ko "10^6-column CSV: exit $rc in $secs s: $(cat "$T/err")"

# ---- divergence ------------------------------------------------------------------
cp "$T/good.st" "$T/save.st"
for mode in single "dp --gpus 0,1" "ddp --gpus 0,1"; do
    expect_exit 1 "the loss is nan: the training diverged" "$BIN" $RUN --mode $mode --optim sgd --lr 1e6 \
        --steps 6 --save "$T/save.st"
    cmp -s "$T/good.st" "$T/save.st" && ok || ko "$mode: the good --save was overwritten"
done
expect_exit 1 "--mode compare: the single run: step" "$BIN" $RUN --mode compare --gpus 0,1 --optim sgd \
    --lr 1e6 --steps 6
"$BIN" $RUN --optim sgd --lr 1e6 --steps 6 --allow-nonfinite --json --save "$T/nan.st" >"$T/out" 2>&1 &&
    grep -q '"final_loss":null,"diverged":true' "$T/out" && [ -s "$T/nan.st" ] && ok ||
    ko "--allow-nonfinite: $(cat "$T/out")"
# a NaN in the data of a weights file and of a checkpoint's optimizer state
hlen() { od -An -t u8 -N8 "$1" | tr -d ' '; }
nan_at() { printf '\000\000\300\177' | dd of="$1" bs=1 seek="$2" conv=notrunc 2>/dev/null; }
cp "$T/good.st" "$T/nan_init.st" && nan_at "$T/nan_init.st" $((8 + $(hlen "$T/nan_init.st")))
expect_error "0.weight [0, 0] is nan: the file holds values that are not finite" $RUN --init "$T/nan_init.st"
cp "$T/ck.st" "$T/nan_ck.st" && nan_at "$T/nan_ck.st" $(($(wc -c <"$T/nan_ck.st") - 4))
expect_error "optim.exp_avg_sq.2.bias [2] is nan" $RUN --steps 8 --resume "$T/nan_ck.st"
# an edited position: the checksum catches it
cp "$T/ck.st" "$T/edit_ck.st"
at=$(grep -boa '"optim_step":"6"' "$T/edit_ck.st" | cut -d: -f1)
printf 5 | dd of="$T/edit_ck.st" bs=1 seek=$((at + 14)) conv=notrunc 2>/dev/null
expect_error "do not match its checksum" $RUN --steps 8 --resume "$T/edit_ck.st"
# ... and --init, the checksum deleted with the edit
python3 - "$T/edit_ck.st" "$T/nosum_ck.st" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
del h["__metadata__"]["checksum"]
j = json.dumps(h).encode()
open(sys.argv[2], "wb").write(struct.pack("<Q", len(j)) + j + b[8 + n:])
PY
expect_error "--init $T/nosum_ck.st: __metadata__ has no 'checksum'" $RUN --init "$T/nosum_ck.st"
cp "$T/good.st" "$T/layers.st"
at=$(grep -boa '"layers":"6,5,3"' "$T/layers.st" | cut -d: -f1)
printf 4 | dd of="$T/layers.st" bs=1 seek=$((at + 14)) conv=notrunc 2>/dev/null
expect_error "its __metadata__ says layers '6,5,4', but its tensors are those of 6,5,3" $RUN --init "$T/layers.st"
cp "$T/good.st" "$T/act.st"
at=$(grep -boa '"act":"relu"' "$T/act.st" | cut -d: -f1)
printf x | dd of="$T/act.st" bs=1 seek=$((at + 10)) conv=notrunc 2>/dev/null
expect_error "its __metadata__ act 'relx' is none of none, relu, tanh, sigmoid, gelu" $RUN --init "$T/act.st"

# ---- messages ----------------------------------------------------------------------
nl="$T/a
b.csv"
printf '1,2,0\n' >"$nl"
expect_error 'a\nb.csv' --mode single --backend cpu --layers 2,2 --loss mse --data "$nl" \
    --target-cols 3
expect_error '\x1b[31m' $RUN --save "$T/$(printf '\033[31m')/w.st"
grep -q "$(printf '\033')" "$T/err" && ko "a raw ESC reached the terminal" || ok
# Control codes planted in every __metadata__ entry of a weights file and of
# a checkpoint (--init, --resume), in every string of a --baseline and of a
# --hardware and a --workload profile, one at a time: whatever is printed
# shows them escaped, one line each.
"$BIN" $RUN --steps 3 --json >"$T/b.json" 2>/dev/null || ko "the baseline run"
P="$(dirname "$0")/../../app/predict"
cp "$P/hardware/2x-h100-pcie.json" "$T/hw.json" && cp "$P/workload/gpt2-small.json" "$T/wl.json" ||
    ko "the shipped profiles"
python3 - "$BIN" "$T" $RUN <<'PY' && ok || ko "a planted control code reached the terminal"
import json, struct, subprocess, sys
bin_, T, run = sys.argv[1], sys.argv[2], sys.argv[3:]
BAD = "relu\n\x1b[31mpwn\r\u009b"
def st(path):
    b = open(path, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]
def check(args, what):
    p = subprocess.run([bin_] + run + args, capture_output=True)
    out = p.stdout + p.stderr
    bad = [c for c in (b"\x1b", b"\r", b"\xc2\x9b") if c in out]
    lines = p.stderr.decode("utf-8", "replace").splitlines()
    if bad or any(not l.startswith("ddpbench: ") for l in lines):
        sys.exit("%s: %r" % (what, out[-300:]))
cases = [("good.st", ["--init"]), ("ck.st", ["--init", "--steps 8 --resume"])]
for name, uses in cases:
    h, data = st("%s/%s" % (T, name))
    for key in h["__metadata__"]:
        h2 = json.loads(json.dumps(h))
        h2["__metadata__"][key] = BAD
        j = json.dumps(h2).encode()
        open(T + "/planted.st", "wb").write(struct.pack("<Q", len(j)) + j + data)
        for u in uses:
            check(u.split() + [T + "/planted.st"], "%s %s: %s" % (u, name, key))
def strings(x, path):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from strings(v, path + [k])
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from strings(v, path + [i])
    elif isinstance(x, str):
        yield path
def planted(name, args):
    doc = json.load(open("%s/%s" % (T, name)))
    for path in list(strings(doc, [])):
        d2 = json.loads(json.dumps(doc))
        o = d2
        for k in path[:-1]:
            o = o[k]
        o[path[-1]] = BAD
        json.dump(d2, open(T + "/planted.json", "w"))
        check(args + [T + "/planted.json"], "%s %s: %s" % (args[-1], name, path))
planted("b.json", ["--steps", "3", "--baseline"])
planted("hw.json", ["--workload", "gpt2-small", "--hardware"])
planted("wl.json", ["--hardware", "2x-h100-pcie", "--workload"])
PY
# A subnormal, a huge and a huge negative number planted in every figure of
# a --baseline (one run, and --repeat 2), one at a time: refused (exit 2) or
# judged, never against infinity ("+inf%", "nan").
"$BIN" $RUN --steps 3 --repeat 2 --json >"$T/b2.json" 2>/dev/null || ko "the repeated baseline run"
python3 - "$BIN" "$T" $RUN <<'PY' && ok || ko "a planted figure was judged against infinity"
import json, re, subprocess, sys
bin_, T, run = sys.argv[1], sys.argv[2], sys.argv[3:]
def numbers(x, path):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from numbers(v, path + [k])
    elif isinstance(x, list):
        for i, v in enumerate(x):
            yield from numbers(v, path + [i])
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield path
bad = []
for name, args in (("b.json", []), ("b2.json", ["--repeat", "2"])):
    doc = json.load(open("%s/%s" % (T, name)))
    for path in list(numbers(doc, [])):
        if path[0] in ("schema_version", "config", "environment"):
            continue  # another configuration or machine: refused or warned, never judged
        for v in (5e-324, 1e308, -1e308):
            d2 = json.loads(json.dumps(doc))
            o = d2
            for k in path[:-1]:
                o = o[k]
            o[path[-1]] = v
            json.dump(d2, open(T + "/planted.json", "w"))
            p = subprocess.run([bin_] + run + ["--steps", "3", "--baseline", T + "/planted.json"] +
                               args, capture_output=True, text=True)
            out = p.stdout + p.stderr
            if p.returncode not in (0, 2, 3, 4) or re.search(r"\b(inf|nan)\b", out, re.I):
                bad.append("%s %s = %g: exit %d: %s" % (name, path, v, p.returncode, out[-200:]))
if bad:
    sys.exit("\n".join(bad[:5]))
PY
DDPBENCH_FAULT=stall:1:1 "$BIN" --mode ddp --gpus 0,1 --backend cpu --layers 4,4 --loss mse --samples 16 \
    --batch 4 --steps 4 --timeout 0.001 --quiet >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "did not arrive within 0.001 s" "$T/err" && ok || ko "--timeout 0.001: exit $rc: $(cat "$T/err")"
(ulimit -v 1000000 && exec timeout -k 5 30 "$BIN" --mode dp --gpus 0,1 --backend cpu --layers 20000,20000 \
    --loss mse --samples 4 --batch 2 --steps 1 --quiet) >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 1 ] && grep -q "out of host memory for the parameters (1600080000 bytes)" "$T/err" && ok ||
    ko "DP out of memory: exit $rc: $(cat "$T/err")"
for o in --help --version; do
    "$BIN" $o >/dev/full 2>"$T/err"
    rc=$?
    [ $rc -eq 1 ] && grep -q "stdout: write failed" "$T/err" && ok || ko "$o into /dev/full: exit $rc"
done
closed_stdout "$BIN" --help 2>"$T/err" && [ ! -s "$T/err" ] && ok ||
    ko "--help to a reader that left: exit $?: $(cat "$T/err")"
"$BIN" $(echo "$RUN" | sed 's/--quiet//') --steps 3 --warmup-steps 10 >/dev/null 2>"$T/err" &&
    grep -q "warmup-steps 10: the single run has 3 steps, so 2 are warm-up and 1 is timed" "$T/err" && ok ||
    ko "--warmup-steps past the run: $(cat "$T/err")"

# ---- signals -----------------------------------------------------------------------
LONG="--backend cpu --layers 16,64,4 --loss mse --samples 64 --batch 8 --steps 100000000 --quiet"
for mode in single dp ddp; do
    for sig in INT TERM; do
        env --default-signal=INT "$BIN" --mode $mode --gpus "$([ $mode = single ] && echo 0 || echo 0,1)" \
            $LONG >"$T/out" 2>"$T/err" &
        pid=$!
        catching $pid 15 || ko "$mode SIG$sig: no handler after 20 s"
        sleep 0.5 # into the training loop
        kill -$sig $pid
        wait $pid
        rc=$?
        want=$([ $sig = INT ] && echo 130 || echo 143)
        # one convention: every mode names the step it stopped after
        [ $rc -eq "$want" ] &&
            grep -q "^ddpbench: stopped: interrupted by SIG$sig after step [0-9]* of 100000000" \
                "$T/err" && ok ||
            ko "$mode SIG$sig: exit $rc: $(cat "$T/err")"
    done
done
# A SIGALRM from outside, no stop request before it: it ends the run as it
# would unhandled (142), with no line about a grace that never began.
"$BIN" --mode single $LONG >"$T/out" 2>"$T/err" &
pid=$!
catching $pid 14 || ko "outside SIGALRM: no SIGALRM handler after 20 s"
sleep 0.5
kill -ALRM $pid
i=0
while [ $i -lt 50 ] && [ "$(awk '/^State:/ { print $2 }' /proc/$pid/status 2>/dev/null)" != Z ] &&
    kill -0 $pid 2>/dev/null; do
    sleep 0.1
    i=$((i + 1))
done
kill -TERM $pid 2>/dev/null
wait $pid
rc=$?
[ $rc -eq 142 ] && [ ! -s "$T/err" ] && ok || ko "outside SIGALRM: exit $rc: $(cat "$T/err")"
# An inherited ignore is honoured (a background job of this script ignores
# SIGINT): the run goes on through a SIGINT, then stops at SIGTERM.  The
# SIGINT goes once the run has its handlers (before, the inherited ignore
# takes it whatever ddpbench would do), and SIGTERM ends it by its handler's
# stopped line (the default action would give 143 too).
for mode in single ddp; do
    "$BIN" --mode $mode --gpus "$([ $mode = single ] && echo 0 || echo 0,1)" $LONG >"$T/out" 2>"$T/err" &
    pid=$!
    catching $pid 15 || ko "$mode with SIGINT ignored: no SIGTERM handler after 20 s"
    sleep 0.5 # into the training loop
    kill -INT $pid
    sleep 0.5
    kill -0 $pid 2>/dev/null && alive=yes || alive=no
    kill -TERM $pid 2>/dev/null
    wait $pid
    rc=$?
    [ $alive = yes ] && [ $rc -eq 143 ] && grep -q "^ddpbench: stopped: interrupted by SIGTERM" "$T/err" && ok ||
        ko "$mode with SIGINT ignored: alive after it: $alive, exit $rc: $(cat "$T/err")"
done

e2e_finish
