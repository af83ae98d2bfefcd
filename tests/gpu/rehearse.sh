#!/bin/sh
# tests/gpu/rehearse.sh KIT: the GPU kit on a rehearsal of the bare GPU box
# (part of make test, through make test-gpu-kit).
#
# The box has a driver, CUDA 13 in /usr/local/cuda, and a python3 whose
# PyTorch brings cuBLAS, cudart and NCCL as pip wheels in
# site-packages/nvidia/*/lib; none of our libraries (OpenBLAS, Criterion,
# cJSON, Open MPI), nothing of CUDA in its ld.so cache, no package registry.
# This builds a root with only the C library, libstdc++, sh and the tools
# check.sh uses (copied from this machine, with what ldd says they need),
# and runs the kit's check.sh in it, chrooted inside a mount namespace of
# its own (unshare -m; as a user, with a user namespace: unshare -r -m), in
# three layouts:
#  A. cuBLAS, cudart and NCCL only in a fake .../site-packages/nvidia/
#     {cublas,cuda_runtime,nccl}/lib tree that a python3 (a stub printing its
#     site-packages, without PyTorch) points to, no toolkit: check.sh must
#     find every library there, load lib/libddpbench-cuda.so, and stop only
#     for want of a driver (verdict "no GPU driver", exit 3), leaving
#     check.json ("complete":true), check.log (ending in the verdict) and
#     check-logs.tar.gz in DDPBENCH_CHECK_OUT and nothing in $OUT; and
#     python3, asked which PyTorch it brings after those libraries were put
#     on ddpbench's library path, must see none of it (the stub records the
#     LD_LIBRARY_PATH of each call: PyTorch loads its own wheels' cuBLAS and
#     NCCL);
#  B. the same libraries in the toolkit's layout (/usr/local/cuda ->
#     cuda-13.0, lib64 -> targets/x86_64-linux/lib, NCCL in lib), no python3:
#     the same verdict;
#  C. neither: check.sh must fail at the libraries, naming what it lacks.
# The library files are this machine's own (bind-mounted, not copied).  Then
# the kit's proof without the ld.so cache must fail when NCCL's folder is
# withheld (kit.sh --verify).  Where no namespace can be made, it says why and
# fails when CI=true (else it says it did not run).
# shellcheck disable=SC2086 # lists are meant to split
set -eu
KIT=$(cd "${1:?usage: rehearse.sh KIT}" && pwd -P)
cd "$(dirname "$0")/../.."
SRC=$(pwd)
R0=$SRC/build/gpu-rehearsal
fail() {
    echo "gpu-rehearsal: FAIL: $*" >&2
    exit 1
}
t0=$(date +%s)

# ---- a mount namespace, or why not ----------------------------------------------
if [ "$(id -u)" = 0 ]; then NS="unshare -m"; else NS="unshare -r -m"; fi
if ! why=$($NS sh -c 'mount -t tmpfs none /mnt 2>&1 || mount -t tmpfs none /tmp 2>&1' 2>&1); then
    msg="cannot make a mount namespace here ($NS: ${why:-no message}); the bare-box rehearsal did not run"
    if [ "${CI:-}" = true ]; then fail "$msg"; fi
    echo "gpu-rehearsal: NOT RUN: $msg (under CI=true this fails)"
    exit 0
fi

# ---- this machine's cuBLAS, cudart and NCCL (what the kit's backend links) ---------------
backend=$KIT/lib/libddpbench-cuda.so
[ -f "$backend" ] || fail "no $backend (make gpu-kit first)"
host_lib() { ldd "$backend" | awk -v so="$1" '$1 == so && $3 ~ /^\// { print $3 }' | xargs -r readlink -f; }
CUDART=$(host_lib libcudart.so.13) CUBLAS=$(host_lib libcublas.so.13) CUBLASLT=$(host_lib libcublasLt.so.13)
NCCL=$(host_lib libnccl.so.2)
for v in "$CUDART" "$CUBLAS" "$CUBLASLT" "$NCCL"; do
    [ -f "$v" ] || fail "the kit's backend does not resolve cudart 13, cuBLAS 13 and NCCL 2 here: $(ldd "$backend" | tr '\n' ' ')"
