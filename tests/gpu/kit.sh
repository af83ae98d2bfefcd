#!/bin/sh
# tests/gpu/kit.sh KIT: finish the GPU kit (make gpu-kit) in folder KIT, whose
# binaries the Makefile has linked: ddpbench, lib/libddpbench-cuda.so and
# tests/test_* (RPATH $ORIGIN/lib, which unlike RUNPATH also serves the
# libraries' own dependencies -- OpenBLAS's libgfortran -- and no absolute
# path).  Copies in the GPU check (check.sh, the PyTorch reference), every
# shared library the binaries need except those a GPU box brings -- the C
# library, libstdc++, the driver (libcuda), cudart and cuBLAS (the CUDA
# toolkit, or PyTorch's nvidia wheels) and NCCL (the same), which check.sh
# finds there and names -- and a MANIFEST; then proves with ldd that every
# other library resolves inside the kit, and with the dynamic loader alone,
# without the ld.so cache, that the binaries and the CUDA backend find every
# library given only the folders of cudart, cuBLAS and NCCL (verify below);
# and that the kit stays under 60 MB.
#
# The kit is built here, where the toolkit, NCCL and the Debian packages are
# (make gpu-kit runs scripts/deps.sh, which may call apt-get), and carried to
# the GPU box, which needs neither a compiler nor a package registry.
#
#   sh tests/gpu/kit.sh KIT                  finish and prove the kit
#   sh tests/gpu/kit.sh --verify KIT DIRS    the proof without the ld.so cache alone
# shellcheck disable=SC2086 # lists are meant to split
set -eu
# The box provides these (a regular expression over sonames).
BOX='^(linux-vdso|ld-linux|libc\.so|libm\.so|libmvec|libdl\.so|libpthread|librt\.so|libresolv|libutil|libstdc\+\+|libgcc_s|libcuda\.so|libcudart|libcublas|libcublasLt|libnccl)'
LDSO=/lib64/ld-linux-x86-64.so.2

# verify KIT DIRS: without the ld.so cache and given only DIRS (colon-
# separated: where cudart, cuBLAS and NCCL are), every binary of the kit and
# its CUDA backend find every library, in the kit, the C library's folders or
# DIRS.  ld.so says "X => not found" for a library it cannot find and
# "cannot open ..." / "error while loading ..." when it cannot go on: both fail.
verify() {
    vkit=$(cd "$1" && pwd -P)
    vdirs=$2
    vstatus=0
    [ -x "$LDSO" ] || { echo "gpu-kit: no $LDSO here: cannot prove the kit without the ld.so cache" >&2; return 1; }
    for b in "$vkit/ddpbench" "$vkit/lib/libddpbench-cuda.so" "$vkit"/tests/test_*; do
        vrc=0
        list=$("$LDSO" --inhibit-cache --library-path "$vdirs" --list "$b" 2>&1) || vrc=$?
        broken=$(echo "$list" | grep -E 'not found|cannot open|error while loading|No such file' || true)
        outside=$(echo "$list" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }' | while read -r so path; do
            case "$(readlink -f "$path" 2>/dev/null)" in
            "$vkit"/lib/* | /lib/* | /usr/lib/* | /lib64/*) ;;
            *) echo "$so" ;;
            esac
        done | sort | tr '\n' ' ')
        unexpected=$(echo "$outside" | tr ' ' '\n' | grep -v '^$' | grep -Ev '^lib(cudart|cublas|cublasLt|nccl)\.' | tr '\n' ' ' || true)
        if [ -n "$broken" ] || [ "$vrc" -ne 0 ]; then
            echo "gpu-kit: $(basename "$b") without the ld.so cache (given ${vdirs:-no folder}): $(echo "$broken" | sed 's/^[[:space:]]*//' | tr '\n' ';')${broken:+ }(ld.so exit $vrc)" >&2
            vstatus=1
        elif [ -n "$unexpected" ]; then
            echo "gpu-kit: $(basename "$b") without the ld.so cache takes from outside the kit: $unexpected" >&2
            vstatus=1
        else
            echo "gpu-kit: $(basename "$b") without the ld.so cache: everything found; from outside the kit and the C library only ${outside:-nothing }(given ${vdirs:-no folder})"
        fi
    done
    return $vstatus
}
if [ "${1:-}" = --verify ]; then
    verify "$2" "${3:-}"
    exit $?
