#!/bin/sh
# tests/e2e/e2e_checkpoint.sh: weights and checkpoints as a user meets them:
#  - a checkpoint write killed between writing and renaming
#    (DDPBENCH_FAULT=write) exits with SIGKILL's status and leaves the previous
#    checkpoint intact; resuming from it ends with the bits of the run that
#    never stopped, and its successful write removes the dead temporary; the
#    same in DP and DDP, where only device 0 / rank 0 writes (a killed DDP
#    rank 0 is exit 1 naming it, with no process or /dev/shm entry left);
#  - bad --init / --resume files and paths: exit 2, one line naming them;
#  - interop (python3 with numpy and torch, which make test-e2e installs): a
#    small independent reader (json + numpy.frombuffer) parses what --save
#    wrote, and a file that reader's writer produced, laid out like
#    safetensors.torch.save_file, loads with --init and comes back bit for
#    bit; torch's nn.Sequential loads --save's tensors with load_state_dict,
#    and its state_dict, written back, loads with --init.
# Usage: sh tests/e2e/e2e_checkpoint.sh ./ddpbench
E2E=e2e_checkpoint
. "$(dirname "$0")/lib.sh"

bits() { sed -n 's/.*checksum.* bits \([0-9a-f]*\).*/\1/p' "$1"; }
temps() { ls -A "$T" | grep -c "^\.ck\.safetensors\.tmp\." ; }

RUN="--layers 6,5,3 --act relu --loss ce --samples 60 --batch 6 --optim adam --lr 0.01 --backend cpu --mode single --quiet"

# ---- a checkpoint write killed before its rename -----------------------------------
# 10 steps per epoch, a checkpoint every 2 steps; the write after step index 5
# (the 6th step) is killed: the file must still hold step 4.
"$BIN" $RUN --steps 10 >"$T/straight" 2>&1 || ko "straight run: $(cat "$T/straight")"
DDPBENCH_FAULT=write:0:5 "$BIN" $RUN --steps 10 --checkpoint "$T/ck.safetensors" \
    --checkpoint-every 2 >"$T/out" 2>&1
rc=$?
[ $rc -eq 137 ] && ok || ko "killed write: exit $rc, expected 137 (SIGKILL): $(cat "$T/out")"
head -c 2048 "$T/ck.safetensors" | grep -q '"global_step":"4"' && ok ||
    ko "the checkpoint does not hold step 4: $(head -c 300 "$T/ck.safetensors")"
[ "$(temps)" -eq 1 ] && ok || ko "expected the dead writer's temporary, found $(temps)"
"$BIN" $RUN --steps 10 --resume "$T/ck.safetensors" --checkpoint "$T/ck.safetensors" \
    >"$T/resumed" 2>&1 || ko "resume after the killed write: $(cat "$T/resumed")"
[ -n "$(bits "$T/straight")" ] && [ "$(bits "$T/resumed")" = "$(bits "$T/straight")" ] && ok ||
    ko "resumed bits $(bits "$T/resumed") != straight bits $(bits "$T/straight")"
[ "$(temps)" -eq 0 ] && ok || ko "the stale temporary survived a successful write: $(ls -A "$T")"
head -c 2048 "$T/ck.safetensors" | grep -q '"global_step":"10"' && ok || ko "final checkpoint is not at step 10"