done

# ---- the root: the C library, libstdc++, sh and check.sh's tools ---------------------
R=$R0/root
rm -rf "$R0"
mkdir -p "$R/usr/bin" "$R/usr/lib/x86_64-linux-gnu" "$R/usr/lib64" "$R/usr/local" "$R/opt" \
    "$R/tmp" "$R/proc" "$R/dev/shm" "$R/kit" "$R/out" "$R/boxout" "$R/etc" "$R/pylog"
ln -s usr/bin "$R/bin"
ln -s usr/lib "$R/lib"
ln -s usr/lib64 "$R/lib64"
chmod 1777 "$R/tmp"
for d in null zero urandom; do : >"$R/dev/$d"; done
copy_with_libs() { # FILE DEST: FILE at DEST in the root, and every library it needs at its own path
    cp -L "$1" "$R$2"
    ldd "$1" 2>/dev/null | awk '$3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | while read -r so; do
        [ -e "$R$so" ] && continue
        mkdir -p "$R$(dirname "$so")"
        cp -L "$so" "$R$so"
    done
}
TOOLS="sh date mkdir cat sed awk grep tr sort uniq head tail wc cut dirname basename timeout nproc
       ls rm mv cp env tar gzip df find xargs readlink sleep mktemp pwd id uname expr true false tee mkfifo"
