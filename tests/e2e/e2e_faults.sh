#!/bin/sh
# tests/e2e/e2e_faults.sh: faults a user's machine and files can hand the
# binary, each found once by an adversarial pass and kept fixed here:
# --emit-pytorch's set of five files written as one (a bad fourth file leaves
# the old set, names that file, never --save); a file name that would be code
# in the script; the stale-temporary cleaner leaving a user's look-alike
# files; SIGXFSZ under ulimit -f; a small stack; OpenBLAS's thread-start
# failure; a graceful stop of DDP during a checkpoint write; the memory a
# run needs against a planted limit; signals under mpirun; resume on other
# data; the small ones (escaped scenario names, worker ids, CR-only CSV).
# Usage: sh tests/e2e/e2e_faults.sh ./ddpbench
E2E=e2e_faults
. "$(dirname "$0")/lib.sh"
BIN=$(cd "$(dirname "$BIN")" && pwd)/$(basename "$BIN")
TINY="--backend cpu --mode single --model seed-linear --steps 3 --quiet"

# ---- --emit-pytorch: the set is checked before anything is written, names
# the file at fault, and a failure leaves the old set as it was
mkdir "$T/em" && cd "$T/em" || exit 1
echo OLD >out.x.npy
mkdir out.order.npy
expect_error "out.order.npy: is a directory" $TINY --emit-pytorch out.py
[ "$(cat out.x.npy)" = OLD ] && [ ! -e out.init.safetensors ] && [ ! -e out.y.npy ] &&
    [ ! -e out.py ] && ok || ko "emit-pytorch: a bad fourth file left a half-written set: $(ls)"
grep -q -- "--save" "$T/err" && ko "emit-pytorch: the error names --save: $(cat "$T/err")" || ok
rmdir out.order.npy
ln -s nowhere out.y.npy
expect_error "out.y.npy: is a symbolic link" $TINY --emit-pytorch out.py
[ "$(cat out.x.npy)" = OLD ] && [ ! -e out.init.safetensors ] && ok ||
    ko "emit-pytorch: a link as the third file left a half-written set: $(ls)"
rm out.y.npy
mkdir out.init.safetensors
expect_error "out.init.safetensors: is a directory" $TINY --emit-pytorch out.py
grep -q -- "--save" "$T/err" && ko "emit-pytorch: the error names --save: $(cat "$T/err")" || ok
rmdir out.init.safetensors
"$BIN" $TINY --emit-pytorch out.py >/dev/null 2>&1 && [ -s out.py ] && [ -s out.order.npy ] &&
    [ "$(cat out.x.npy)" != OLD ] && ok || ko "emit-pytorch: the set was not written"
[ -z "$(ls -A | grep '^\.')" ] && ok || ko "emit-pytorch: temporaries left: $(ls -A)"
cd "$T" || exit 1