# ---- DP and DDP: the same, and only device 0 / rank 0 writes ---------------------------
# DP is one process: its killed write ends it like single's.  A DDP rank 0
# killed mid-write is a dead rank: the supervisor stops the others and exits 1
# naming rank 0, and leaves no process and no /dev/shm entry behind.
D="$T/modes" # its own folder: the checks below reuse single's checkpoint
mtemps() { ls -A "$D" | grep -c "^\.ck\.safetensors\.tmp\."; }
for mode in "dp --gpus 0,1,2" "ddp --gpus 0,1,2"; do
    name=${mode%% *}
    M=$(echo "$RUN" | sed "s/--mode single/--mode $mode/")
    rm -rf "$D" && mkdir "$D"
    "$BIN" $M --steps 10 >"$T/straight" 2>&1 || ko "$name straight run: $(cat "$T/straight")"
    shm_list >"$T/shm_before"
    DDPBENCH_E2E_TAG=$TAG DDPBENCH_FAULT=write:0:5 "$BIN" $M --steps 10 \
        --checkpoint "$D/ck.safetensors" --checkpoint-every 2 >"$T/out" 2>&1
    rc=$?
    if [ "$name" = dp ]; then
        [ $rc -eq 137 ] && ok || ko "dp killed write: exit $rc, expected 137: $(cat "$T/out")"
    else
        [ $rc -eq 1 ] && grep -q "^ddpbench: error: rank 0 (device 0) killed by signal 9" "$T/out" &&
            ok || ko "ddp killed write: exit $rc, expected 1 naming rank 0: $(cat "$T/out")"
    fi
    head -c 2048 "$D/ck.safetensors" | grep -q '"global_step":"4"' && ok ||
        ko "$name: the checkpoint does not hold step 4 after the killed write"
    [ "$(mtemps)" -eq 1 ] && ok || ko "$name: expected the dead writer's temporary, found $(mtemps)"
    left=$(lingering)
    [ -z "$left" ] && ok || ko "$name killed write: processes left: $left"
    shm_list >"$T/shm_after"
    [ -z "$(shm_new "$T/shm_before" "$T/shm_after")" ] && ok || ko "$name killed write: /dev/shm entries left"
    "$BIN" $M --steps 10 --resume "$D/ck.safetensors" --checkpoint "$D/ck.safetensors" \
        >"$T/resumed" 2>&1 || ko "$name resume after the killed write: $(cat "$T/resumed")"
    [ -n "$(bits "$T/straight")" ] && [ "$(bits "$T/resumed")" = "$(bits "$T/straight")" ] && ok ||
        ko "$name: resumed bits $(bits "$T/resumed") != straight bits $(bits "$T/straight")"
    [ "$(mtemps)" -eq 0 ] && ok || ko "$name: the stale temporary survived a successful write"
    # device 1 / rank 1 never writes: a write fault aimed at it never fires
    DDPBENCH_FAULT=write:1:5 "$BIN" $M --steps 10 --checkpoint "$D/ck1.safetensors" \
        --checkpoint-every 2 >"$T/out" 2>&1 && [ "$(bits "$T/out")" = "$(bits "$T/straight")" ] &&
        head -c 2048 "$D/ck1.safetensors" | grep -q '"global_step":"10"' && ok ||
        ko "$name: device 1 wrote a checkpoint: $(cat "$T/out")"
done

# ---- bad files and paths through the command line -----------------------------------
"$BIN" $RUN --steps 2 --save "$T/w.safetensors" >/dev/null 2>&1 || ko "--save"
size=$(wc -c <"$T/w.safetensors")
head -c $((size - 10)) "$T/w.safetensors" >"$T/truncated.safetensors"
: >"$T/empty.safetensors"
printf '\001\000\000\000\000\000\000\001{}' >"$T/absurd.safetensors"
expect_error "run past the end of the data" $RUN --init "$T/truncated.safetensors"
expect_error "--init $T/empty.safetensors: the file is empty" $RUN --init "$T/empty.safetensors"
expect_error "is absurd" $RUN --init "$T/absurd.safetensors"
expect_error "0.weight has shape [5, 6], the model needs [5, 4]" \
    --layers 4,5,3 --loss ce --samples 60 --backend cpu --mode single --init "$T/w.safetensors"
expect_error "--init $T/nothere.safetensors: cannot open" $RUN --init "$T/nothere.safetensors"
expect_error "written with --batch 6, this run has --batch 12" \
    $RUN --batch 12 --steps 20 --resume "$T/ck.safetensors"
expect_error "not a ddpbench checkpoint" $RUN --steps 20 --resume "$T/w.safetensors"
expect_error "nothing left to run" $RUN --steps 10 --resume "$T/ck.safetensors"
expect_error "--init and --resume: choose one" $RUN --init "$T/w.safetensors" --resume "$T/ck.safetensors"
expect_error "--save $T/no/w.safetensors: cannot create a file in directory" \
    $RUN --save "$T/no/w.safetensors"