for t in $TOOLS; do
    p=$(command -v "$t") || fail "no $t on this machine"
    case "$p" in /*) ;; *) p=$(ls /usr/bin/"$t" /bin/"$t" 2>/dev/null | head -n 1) ;; esac # a builtin here
    [ -n "$p" ] || fail "no program $t on this machine"
    copy_with_libs "$(readlink -f "$p")" "/usr/bin/$t"
done
# What the kit leaves to the box besides CUDA: the C library's parts, libstdc++, libgcc_s.
for b in "$KIT/ddpbench" "$backend" "$KIT"/tests/test_*; do ldd "$b"; done |
    awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | sort -u | while read -r so path; do
    case "$(readlink -f "$path")" in "$KIT"/*) continue ;; esac
    case "$so" in libcudart* | libcublas* | libnccl*) continue ;; esac
    mkdir -p "$R$(dirname "$path")"
    [ -e "$R$path" ] || cp -L "$path" "$R$path"
done
# Nothing of ours may be in the root, nor an ld.so cache.
extra=$(cd "$R" && find . \( -name 'libopenblas*' -o -name 'libcriterion*' -o -name 'libcjson*' -o -name 'libmpi*' \
    -o -name 'libcublas*' -o -name 'libcudart*' -o -name 'libnccl*' -o -name 'libcuda.so*' -o -name ld.so.cache \) -print)
[ -z "$extra" ] || fail "the rehearsal root holds what the box lacks: $extra"
echo "gpu-rehearsal: a root of $(find "$R" -type f | wc -l) files ($(du -sk "$R" | cut -f1) KiB): sh, $(echo $TOOLS | wc -w) tools, the C library, libstdc++"

# ---- one layout: the namespace, the mounts, check.sh chrooted ----------------------------
SITE=/opt/venv/lib/python3.12/site-packages
# A python3 that knows its site-packages and has no PyTorch, and writes down
# the library path of every call it gets (what the check hands python3).
cat >"$R0/python3" <<EOF
#!/bin/sh
case "\$*" in *"import torch"*) what=torch ;; *getsitepackages*) what=site ;; *) what=other ;; esac
echo "\$what LD_LIBRARY_PATH=\${LD_LIBRARY_PATH-unset}" >>/pylog/calls
case "\$what" in site) echo $SITE ;; *) echo "python3 (rehearsal): no module named torch" >&2; exit 1 ;; esac
EOF
chmod +x "$R0/python3"
# rehearse LAYOUT: run check.sh in the root with LAYOUT's libraries; its output
# in $R0/LAYOUT.log, its status in $R0/LAYOUT.rc
rehearse() {
    layout=$1
    rm -rf "$R/out" "$R/boxout" "$R/pylog"
    mkdir -p "$R/out" "$R/boxout" "$R/pylog"
    # The setup runs in the new namespace, before the chroot: its mounts
    # vanish with it.
    cat >"$R0/setup.sh" <<EOF
set -eu
R='$R'
mount --make-rprivate / 2>/dev/null || true
lib() { mkdir -p "\$R\$(dirname "\$2")"; : >"\$R\$2"; mount --bind "\$1" "\$R\$2"; }
mount -t tmpfs tmpfs "\$R/opt"
mount -t tmpfs tmpfs "\$R/usr/local"
mount -t tmpfs -o size=64m tmpfs "\$R/dev/shm"
mount -t tmpfs tmpfs "\$R/tmp"
for d in null zero urandom; do mount --bind /dev/\$d "\$R/dev/\$d"; done
mount --rbind /proc "\$R/proc"
mount --bind '$KIT' "\$R/kit"
case '$layout' in
wheels)
    lib '$CUBLAS' $SITE/nvidia/cublas/lib/libcublas.so.13
    lib '$CUBLASLT' $SITE/nvidia/cublas/lib/libcublasLt.so.13
    lib '$CUDART' $SITE/nvidia/cuda_runtime/lib/libcudart.so.13
    lib '$NCCL' $SITE/nvidia/nccl/lib/libnccl.so.2
    : >"\$R/usr/bin/python3"
    mount --bind '$R0/python3' "\$R/usr/bin/python3" ;;
toolkit)
    T=/usr/local/cuda-13.0
    lib '$CUBLAS' \$T/targets/x86_64-linux/lib/libcublas.so.13
    lib '$CUBLASLT' \$T/targets/x86_64-linux/lib/libcublasLt.so.13
    lib '$CUDART' \$T/targets/x86_64-linux/lib/libcudart.so.13
    lib '$NCCL' \$T/lib/libnccl.so.2
    ln -s targets/x86_64-linux/lib "\$R\$T/lib64"
    ln -s cuda-13.0 "\$R/usr/local/cuda" ;;
esac
exec chroot "\$R" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/tmp OUT=/boxout DDPBENCH_CHECK_OUT=/out \
    sh /kit/check.sh
EOF
    rc=0
    $NS sh "$R0/setup.sh" >"$R0/$layout.log" 2>&1 || rc=$?
    echo "$rc" >"$R0/$layout.rc"
}
# expect_no_driver LAYOUT WHERE-PATTERN: verdict, status, outputs
expect_no_driver() {
    layout=$1 where=$2
    log=$R0/$layout.log rc=$(cat "$R0/$layout.rc")
    last=$(tail -n 1 "$log")
    case "$last" in "gpu check: no GPU driver ("*) ;; *)
        sed 's/^/    | /' "$log" >&2; fail "$layout: the check did not stop at the driver alone (exit $rc): $last" ;; esac
    [ "$rc" = 3 ] || fail "$layout: exit $rc, not 3 (no GPU driver)"
    libs=$(grep '^PASS  libraries:' "$log") || fail "$layout: no 'PASS  libraries' line"
    for so in libnccl.so.2 libcublas.so.13 libcudart.so.13; do
        echo "$libs" | grep -Eq "${where}[^ ]*/$so" || fail "$layout: $so not found where the layout has it: $libs"
    done
    grep -q 'cannot load the CUDA backend' "$log" && fail "$layout: the backend did not load"
    grep -q 'InsufficientDriver\|no CUDA driver' "$log" || fail "$layout: the driver's absence is not named"
    [ -z "$(ls -A "$R/boxout")" ] || fail "$layout: the check wrote into \$OUT: $(ls -A "$R/boxout" | tr '\n' ' ')"
    [ "$(ls -A "$R/out" | tr '\n' ' ')" = "check-logs.tar.gz check.json check.log " ] ||
        fail "$layout: DDPBENCH_CHECK_OUT holds '$(ls -A "$R/out" | tr '\n' ' ')', not check.json, check.log and check-logs.tar.gz"
    grep -q '"complete":true,"ok":false,"exit":3,"verdict":"gpu check: no GPU driver' "$R/out/check.json" ||
        fail "$layout: check.json: $(head -c 300 "$R/out/check.json")"
    [ "$(tail -n 1 "$R/out/check.log")" = "$last" ] || fail "$layout: check.log does not end in the verdict: $(tail -n 1 "$R/out/check.log")"
    grep -Eq "\"nccl\":\"[^\"]*$where" "$R/out/check.json" || fail "$layout: check.json does not name NCCL's path"
    tar -tzf "$R/out/check-logs.tar.gz" | grep -q 'logs/probe.log' || fail "$layout: the log archive lacks probe.log"
    kb=$(du -k "$R/out/check-logs.tar.gz" | cut -f1)
    [ "$kb" -lt 1024 ] || fail "$layout: the log archive is ${kb} KiB"
    echo "gpu-rehearsal: $layout: $(echo "$libs" | sed 's/^PASS  libraries: //' | cut -c1-200)..."
    echo "gpu-rehearsal: $layout: $last (exit 3); out: check.json, check.log, check-logs.tar.gz (${kb} KiB); \$OUT untouched"
}