fi

KIT=$1
cd "$(dirname "$0")/../.."
mkdir -p "$KIT/lib"
cp tests/gpu/check.sh tests/gpu/torch_ref.py "$KIT/"
BINS="$KIT/ddpbench $KIT/lib/libddpbench-cuda.so $(ls "$KIT"/tests/test_*)"
for b in $BINS; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// { print $1, $3 }'
done | sort -u | while read -r so path; do
    echo "$so" | grep -Eq "$BOX" && continue
    [ "$(readlink -f "$path")" = "$(readlink -f "$KIT/lib/$so" 2>/dev/null || true)" ] && continue # a second run
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
# CUDA), given only the folders cudart, cuBLAS and NCCL come from -- taken
# from what lib/libddpbench-cuda.so links (ddpbench itself links none: it
# loads the backend at run time) -- checked by verify() below.
dirs=$(ldd "$KIT/lib/libddpbench-cuda.so" | awk '$1 ~ /^lib(cudart|cublas|cublasLt|nccl)\./ && $3 ~ /^\// { print $3 }' |
    xargs -r -n1 dirname | sort -u | tr '\n' ':')
# What the backend links, for check.sh to name every missing one at once (ld.so
# stops at the first).
objdump -p "$KIT/lib/libddpbench-cuda.so" | awk '$1 == "NEEDED" { print $2 }' >"$KIT/lib/libddpbench-cuda.needs"
for so in libcudart libcublas libnccl; do
    case "$(ldd "$KIT/lib/libddpbench-cuda.so")" in *"$so."*) ;; *)
        echo "gpu-kit: lib/libddpbench-cuda.so does not link $so" >&2; status=1 ;; esac
done
verify "$KIT" "${dirs%:}" || status=1
glibc=$(for b in $BINS "$KIT"/lib/*; do objdump -T "$b" 2>/dev/null; done | grep -o 'GLIBC_[0-9.]*' |
    sort -t_ -k2 -V -u | tail -n 1)
{
    echo "ddpbench GPU kit ($(git describe --always --dirty 2>/dev/null || echo unknown)), built $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "built:  on a machine with the CUDA toolkit and NCCL (make gpu-kit), to be carried to"
    echo "        the GPU box as it is: the box needs no compiler and no package registry"
    echo "run:    DDPBENCH_CHECK_OUT=DIR sh check.sh    (at most 345 s on one H200; sh check.sh"
    echo "        --dry-run lists the steps and their limits).  DIR then holds check.json,"
    echo "        check.log and check-logs.tar.gz and nothing else (default: results/ here),"
    echo "        written as the check goes: a check killed from outside leaves what it"
    echo "        finished; the last line printed is the verdict: PASS (exit 0), FAIL (1),"
    echo "        no GPU driver / no GPU (3).  python3 runs with the box's own library path"
    echo "needs:  the NVIDIA driver; CUDA 13 cudart and cuBLAS and NCCL 2, from the toolkit"
    echo "        (/usr/local/cuda or CUDA_HOME) or a python3's site-packages/nvidia/*/lib"
    echo "        (PyTorch's wheels), found by check.sh; glibc >= ${glibc#GLIBC_}, libstdc++;"
    echo "        python3 with torch for the PyTorch comparison (else that step is skipped)"
    echo "files:"
    (cd "$KIT" && find . -type f ! -name MANIFEST | sort | while read -r f; do
        printf '  %-40s %9d bytes\n' "$f" "$(wc -c <"$f")"; done)
} >"$KIT/MANIFEST"
bytes=$(du -sb "$KIT" | cut -f1)
echo "gpu-kit: $KIT: $(find "$KIT/lib" -type f -name "*.so*" | wc -l) libraries, $((bytes / 1048576)) MiB ($bytes bytes)"
[ "$bytes" -lt $((60 * 1000 * 1000)) ] || { echo "gpu-kit: over 60 MB" >&2; status=1; }
exit $status