expect_error "--checkpoint-every: needs --checkpoint FILE" $RUN --checkpoint-every 3

# --init from weights trained as another model of the same shapes: a warning, and it runs
"$BIN" $RUN --steps 2 --save "$T/relu_ce.safetensors" >/dev/null 2>&1 || ko "--save for the warning"
"$BIN" $RUN --steps 2 --act gelu --loss mse --init "$T/relu_ce.safetensors" >"$T/out" 2>"$T/err"
rc=$?
[ $rc -eq 0 ] && grep -qF "ddpbench: warning: --init $T/relu_ce.safetensors: its weights were trained with --act relu --loss ce, this run uses --act gelu --loss mse" "$T/err" &&
    ok || ko "--init of another activation and loss: exit $rc: $(cat "$T/err")"
"$BIN" $RUN --steps 2 --init "$T/relu_ce.safetensors" >"$T/out" 2>"$T/err"
grep -q "warning" "$T/err" && ko "--init of the same model warns: $(cat "$T/err")" || ok

# ---- interop with an independent reader and writer ------------------------------------
PY=
for p in python3 /usr/bin/python3; do
    if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import numpy, torch' >/dev/null 2>&1; then
        PY=$p
        break
    fi
done
if [ -z "$PY" ]; then
    ko "interop: python3 with numpy and torch is not installed (scripts/deps.sh test installs it)"
else
    cat >"$T/st.py" <<'EOF'
# A reader and writer of .safetensors written from the format's description
# (8-byte little-endian header length, JSON header, raw little-endian data),
# independent of ddpbench's code.
import json, struct, sys
import numpy as np

def read(path):
    b = open(path, "rb").read()
    (n,) = struct.unpack("<Q", b[:8])
    assert n % 8 == 0, "header length %d is not a multiple of 8" % n
    head = json.loads(b[8:8 + n].decode("utf-8"))
    meta = head.pop("__metadata__", {})
    assert all(isinstance(v, str) for v in meta.values()), "non-string metadata"
    data = b[8 + n:]
    spans, out = [], {}
    for name, t in head.items():
        assert t["dtype"] == "F32", name
        s, e = t["data_offsets"]
        out[name] = np.frombuffer(data[s:e], dtype="<f4").reshape(t["shape"])
        spans.append((s, e))
    pos = 0
    for s, e in sorted(spans):
        assert s == pos, "gap or overlap at %d" % s
        pos = e
    assert pos == len(data), "data does not end with the last tensor"
    return meta, out

def write(path, tensors, meta):
    # like safetensors.torch.save_file: sorted by name (one dtype), metadata first
    head, off, blobs = {"__metadata__": meta}, 0, []
    for name in sorted(tensors):
        a = np.ascontiguousarray(tensors[name], dtype="<f4")
        head[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
        blobs.append(a.tobytes())
    h = json.dumps(head, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))

cmd = sys.argv[1]
if cmd == "check":          # check FILE EXPECTED_SUM: names, shapes, metadata, sum
    meta, t = read(sys.argv[2])
    want = {"0.weight": (5, 6), "0.bias": (5,), "2.weight": (3, 5), "2.bias": (3,)}
    assert {k: v.shape for k, v in t.items()} == want, {k: v.shape for k, v in t.items()}
    assert meta.get("layers") == "6,5,3" and meta.get("act") == "relu", meta
    total = sum(float(np.sum(t[k].astype(np.float64))) for k in want)
    expect = float(sys.argv[3])
    assert abs(total - expect) <= 1e-6 * max(1.0, abs(expect)), (total, expect)
elif cmd == "make":         # make FILE: deterministic weights for 6,5,3
    r = np.random.RandomState(7)
    t = {"0.weight": r.randn(5, 6), "0.bias": r.randn(5), "2.weight": r.randn(3, 5), "2.bias": r.randn(3)}
    write(sys.argv[2], t, {"format": "pt"})