rehearse wheels
expect_no_driver wheels "$SITE/nvidia/(nccl|cublas|cuda_runtime)/lib"
# python3 was asked which PyTorch it brings, after the libraries were found
# and put on ddpbench's library path: it must have seen the box's own path
# (none), not those folders
grep -q '^torch ' "$R/pylog/calls" 2>/dev/null || fail "wheels: the check never asked python3 for its PyTorch: $(cat "$R/pylog/calls" 2>/dev/null | tr '\n' ' ')"
grep -v ' LD_LIBRARY_PATH=unset$' "$R/pylog/calls" | grep . &&
    fail "wheels: python3 was handed the library path found for ddpbench: $(grep -v 'LD_LIBRARY_PATH=unset$' "$R/pylog/calls" | head -n 1)"
grep -q '^PASS  libraries: .*on LD_LIBRARY_PATH for:' "$R0/wheels.log" || fail "wheels: the check put nothing on ddpbench's library path (the proof above would be empty)"
echo "gpu-rehearsal: wheels: python3 called $(grep -c . "$R/pylog/calls") times (PyTorch asked for once the libraries were on ddpbench's path), never with that path"
rehearse toolkit
expect_no_driver toolkit "/usr/local/cuda[^ ]*/(lib|lib64|targets/x86_64-linux/lib)"
rehearse none
rc=$(cat "$R0/none.rc")
grep -q '^FAIL  libraries: not found anywhere: .*libcublas.so.13.*libcudart.so.13.*libnccl.so.2' "$R0/none.log" && [ "$rc" = 1 ] ||
    { sed 's/^/    | /' "$R0/none.log" >&2; fail "none: the check did not fail at the libraries naming them (exit $rc)"; }
echo "gpu-rehearsal: none: $(tail -n 1 "$R0/none.log") (exit 1)"

# ---- the kit's proof without the ld.so cache sees a withheld library ----------------------
mkdir -p "$R0/nonccl"
ln -sf "$CUBLAS" "$R0/nonccl/libcublas.so.13"
ln -sf "$CUBLASLT" "$R0/nonccl/libcublasLt.so.13"
ln -sf "$CUDART" "$R0/nonccl/libcudart.so.13"
if sh tests/gpu/kit.sh --verify "$KIT" "$R0/nonccl" >"$R0/verify.log" 2>&1; then
    cat "$R0/verify.log" >&2
    fail "kit.sh's proof without the ld.so cache passed with NCCL's folder withheld"
fi
grep -q 'libddpbench-cuda.so.*libnccl.so.2' "$R0/verify.log" || { cat "$R0/verify.log" >&2; fail "kit.sh --verify did not name libnccl.so.2"; }
echo "gpu-rehearsal: kit.sh --verify without NCCL's folder: fails, naming libnccl.so.2"
rm -rf "$R0"
echo "gpu-rehearsal: passed in $(($(date +%s) - t0))s"
