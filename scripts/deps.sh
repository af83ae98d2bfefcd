#!/bin/sh
# scripts/deps.sh: make sure the libraries ddpbench builds against are present
# (OpenBLAS, cJSON, Criterion, found with pkg-config), installing the Debian
# packages when run as root, else stopping with the exact command to run.
# Prints the make variables the build needs (the Makefile includes them).
set -u
PKGS="libopenblas-dev libcriterion-dev libcjson-dev pkg-config"
need_install=no
command -v pkg-config >/dev/null 2>&1 || need_install=yes
if [ "$need_install" = no ]; then
    for m in openblas criterion libcjson; do
        pkg-config --exists "$m" 2>/dev/null || need_install=yes
    done
fi
if [ "$need_install" = yes ]; then
    if [ "$(id -u)" -ne 0 ]; then
        echo "ddpbench: missing libraries; run as root:" >&2
        echo "  apt-get update && apt-get install -y $PKGS" >&2
        exit 1
    fi
    echo "deps: installing $PKGS" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update >&2 && apt-get install -y $PKGS >&2 || {
        echo "ddpbench: apt-get install failed; run: apt-get update && apt-get install -y $PKGS" >&2
        exit 1
    }
fi
echo "DEPS_CFLAGS := $(pkg-config --cflags openblas libcjson)"
echo "DEPS_LIBS := $(pkg-config --libs openblas libcjson)"
echo "CRITERION_CFLAGS := $(pkg-config --cflags criterion)"
echo "CRITERION_LIBS := $(pkg-config --libs criterion)"
echo "OPENBLAS_VERSION := $(pkg-config --modversion openblas)"