elif cmd == "same":         # same A B: the same tensors, bit for bit
    _, a = read(sys.argv[2])
    _, b = read(sys.argv[3])
    assert sorted(a) == sorted(b), (sorted(a), sorted(b))
    for k in a:
        assert a[k].shape == b[k].shape and a[k].tobytes() == b[k].tobytes(), k
elif cmd == "torch":        # torch W OUT: nn.Sequential loads W; its state_dict written back
    import torch
    m = torch.nn.Sequential(torch.nn.Linear(6, 5), torch.nn.ReLU(), torch.nn.Linear(5, 3))
    _, t = read(sys.argv[2])
    m.load_state_dict({k: torch.from_numpy(v.copy()) for k, v in t.items()}, strict=True)
    write(sys.argv[3], {k: v.detach().numpy() for k, v in m.state_dict().items()}, {"format": "pt"})
EOF
    "$BIN" $RUN --steps 3 --save "$T/saved.safetensors" >"$T/out" 2>&1 || ko "--save: $(cat "$T/out")"
    sum=$(sed -n 's/.*checksum *sum \([-+0-9.e]*\).*/\1/p' "$T/out")
    "$PY" "$T/st.py" check "$T/saved.safetensors" "$sum" 2>"$T/pyerr" && ok ||
        ko "the independent reader rejects --save's file: $(tail -3 "$T/pyerr")"
    "$PY" "$T/st.py" make "$T/py.safetensors" 2>"$T/pyerr" || ko "python writer: $(cat "$T/pyerr")"
    # lr 0: the weights pass through a training run unchanged
    "$BIN" $RUN --steps 1 --optim sgd --lr 0 --init "$T/py.safetensors" \
        --save "$T/back.safetensors" >"$T/out" 2>&1 || ko "--init of a python-written file: $(cat "$T/out")"
    "$PY" "$T/st.py" same "$T/py.safetensors" "$T/back.safetensors" 2>"$T/pyerr" && ok ||
        ko "weights changed on the way through --init/--save: $(tail -3 "$T/pyerr")"
    "$PY" "$T/st.py" torch "$T/saved.safetensors" "$T/torch.safetensors" 2>"$T/pyerr" && ok ||
        ko "torch load_state_dict: $(tail -3 "$T/pyerr")"
    "$BIN" $RUN --steps 1 --optim sgd --lr 0 --init "$T/torch.safetensors" --save "$T/back2.safetensors" \
        >"$T/out" 2>&1 && ok || ko "--init of torch's state_dict: $(cat "$T/out")"
    "$PY" "$T/st.py" same "$T/saved.safetensors" "$T/back2.safetensors" 2>"$T/pyerr" && ok ||
        ko "weights changed on the way through torch: $(tail -3 "$T/pyerr")"
fi

# ---- a replaced output keeps its mode --------------------------------------------
# A private 0600 --save or --checkpoint (or a group's 0640) stays so, whatever
# the umask gives a new file; a new file gets the umask's mode.
mkdir "$T/mode" || exit 1
for m in 600 640; do
    for f in w.st ck.st tr.json; do
        : >"$T/mode/$f" && chmod $m "$T/mode/$f"
    done
    (umask 022 && exec "$BIN" $RUN --steps 4 --save "$T/mode/w.st" --checkpoint "$T/mode/ck.st" \
        --checkpoint-every 1 --trace "$T/mode/tr.json") >/dev/null 2>"$T/err" || ko "mode $m: $(cat "$T/err")"
    for f in w.st ck.st tr.json; do
        [ -s "$T/mode/$f" ] && [ "$(stat -c %a "$T/mode/$f")" = $m ] && ok ||
            ko "a $m $f came back $(stat -c %a "$T/mode/$f") (umask 022)"
    done
done
(umask 027 && exec "$BIN" $RUN --steps 2 --save "$T/mode/new.st") >/dev/null 2>&1
[ "$(stat -c %a "$T/mode/new.st")" = 640 ] && ok || ko "a new --save under umask 027: $(stat -c %a "$T/mode/new.st")"

e2e_finish
