#!/bin/sh
# tests/gpu/kit.sh KIT: finish the GPU kit (make gpu-kit) in folder KIT, whose
# binaries the Makefile has linked: ddpbench and tests/test_* (RPATH
# $ORIGIN/lib, which unlike RUNPATH also serves the libraries' own
# dependencies -- OpenBLAS's libgfortran -- and no absolute path).  Copies in the GPU check (check.sh, the
# PyTorch reference), every shared library the binaries need except those a
# GPU box brings -- the C library, the driver (libcuda), cudart and cuBLAS
# (the CUDA toolkit) and NCCL (the toolkit or PyTorch's wheel), which
# check.sh finds there and names -- and a MANIFEST; then proves with ldd that
# every other library resolves inside the kit (the RPATH is searched before
# the system's folders, so one the kit lacked would resolve outside it), and
# that the kit stays under 60 MB.
# shellcheck disable=SC2086 # lists are meant to split
set -eu
KIT=$1
cd "$(dirname "$0")/../.."
mkdir -p "$KIT/lib"
cp tests/gpu/check.sh tests/gpu/torch_ref.py "$KIT/"
BINS="$KIT/ddpbench $KIT/lib/libddpbench-cuda.so $(ls "$KIT"/tests/test_*)"
# What the box provides (a regular expression over sonames).
BOX='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libdl\.so|libpthread|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libnccl)'
for b in $BINS; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r so path; do
    echo "$so" | grep -Eq "$BOX" && continue
    cp -L "$path" "$KIT/lib/$so"
done
# Each binary: every library but the box's resolves inside the kit.
status=0
kit_abs=$(cd "$KIT" && pwd -P)
for b in $BINS; do
    outside=$(ldd "$b" | awk '$2 == "=>" { print $1, $3 }' | while read -r so path; do
        echo "$so" | grep -Eq "$BOX" && continue
        case "$(readlink -f "$path" 2>/dev/null || echo "$path")" in "$kit_abs"/lib/*) ;; *) echo "$so=$path" ;; esac
    done)
    if [ -n "$outside" ]; then
        echo "gpu-kit: $b resolves outside the kit: $outside" >&2
        status=1
    fi
    n=$(ldd "$b" | awk '$2 == "=>" { print $3 }' | while read -r p; do readlink -f "$p"; done |
        grep -c "^$kit_abs/lib/" || true)
    echo "gpu-kit: $(basename "$b"): $n libraries from the kit, the rest from the box: $(ldd "$b" |
        awk '{ print $1 }' | grep -E "$BOX" | grep -Ev '^(linux-vdso|ld-linux)' | tr '\n' ' ')"
done
# The same without the ld.so cache (as on a box whose cache knows nothing of
# CUDA), given only the folders cudart, cuBLAS and NCCL come from: what the
# binaries then take from outside the kit and the C library's folders.
LDSO=/lib64/ld-linux-x86-64.so.2
if [ -x "$LDSO" ]; then
    dirs=$(ldd "$KIT/ddpbench" | awk '$1 ~ /^lib(cudart|cublas|cublasLt|nccl)\./ { print $3 }' |
        xargs -r -n1 dirname | sort -u | tr '\n' ':')
    for b in $BINS; do
        from=$("$LDSO" --inhibit-cache --library-path "${dirs%:}" --list "$b" 2>&1 |
            awk '$2 == "=>" { print $1, $3 }' | while read -r so path; do
                case "$(readlink -f "$path" 2>/dev/null)" in
                "$kit_abs"/lib/* | /lib/* | /usr/lib/* | /lib64/*) ;;
                *) echo "$so" ;;
                esac
            done | sort | tr '\n' ' ')
        echo "gpu-kit: $(basename "$b") without the ld.so cache takes only these from outside the kit and the C library: ${from:-nothing}(from ${dirs%:})"
        case "$from" in *[!\ ]*) echo "$from" | tr ' ' '\n' | grep -v '^$' |
            grep -Evq '^lib(cudart|cublas|cublasLt|nccl)\.' && { echo "gpu-kit: unexpected: $from" >&2; status=1; } ;; esac
    done
fi
glibc=$(for b in $BINS "$KIT"/lib/*; do objdump -T "$b" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' |
    sort -t_ -k2 -V -u | tail -n 1)
{
    echo "ddpbench GPU kit ($(git describe --always --dirty 2>/dev/null || echo unknown)), built $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "run:    sh check.sh     (writes results/check.json, ends with one verdict line)"
    echo "needs:  the NVIDIA driver, CUDA 13 cudart and cuBLAS, NCCL 2 (the toolkit's, or"
    echo "        PyTorch's nvidia-nccl wheel), glibc >= ${glibc#GLIBC_}, libstdc++; python3 with torch"
    echo "        for the PyTorch comparison (optional)"
    echo "files:"
    (cd "$KIT" && find . -type f ! -name MANIFEST | sort | while read -r f; do
        printf '  %-40s %9d bytes\n' "$f" "$(wc -c <"$f")"; done)
} >"$KIT/MANIFEST"
bytes=$(du -sb "$KIT" | cut -f1)
echo "gpu-kit: $KIT: $(find "$KIT/lib" -type f | wc -l) libraries, $((bytes / 1048576)) MiB ($bytes bytes)"
[ "$bytes" -lt $((60 * 1000 * 1000)) ] || { echo "gpu-kit: over 60 MB" >&2; status=1; }
exit $status
