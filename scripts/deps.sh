#!/bin/sh
# scripts/deps.sh: make sure the libraries ddpbench builds against are present
# (OpenBLAS, cJSON, Criterion, Open MPI with its mpirun, found with
# pkg-config), installing the Debian packages when run as root, else
# stopping with the exact command to run.
# Prints the make variables the build needs (the Makefile includes them).
# `deps.sh fuzz` instead makes sure clang can build libFuzzer targets (clang
# and its compiler-rt runtime), for `make test-fuzz`; `deps.sh test` that
# the tools the end-to-end tests use are there (pgrep, python3 with numpy
# and torch for the file and JSON checks, gnuplot for the sweep's charts, perf
# to count system calls, g++ for the CUDA emulator's kernels, ip, tc and unshare for two hosts made of
# network namespaces, headless Chromium for --report's pages),
# so a fresh machine runs every check instead of skipping some.
set -u

install_or_stop() { # what, packages...
    what=$1
    shift
    if [ "$(id -u)" -ne 0 ]; then
        echo "ddpbench: missing $what; run as root:" >&2
        echo "  apt-get update && apt-get install -y $*" >&2
        exit 1
    fi
    echo "deps: installing $*" >&2
    export DEBIAN_FRONTEND=noninteractive
    # Why a lock: make test installs the suites' tools and the fuzzers' clang
    # from two jobs at once, and two apt-gets at once fail on apt's own locks
    # ("Could not get lock /var/lib/apt/lists/lock").  Our installs take turns
    # under flock (util-linux: essential on Debian); another program's apt
    # run is waited out by apt's DPkg::Lock::Timeout.
    lock=${TMPDIR:-/tmp}/ddpbench-deps.lock
    {
        command -v flock >/dev/null 2>&1 && flock 9
        apt-get -o DPkg::Lock::Timeout=600 update >&2 &&
            apt-get -o DPkg::Lock::Timeout=600 install -y "$@" >&2
    } 9>"$lock" || {
        echo "ddpbench: apt-get install failed; run: apt-get update && apt-get install -y $*" >&2
        exit 1
    }
}

if [ "${1:-}" = fuzz ]; then
    t=$(mktemp -d)
    trap 'rm -rf "$t"' EXIT
    printf '#include <stddef.h>\n#include <stdint.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$t/f.c"
    if ! clang -fsanitize=fuzzer,address "$t/f.c" -o "$t/f" 2>/dev/null; then
        install_or_stop "clang with libFuzzer" clang libclang-rt-dev
        clang -fsanitize=fuzzer,address "$t/f.c" -o "$t/f" || {
            echo "ddpbench: clang still cannot build a libFuzzer target" >&2
            exit 1
        }
    fi
    exit 0
fi

if [ "${1:-}" = test ]; then
    # each missing tool adds its Debian package
    missing=
    command -v pgrep >/dev/null 2>&1 || missing="$missing procps"
    command -v script >/dev/null 2>&1 || missing="$missing bsdutils"
    command -v gnuplot >/dev/null 2>&1 || missing="$missing gnuplot-nox"
    # the CUDA emulator's kernels are C++ (make test-cuda-emu)
    command -v g++ >/dev/null 2>&1 || missing="$missing g++"
    # two hosts on one machine (e2e_mpi_netns.sh): ip and tc, unshare
    command -v ip >/dev/null 2>&1 || missing="$missing iproute2"
    command -v tc >/dev/null 2>&1 || missing="$missing iproute2"
    command -v unshare >/dev/null 2>&1 || missing="$missing util-linux"
    # system calls counted by the kernel's tracepoint (tests/e2e/e2e_syscalls.sh)
    command -v perf >/dev/null 2>&1 || missing="$missing linux-perf"
    # --report's pages are opened in a real browser (tests/e2e/e2e_page.sh)
    command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
    # Debian's python (another python3 may come first on PATH: the tests
    # look for one with the modules)
    py=/usr/bin/python3
    [ -x $py ] || missing="$missing python3"
    $py -c 'import numpy' >/dev/null 2>&1 || missing="$missing python3-numpy"
    $py -c 'import torch' >/dev/null 2>&1 || missing="$missing python3-torch"
    if [ -n "$missing" ]; then
        # shellcheck disable=SC2086 # the list is meant to split
        install_or_stop "the test tools" --no-install-recommends $missing
    fi
    exit 0
fi

PKGS="libopenblas-dev libcriterion-dev libcjson-dev pkg-config libopenmpi-dev openmpi-bin"
# a machine with no C compiler yet (a minimal install) gets gcc
command -v "${CC:-cc}" >/dev/null 2>&1 || PKGS="gcc libc6-dev $PKGS"
need_install=no
command -v "${CC:-cc}" >/dev/null 2>&1 || need_install=yes
command -v pkg-config >/dev/null 2>&1 || need_install=yes
if [ "$need_install" = no ]; then
    for m in openblas criterion libcjson ompi-c; do
        pkg-config --exists "$m" 2>/dev/null || need_install=yes
    done
    command -v mpirun >/dev/null 2>&1 || need_install=yes
fi
if [ "$need_install" = yes ]; then
    # shellcheck disable=SC2086 # the list is meant to split
    install_or_stop libraries $PKGS
fi
echo "DEPS_CFLAGS := $(pkg-config --cflags openblas libcjson)"
echo "DEPS_LIBS := $(pkg-config --libs openblas libcjson)"
echo "CRITERION_CFLAGS := $(pkg-config --cflags criterion)"
echo "CRITERION_LIBS := $(pkg-config --libs criterion)"
echo "OPENBLAS_VERSION := $(pkg-config --modversion openblas)"
# Open MPI (the mpirun launcher, --comm mpi): where its mpi.h is
echo "MPI_CFLAGS := $(pkg-config --cflags ompi-c)"
echo "MPI_LIBS := $(pkg-config --libs ompi-c)"
echo "MPI_INCDIR := $(pkg-config --variable=includedir ompi-c)"
echo "MPI_VERSION := $(pkg-config --modversion ompi-c)"