# ---- a file name is data in the script, never code
mkdir "$T/inj" && cd "$T/inj" || exit 1
name=$(printf 'q"+str(__import__("os").system("touch PWNED"))+"\\\\\ncaf\303\251\377.py')
"$BIN" $TINY --emit-pytorch "$name" >/dev/null 2>"$T/err" || ko "emit-pytorch injection name: $(cat "$T/err")"
for f in ./*.py; do
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1], "rb").read())' "$f" 2>"$T/err" && ok ||
        ko "emit-pytorch: $f does not parse: $(tail -1 "$T/err")"
    # the job's constants run as they would on import (the body needs torch)
    python3 - "$f" <<'PY' 2>"$T/err" && ok || ko "emit-pytorch: the file names are not the files: $(tail -2 "$T/err")"
import os, sys
src = open(sys.argv[1], "rb").read().decode()
job = src[src.index("# ---- the job"):src.index("# ---- everything below")]
ns = {"HERE": "."}
exec(compile(job, sys.argv[1], "exec"), ns)
for k in ("INIT_FILE", "X_FILE", "Y_FILE", "ORDER_FILE"):
    assert os.path.exists(os.fsencode(ns[k])), (k, ns[k])
PY
done
[ -e PWNED ] && ko "emit-pytorch: a file name ran as code" || ok
cd "$T" || exit 1

# ---- --emit-pytorch's command lines can be pasted: the run command it prints
# and the docstring's (the name as given, quotes and backslashes and all) run
# that command in sh and nothing else.  Pasted with python3 and ddpbench as
# shell functions that write down their arguments.
mkdir "$T/paste" && cd "$T/paste" || exit 1
q="'"
for name in '$(touch X).py' "a \"b\\q${q}d \`touch Y\` \$HOME;*.py"; do
    E="--backend cpu --mode single --model seed-linear --steps 3 --emit-pytorch"
    # shellcheck disable=SC2086
    "$BIN" $E "$name" >"$T/out" 2>"$T/err" || ko "emit-pytorch $name: $(cat "$T/err")"
    line=$(sed -n 's/^ddpbench: wrote .* beside it: //p' "$T/out")
    sh -c 'python3() { printf "%s\n" "$@" >"$0"; }; '"$line" "$T/args" 2>"$T/err"
    [ "$(cat "$T/args" 2>/dev/null)" = "$name" ] && ok ||
        ko "emit-pytorch $name: the printed line '$line' pasted ran python3 $(cat "$T/args" 2>/dev/null)"
    python3 - "$name" >"$T/doc" 2>"$T/err" <<'PY' && ok || ko "emit-pytorch $name: the docstring: $(tail -1 "$T/err")"
import ast, sys
src = open(sys.argv[1], "rb").read().decode("utf-8", "surrogateescape")
doc = ast.parse(src).body[0].value.value
run = doc.split("\n")[1].strip()
py = [l.strip()[len("python3 "):] for l in doc.split("\n") if l.strip().startswith("python3 ")][0]
print(run)
print(py)
# shown as given: the source between the quotes is the value itself
body = src[src.index('r"""') + 4:]
assert body.startswith(doc), "the docstring is not shown as it is"
PY
    run=$(sed -n 1p "$T/doc") py=$(sed -n 2p "$T/doc")
    sh -c 'ddpbench() { printf "%s\n" "$@" >"$0"; }; '"$run" "$T/args" 2>"$T/err"
    # shellcheck disable=SC2086
    [ "$(cat "$T/args" 2>/dev/null)" = "$(printf '%s\n' $E "$name")" ] && ok ||
        ko "emit-pytorch $name: the docstring's '$run' pasted ran ddpbench $(cat "$T/args" 2>/dev/null)"
    sh -c 'python3() { printf "%s\n" "$@" >"$0"; }; python3 '"$py" "$T/args" 2>"$T/err"
    [ "$(cat "$T/args" 2>/dev/null)" = "$name" ] && ok ||
        ko "emit-pytorch $name: the docstring's 'python3 $py' pasted ran python3 $(cat "$T/args" 2>/dev/null)"
done
[ -e X ] || [ -e Y ] && ko "emit-pytorch: a pasted line ran a command in the name: $(ls)" || ok
cd "$T" || exit 1

# ---- the stale-temporary cleaner takes only its own names
mkdir "$T/st" && cd "$T/st" || exit 1
echo notes >.w.st.tmp.notes
echo b >.w.st.new.bak
touch -d '2 min ago' .w.st.new.bak .w.st.tmp.notes
"$BIN" $TINY --save w.st >/dev/null 2>&1
[ -e .w.st.tmp.notes ] && [ -e .w.st.new.bak ] && ok ||
    ko "the stale-temporary cleaner removed a user's files: $(ls -A)"
cd "$T" || exit 1

# ---- --resume on other data under the same name and row count is refused
mkdir "$T/rs" && cd "$T/rs" || exit 1
python3 - <<'PY'
import struct
def npy(fn, rows, cols, v):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    n = len(hdr) + 1
    pad = (64 - (10 + n) % 64) % 64
    with open(fn, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", n + pad) + hdr.encode() + b" " * pad + b"\n")
        f.write(struct.pack("<%df" % (rows * cols), *[v * (i % 7) for i in range(rows * cols)]))
npy("x.npy", 40, 4, 0.5)
npy("y.npy", 40, 1, 0.25)
npy("x2.npy", 40, 4, 0.75)
PY
RS="--backend cpu --mode single --data x.npy --targets y.npy --layers 4,8,1 --loss mse --batch 8 --quiet"
"$BIN" $RS --steps 4 --checkpoint c.st >/dev/null 2>&1 || ko "resume: no checkpoint written"
cp x.npy x1.npy
cp x2.npy x.npy
expect_error "data contents" $RS --steps 8 --resume c.st
grep -q "hash [0-9a-f]\{16\}, this run has .*hash [0-9a-f]\{16\}" "$T/err" && ok ||
    ko "resume on other data: both hashes are not named: $(cat "$T/err")"
cp x1.npy x.npy
"$BIN" $RS --steps 8 --resume c.st >/dev/null 2>&1 && ok || ko "resume on the same data refused"
cd "$T" || exit 1

# ---- a graceful stop of DDP during --checkpoint-every 1: rank 0 finishes its
# write (or never starts one), no full-size temporary is left.  Three stops
# land in a write for sure (DDPBENCH_FAULT=pause holds rank 0's write open
# for 2 s at its first write: the signal comes once its temporary is there); seven
# more at random moments once checkpoints are being written.
mkdir "$T/stop" && cd "$T/stop" || exit 1
rand_ms() { od -An -N2 -tu2 /dev/urandom | awk -v m="$1" '{ printf "%.3f", ($1 % m) / 1000 }'; }
i=0
for sig in INT TERM HUP INT TERM HUP INT TERM HUP INT; do
    i=$((i + 1))
    rm -f c.st .c.st.*
    fault=
    [ $i -le 3 ] && fault=pause:0:0
    # (--default-signal: INT for a script's background job; HUP for a test run
    # under nohup, whose ignored SIGHUP ddpbench would rightly keep ignoring)
    DDPBENCH_E2E_TAG=$TAG DDPBENCH_FAULT=$fault env --default-signal=INT,HUP "$BIN" --backend cpu \
        --mode ddp --gpus 0,1 --model mlp-small --samples 512 --steps 100000 --checkpoint-every 1 \
        --checkpoint c.st --quiet >/dev/null 2>"$T/err" &
    pid=$!
    k=0
    if [ -n "$fault" ]; then # until the held write's temporary is there
        while ! ls -A | grep -q '^\.c\.st\.tmp\.' && [ $k -lt 600 ]; do sleep 0.05; k=$((k + 1)); done
        ls -A | grep -q '^\.c\.st\.tmp\.' || ko "stop $i: the held checkpoint write never began"
    else
        while [ ! -e c.st ] && [ $k -lt 600 ]; do sleep 0.05; k=$((k + 1)); done
        sleep "$(rand_ms 300)"
    fi
    kill -$sig $pid
    wait $pid
    rc=$?
    want=$(case $sig in INT) echo 130 ;; TERM) echo 143 ;; HUP) echo 129 ;; esac)
    [ $rc = "$want" ] && grep -q "stopped: interrupted by SIG$sig" "$T/err" && ok ||
        ko "stop $i (SIG$sig): exit $rc, want $want: $(cat "$T/err")"
    left=$(ls -A | grep '^\.c\.st\.')
    [ -z "$left" ] && ok || ko "stop $i (SIG$sig${fault:+, in a write}): left $left"
    left=$(lingering)
    [ -z "$left" ] || ko "stop $i: processes left: $left"
done
cd "$T" || exit 1

# ---- limits: ulimit -f (SIGXFSZ ignored: the write fails with EFBIG, is
# reported, exit 1, its temporary removed; the DDP segment too) and a small
# stack (ulimit -s 128: nothing large on the stack)
mkdir "$T/lim" && cd "$T/lim" || exit 1
(ulimit -f 100; exec "$BIN" --backend cpu --mode single --model mlp-small --samples 512 --steps 3 \
    --save w.st --quiet) >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q "^ddpbench: error: --save w.st: .*File too large" "$T/err" && ok ||
    ko "ulimit -f 100: exit $rc: $(cat "$T/err")"
[ -z "$(ls -A)" ] && ok || ko "ulimit -f 100: left $(ls -A)"
(ulimit -f 1; exec "$BIN" --backend cpu --mode ddp --gpus 0,1 --model mlp-small --samples 512 \
    --steps 3 --quiet) >/dev/null 2>"$T/err"
rc=$?
[ $rc = 1 ] && grep -q "^ddpbench: error: .*File too large" "$T/err" && ok ||
    ko "ulimit -f 1, ddp: exit $rc: $(cat "$T/err")"
(ulimit -s 128; exec "$BIN" --version) >/dev/null 2>"$T/err" && ok ||
    ko "ulimit -s 128: --version failed: $(cat "$T/err")"
(ulimit -s 128; exec "$BIN" $TINY --emit-pytorch s.py --save s.st) >/dev/null 2>"$T/err" && ok ||
    ko "ulimit -s 128: a run failed: $(cat "$T/err")"
# Every path of the program under ulimit -s 128 (its threads get 128 KiB
# too): the default command, each mode, the page and every other output,
# compare's columns, the gate, the scenarios, the A/B gate.  A run's record
# is 79 KB and compare's nine stats 117 KB: on the stack they crashed these
# with SIGSEGV (exit 139) and no word.  S128 WANT ARGS...: exit 0; or, for
# WANT gate, 0, 3 or 4 (a verdict on two short runs is not the point); for
# WANT verdict, a scenario's 0 or 1 with its verdict line (timing decides it),
# or 4 with "no verdict: a busy machine" (straggler's, when the machine's time
# decided it: on a loaded 2-core box a rank off its core).
S="--backend cpu --layers 8,16,3 --samples 96 --batch 12 --steps 4 --warmup-steps 1 --quiet"
"$BIN" $S --mode ddp --gpus 0,1 --json >base.json 2>"$T/err" || ko "ulimit -s: the baseline run failed: $(cat "$T/err")"
"$BIN" $S --mode single --checkpoint ck.st --save w0.st >/dev/null 2>"$T/err" || ko "ulimit -s: the checkpoint run failed: $(cat "$T/err")"
S128() {
    want=$1
    shift
    (ulimit -s 128; exec "$BIN" "$@") >"$T/out" 2>"$T/err"
    rc=$?
    case $want:$rc in
    0:0 | gate:0 | gate:3 | gate:4) ok ;;
    verdict:0 | verdict:1) grep -q "^scenario .*: \(behaved\|NOT\) as described" "$T/out" && ok ||
        ko "ulimit -s 128: no verdict: $*: $(tail -3 "$T/out") $(tail -3 "$T/err")" ;;
    verdict:4) grep -q "^scenario .*: no verdict: a busy machine" "$T/out" && ok ||
        ko "ulimit -s 128: exit 4 without its busy machine: $*: $(tail -3 "$T/out") $(tail -3 "$T/err")" ;;
    *) ko "ulimit -s 128: exit $rc: $*: $(tail -3 "$T/err")" ;;
    esac
}
S128 0 --backend cpu --steps 3 --quiet
for mode in single "dp --gpus 0,1" "ddp --gpus 0,1" compare; do
    # shellcheck disable=SC2086
    S128 0 $S --mode $mode --report r.html
done
S128 0 $S --mode compare --explain
S128 0 $S --mode compare --json
S128 0 $S --mode compare --csv
S128 0 $S --mode ddp --gpus 0,1 --explain --trace t.json
S128 0 $S --mode compare --predict --report r.html
S128 0 $S --mode compare --repeat 2 --report r.html
S128 0 $S --mode compare --zero 1,2,3
S128 0 $S --mode compare --precision fp32,bf16
S128 0 $S --mode ddp --gpus 0,1 --comm-hook powersgd:1
S128 0 $S --mode ddp --gpus 0,1 --bucket-mb auto --warmup-steps 3
S128 0 $S --mode single --resume ck.st --steps 6
S128 0 $S --mode single --init w0.st --save w1.st
S128 0 $S --mode ddp --gpus 0,1 --emit-pytorch e.py
S128 gate $S --mode ddp --gpus 0,1 --repeat 2 --baseline base.json
S128 gate $S --mode ddp --gpus 0,1 --repeat 6 --against "$BIN" # the fewest rounds it takes
S128 0 --backend cpu --mode comm --gpus 0,1 --max-bytes 64K --iters 3 --json
S128 verdict --scenario uneven
S128 verdict --scenario straggler --steps 12 --report r.html
S128 verdict --scenario dp-device0 --steps 6
S128 verdict --scenario mismatch
cd "$T" || exit 1

# ---- the small ones: an escaped --scenario name, worker ids past the limit,
# "1 feature column", CR-only line ends named
mkdir "$T/small" && cd "$T/small" || exit 1
expect_error "unknown scenario 'x\\n\\x1b[31m'" --scenario "$(printf 'x\n\033[31m')"
expect_error "--gpus: CPU worker 1048576 does not exist" --backend cpu --mode single --gpus 1048576 \
    --model seed-linear --steps 2
printf '1,2\n3,4\n' >lf.csv
expect_error "has 1 feature column" --backend cpu --mode single --data lf.csv --target-cols 1 \
    --layers 2,1 --loss mse --steps 2
grep -q "1 feature columns" "$T/err" && ko "plural for one column: $(cat "$T/err")" || ok
printf 'a,b\r1,2\r3,4\r' >cr.csv
expect_error "cr.csv: line 1 ends in a bare carriage return" --backend cpu --mode single \
    --data cr.csv --target-cols 1 --layers 1,1 --loss mse --steps 2
printf 'a,b\n1,2\r3\n3,4\n' >crin.csv
expect_error "crin.csv: line 2 holds a carriage return inside it, not at its end" --backend cpu \
    --mode single --data crin.csv --target-cols 1 --layers 1,1 --loss mse --steps 2
cd "$T" || exit 1

# ---- memory: what cannot fit is refused before it starts (a planted limit:
# DDPBENCH_MEM_AVAILABLE, the tests' hook; the machine is never exhausted)
export DDPBENCH_MEM_AVAILABLE=1000000
expect_error "memory: the run needs at least 16.9 MiB (ddp: 2 devices" --backend cpu --mode ddp --gpus 0,1 --model mlp-small \
    --steps 3
grep -q "976.6 KiB is available (DDPBENCH_MEM_AVAILABLE)" "$T/err" && ok ||
    ko "memory: the available figure is not named: $(cat "$T/err")"
expect_error "--mode comm: 2 ranks, each 3 buffers of --max-bytes 4.0 MiB" --backend cpu --mode comm \
    --gpus 0,1 --min-bytes 4M --max-bytes 4M --iters 1
# ... before the data is generated: under an address-space limit far below
# the data's 2 GiB (65536 features), in a moment, --mem-limit's and the
# machine's refusals alike
for lim in "--mem-limit 1" ""; do
    t0=$(date +%s%N)
    (ulimit -v 600000 && exec "$BIN" --backend cpu --mode single --layers 65536,65536 $lim) \
        >/dev/null 2>"$T/err"
    rc=$? ms=$((($(date +%s%N) - t0) / 1000000))
    want=$([ -n "$lim" ] && echo "--mem-limit 1 B: single needs at least 64.2 GiB" ||
        echo "memory: the run needs at least 82.1 GiB")
    [ $rc -eq 2 ] && [ $ms -lt 5000 ] && grep -qF -- "$want" "$T/err" && ok ||
        ko "--layers 65536,65536 $lim: exit $rc in $ms ms: $(cat "$T/err")"
done
export DDPBENCH_MEM_AVAILABLE=100000000
"$BIN" --backend cpu --mode ddp --gpus 0,1 --model mlp-small --steps 3 --quiet >/dev/null 2>"$T/err" &&
    ok || ko "memory: a run that fits was refused: $(cat "$T/err")"
unset DDPBENCH_MEM_AVAILABLE

# ---- signals under mpirun: SIGTERM to mpirun says "stopped"; SIGTERM to one
# rank's process (the one mpirun started) names that rank
if need mpirun; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -q -x DDPBENCH_E2E_TAG"
    LONG="--mode ddp --backend cpu --model mlp-small --samples 2400 --batch 240 --steps 100000"
    for target in mpirun rank1; do
        DDPBENCH_E2E_TAG=$TAG $MPIRUN -np 2 "$BIN" $LONG --timeout 2 >"$T/out" 2>"$T/err" &
        MP=$!
        w1() { for p in $(pgrep -P "$MP"); do
            tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx OMPI_COMM_WORLD_RANK=1 && echo "$p"
        done; }
        # The signal goes once rank 0's banner is out: every rank is then past
        # MPI_Init and its start-up (a fixed second after the fork was not
        # enough at load 18, and a signal during MPI_Init has no "stopped"
        # line to give), and rank 1's watcher is up.
        k=0
        while { ! grep -q ": mode ddp" "$T/out" || [ -z "$(w1)" ] || [ -z "$(pgrep -P "$(w1)")" ]; } &&
            [ $k -lt 600 ]; do
            sleep 0.1
            k=$((k + 1))
        done
        sleep 0.5 # into the training loop
        if [ $target = mpirun ]; then kill -TERM $MP; else kill -TERM "$(w1)"; fi
        wait $MP
        rc=$?
        if [ $target = mpirun ]; then # mpirun's own status is Open MPI's (1)
            grep -q "^ddpbench: stopped: interrupted by SIGTERM" "$T/err" && ok ||
                ko "SIGTERM to mpirun: exit $rc, no stopped line: $(cat "$T/err")"
        else
            [ $rc = 143 ] && grep -q "^ddpbench: stopped: rank 1 (device 1, host .*): interrupted by SIGTERM from process" \
                "$T/err" && ok || ko "SIGTERM to rank 1's process: exit $rc: $(cat "$T/err")"
        fi
        for p in $(lingering); do kill -KILL "$p" 2>/dev/null; ko "mpirun $target: process $p left"; done
    done
fi

# ---- --checkpoint's folder removed mid-run (after its first write): a fault
# at run time, exit 1 naming the step, not bad input's 2
mkdir -p "$T/gone" || exit 1
"$BIN" --backend cpu --mode single --layers 6,5,3 --samples 60 --batch 6 --steps 100000000 \
    --checkpoint "$T/gone/c.st" --checkpoint-every 20000 --quiet >/dev/null 2>"$T/err" &
pid=$!
i=0
while [ ! -e "$T/gone/c.st" ] && [ $i -lt 200 ]; do sleep 0.1; i=$((i + 1)); done
rm -rf "$T/gone"
wait $pid
rc=$?
[ $rc = 1 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
    grep -q "^ddpbench: error: .*step [0-9]*: --checkpoint $T/gone/c.st: " "$T/err" &&
    ok || ko "--checkpoint's folder removed mid-run: exit $rc: $(cat "$T/err")"

# ---- OpenBLAS's thread start failing before main (ulimit -v too small for a
# thread's stack): one ddpbench line and exit 2, not a Ctrl-C's 130.  SIGINT
# at its default (env --default-signal): make test run as a background job
# inherits it ignored, and then OpenBLAS's raise does nothing (exit 0).
# The limit: 2 MB over what the program needs to load and start with one
# OpenBLAS thread (found by bisection, to 1 MB), under the 8 MB stack each
# more thread asks for (ulimit -s 8192).  A fixed 50000 KB was 1 MB over the
# load of one build: a little more static data, or a library's update, and
# the loader itself failed (exit 127).
lo=10000 hi=1000000
while [ $((hi - lo)) -gt 1000 ]; do
    mid=$(((lo + hi) / 2))
    if (ulimit -v $mid; OPENBLAS_NUM_THREADS=1 exec "$BIN" --version) >/dev/null 2>&1; then hi=$mid; else lo=$mid; fi
done
lim=$((hi + 2000))
# OpenBLAS starts a thread per CPU it may run on: under taskset -c 0 it
# starts none, and there is nothing to fail; this run may use every CPU.
cpus=$(getconf _NPROCESSORS_ONLN)
if [ "$cpus" -ge 2 ]; then
    (ulimit -s 8192; ulimit -v $lim; exec taskset -c 0-$((cpus - 1)) env --default-signal=INT "$BIN" --version) \
        >/dev/null 2>"$T/err"
    rc=$?
    [ $rc = 2 ] && grep -q "^ddpbench: error: OpenBLAS could not start its threads" "$T/err" && ok ||
        ko "ulimit -v $lim (it loads in $hi): exit $rc: $(cat "$T/err")"
else
    echo "e2e_faults: one CPU online: OpenBLAS starts no thread, so none can fail to start"
fi

# ---- OpenBLAS's pool short of threads (ulimit -u): --threads 4 starts three pool threads
# without checking that pthread_create succeeded, and the first GEMM waited forever for the
# missing one.  Refused at start-up (exit 2 naming --threads); at exactly the threads it needs
# it runs.  The limit binds a user other than root alone: a user id no process has, so this
# run is all it counts (ddpbench's thread and its pool's; OPENBLAS_NUM_THREADS=1: none at
# load, whatever the CPUs), and a copy of the binary that user can reach.
if [ "$(id -u)" != 0 ]; then
    ko "ulimit -u: this check runs ddpbench as a user of its own (setpriv), which needs root"
elif need setpriv && need prlimit; then
    u=$((60000 + $$ % 4000))
    cp "$BIN" "$T/ddpbench.u" && chmod 755 "$T" "$T/ddpbench.u" || ko "copying $BIN"
    for n in 3 4; do # a user id each: a run killed by timeout is reaped in its own time
        while grep -qs "^Uid:[[:space:]]*$u[[:space:]]" /proc/[0-9]*/status; do u=$((u + 1)); done
        (cd / && exec timeout -k 5 20 prlimit --nproc=$n setpriv --reuid=$u --regid=$u \
            --clear-groups env OPENBLAS_NUM_THREADS=1 "$T/ddpbench.u" --backend cpu \
            --mode single --threads 4 --steps 3 --quiet) >"$T/out" 2>"$T/err"
        rc=$?
        if [ $n = 3 ]; then
            w="^ddpbench: error: --threads 4: OpenBLAS could not start 1 of its threads (a limit"
            [ $rc = 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] &&
                grep -q "$w.*ulimit -u is 3)" "$T/err" && ok ||
                ko "ulimit -u 3, --threads 4: exit $rc (124/137: it hung): $(cat "$T/err")"
        else
            [ $rc = 0 ] && ok || ko "ulimit -u 4, --threads 4 (enough): exit $rc: $(cat "$T/err")"
        fi
    done
    chmod 700 "$T"
fi

e2e_finish
