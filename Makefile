# ddpbench: build, test, demo, install.
#
#   make              build ./ddpbench (CUDA backend too when nvcc is found)
#   make test         every test: unit suites, end-to-end scripts, the unit
#                     suites again under ASan+UBSan, DP/DDP under TSan, fuzzers
#   make demo         build, then a short compare run that shows the tool
#   make bench        the performance benchmarks (figures for the issues)
#   make test-cuda-emu  the CUDA backend and kernels on an emulated GPU (no GPU
#                     needed; a few minutes); tests/gpu/check.sh on a real one
#   make install PREFIX=/usr/local   (bin/ddpbench, lib/ddpbench/libddpbench-cuda.so)
#
# Options: NO_CUDA=1 (CPU only), DEBUG=1 (-O0 -g), SAN=address|thread,
# CUDA_HOME=/usr/local/cuda, NVCC_GENCODE="-gencode ...".
# Missing Debian libraries are installed by scripts/deps.sh (as root), or it
# stops with the exact apt-get command.

CC       ?= cc
PREFIX   ?= /usr/local
CUDA_HOME ?= /usr/local/cuda
SAN      ?=
DEBUG    ?=
NO_CUDA  ?=

# ---- configuration and build directory --------------------------------------
ifeq ($(SAN),)
  BUILD := build/release
else
  BUILD := build/san-$(SAN)
  NO_CUDA := 1   # sanitizer runtimes and the CUDA runtime do not mix well
endif
ifneq ($(DEBUG),)
  BUILD := $(BUILD)-debug
  OPT := -O0 -g
else
  OPT := -O3 -g
endif
ifeq ($(SAN),address)
  OPT += -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined
  SANLD := -fsanitize=address,undefined
else ifeq ($(SAN),thread)
  OPT += -fsanitize=thread -fno-omit-frame-pointer
  SANLD := -fsanitize=thread
else ifneq ($(SAN),)
  $(error SAN must be address or thread, got '$(SAN)')
endif

# ---- dependencies (installed on first use) ----------------------------------
NODEPS_GOALS := clean distclean help
WANT_DEPS := $(if $(MAKECMDGOALS),$(filter-out $(NODEPS_GOALS),$(MAKECMDGOALS)),all)
ifneq ($(WANT_DEPS),)
  include build/deps.mk
endif
build/deps.mk: scripts/deps.sh
	@mkdir -p build
	@scripts/deps.sh > $@.tmp && mv $@.tmp $@

# ---- CUDA detection ---------------------------------------------------------
NVCC := $(CUDA_HOME)/bin/nvcc
HAVE_CUDA :=
ifeq ($(NO_CUDA),)
  ifneq ($(wildcard $(NVCC)),)
  ifneq ($(wildcard common/device/backend_cuda.c),)
    HAVE_CUDA := 1
    CUDA_VERSION := $(shell $(NVCC) --version | sed -n 's/.*release \([0-9.]*\).*/\1/p')
  endif
  endif
endif
NCCL_INC := $(firstword $(wildcard $(CUDA_HOME)/include/nccl.h /usr/include/nccl.h))
NCCL_LIBDIR := $(patsubst %/,%,$(dir $(firstword $(wildcard $(CUDA_HOME)/lib/libnccl.so $(CUDA_HOME)/lib64/libnccl.so /usr/lib/x86_64-linux-gnu/libnccl.so))))
HAVE_NCCL :=
ifneq ($(HAVE_CUDA),)
  ifneq ($(NCCL_INC),)
    ifneq ($(NCCL_LIBDIR),)
      HAVE_NCCL := 1
    endif
  endif
endif
# sm_80 (A100) and sm_90 (H100/H200) machine code, plus compute_90 PTX that the
# driver compiles for newer GPUs on first use.
NVCC_GENCODE ?= -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
                -gencode arch=compute_90,code=compute_90

ifeq ($(MAKELEVEL),0)
  ifneq ($(WANT_DEPS),)
    ifneq ($(OPENBLAS_VERSION),)
      $(info CUDA: $(if $(HAVE_CUDA),yes ($(CUDA_VERSION)),$(if $(NO_CUDA),no (NO_CUDA=1),no (no $(NVCC) or no CUDA backend sources))))
      $(info NCCL: $(if $(HAVE_NCCL),yes,no))
      $(info OpenBLAS: $(OPENBLAS_VERSION))
    endif
  endif
endif

# ---- flags ------------------------------------------------------------------
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra
INCS     := -Icommon -I.
# -fno-math-errno: nothing reads errno after a math call, and without it gcc
# may not vectorise loops calling expf/sqrtf.
CFLAGS   += $(CSTD) $(OPT) $(WARN) $(INCS) $(DEPS_CFLAGS) -fno-math-errno -pthread -MMD -MP
LDLIBS   := $(DEPS_LIBS) -lm -lpthread -lrt
LDFLAGS  += $(SANLD)

# The CUDA parts (the *_cuda.c and *_nccl.c files and the kernels) go into
# libddpbench-cuda.so, which the program loads only when CUDA is asked for or
# probed (common/device/cuda_lib.h): ddpbench itself links no CUDA library,
# so a CPU run never maps them.  The library holds its own copy of what it
# uses of libddpbench.a and exports only its entry points, so every object is
# position independent.  The programs find it through their run path: beside
# the binary or in ../lib/ddpbench (make install); test and bench binaries
# in the build folder.
CU_SRCS  :=
CUDA_LIB :=
CUDA_LDLIBS :=
ifneq ($(HAVE_CUDA),)
  CFLAGS += -DHAVE_CUDA -I$(CUDA_HOME)/include -fPIC
  CU_SRCS := $(wildcard common/*/*.cu dp/*.cu ddp/*.cu)
  CUDA_LIB := $(BUILD)/libddpbench-cuda.so
  CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
  LDLIBS += -ldl
  ifneq ($(HAVE_NCCL),)
    CFLAGS += -DHAVE_NCCL
    CUDA_LDLIBS += -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl
  endif
endif
RUNPATH      := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib/ddpbench'
TEST_RUNPATH := -Wl,-rpath,$(abspath $(BUILD))
# --fmad=false: no contraction into FMAs, so the elementwise kernels round
# exactly like the CPU backend (they are memory-bound; FMA would not speed them).
NVCCFLAGS := -O2 -std=c++17 --fmad=false $(NVCC_GENCODE) -Icommon -Xcompiler -Wall,-Wextra,-fPIC -MMD -MP

# ---- sources ----------------------------------------------------------------
# Files named *_cuda.c or *_nccl.c need the CUDA/NCCL headers: only with them.
CUDA_ONLY_C := $(wildcard common/*/*_cuda.c dp/*_cuda.c ddp/*_cuda.c)
NCCL_ONLY_C := $(wildcard common/*/*_nccl.c ddp/*_nccl.c)
LIB_C    := $(wildcard common/*/*.c dp/*.c ddp/*.c)
ifeq ($(HAVE_CUDA),)
  LIB_C := $(filter-out $(CUDA_ONLY_C) $(NCCL_ONLY_C),$(LIB_C))
else ifeq ($(HAVE_NCCL),)
  LIB_C := $(filter-out $(NCCL_ONLY_C),$(LIB_C))
endif
# the library's own objects, out of libddpbench.a
CUDA_C   := $(filter $(CUDA_ONLY_C) $(NCCL_ONLY_C),$(LIB_C))
LIB_C    := $(filter-out $(CUDA_C),$(LIB_C))
LIB_OBJS := $(LIB_C:%.c=$(BUILD)/%.o)
CUDA_OBJS := $(CUDA_C:%.c=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
MAIN_OBJS := $(BUILD)/bench/main.o
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
LIB      := $(BUILD)/libddpbench.a

.PHONY: all test test-layers test-unit test-e2e test-asan test-tsan test-fuzz fuzz demo bench install \
        clean distclean help test-cuda-emu
.DEFAULT_GOAL := all

all: ddpbench

# ./ddpbench is a copy of the release (or sanitizer) build's binary, with the
# CUDA library beside it when there is one.
ddpbench: $(BUILD)/ddpbench $(CUDA_LIB)
	cp $< $@
	$(if $(CUDA_LIB),cp $(CUDA_LIB) libddpbench-cuda.so,rm -f libddpbench-cuda.so)

$(BUILD)/ddpbench: $(MAIN_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(MAIN_OBJS) $(LIB) $(LDLIBS) $(RUNPATH)

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Only the entry points cuda_lib.h names leave the library; everything else
# in it (its copy of backend.c, status.c, ...) stays its own.
$(BUILD)/cuda.map: Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@printf '{ global: backend_cuda_available; backend_cuda_probe; backend_cuda_create;%s local: *; };\n' \
	  '$(if $(HAVE_NCCL), comm_nccl_create;)' >$@

$(CUDA_LIB): $(CUDA_OBJS) $(LIB) $(BUILD)/cuda.map
	$(CC) -shared -o $@ $(CUDA_OBJS) $(LIB) -Wl,--version-script=$(BUILD)/cuda.map -Wl,-Bsymbolic \
	  -Wl,--no-undefined $(CUDA_LDLIBS) $(LDLIBS)

# Objects depend on the flags they were built with: a change of NO_CUDA or
# DEBUG rebuilds them.
FLAGS_STAMP := $(BUILD)/flags.txt
FLAGS_NOW := $(CC) $(CFLAGS) | $(NVCCFLAGS) | $(LDLIBS)
ifneq ($(WANT_DEPS),)
  ifneq ($(shell cat $(FLAGS_STAMP) 2>/dev/null),$(FLAGS_NOW))
    $(shell mkdir -p $(BUILD) && echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))
  endif
endif

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | build/deps.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) | build/deps.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB) $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CRITERION_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(CRITERION_LIBS) $(LDLIBS) \
	  $(TEST_RUNPATH)

$(BUILD)/bench/%: bench/%.c $(LIB) $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(LDLIBS) $(TEST_RUNPATH)

# ---- tests ------------------------------------------------------------------
# Criterion runs each binary's tests in parallel processes; --jobs 2 matches
# the 2-core machines CI uses, and a failing assertion names file and line.
CRITERION_ARGS ?= --jobs 2

test: test-layers test-unit test-e2e test-asan test-tsan test-fuzz
	@echo "make test: all passed"

# The floors of common/ (common/README.md): includes and calls run one way;
# the self-test plants each kind of violation in a small tree and sees it caught.
test-layers: ddpbench
	@echo "== tests/structure/layers.sh"; sh tests/structure/layers.sh $(BUILD)
	@echo "== tests/structure/layers_selftest.sh"; sh tests/structure/layers_selftest.sh

test-unit: $(TEST_BINS) ddpbench
	@set -e; for t in $(TEST_BINS); do echo "== $$t"; $$t $(CRITERION_ARGS); done

test-e2e: ddpbench
	@set -e; for t in tests/e2e/e2e_*.sh; do echo "== $$t"; sh $$t ./ddpbench; done

test-asan:
	$(MAKE) SAN=address test-unit-san

test-tsan:
	$(MAKE) SAN=thread test-unit-tsan

# Under a sanitizer: every unit suite (ASan+UBSan), or the threaded ones (TSan).
test-unit-san: $(TEST_BINS)
	@set -e; for t in $(TEST_BINS); do echo "== $$t (SAN=$(SAN))"; \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $$t $(CRITERION_ARGS); done

TSAN_TESTS := $(filter $(BUILD)/tests/unit/test_dp% $(BUILD)/tests/unit/test_ddp% $(BUILD)/tests/unit/test_comm% \
                        $(BUILD)/tests/unit/test_backend_cpu,$(TEST_BINS))
test-unit-tsan: $(TSAN_TESTS)
	@set -e; for t in $(TSAN_TESTS); do echo "== $$t (SAN=thread)"; \
	  TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/unit/tsan.supp" $$t $(CRITERION_ARGS); done

# The CUDA code without a GPU: backend_cuda.c and the kernels against a CPU
# emulation of the CUDA runtime and cuBLAS, under ASan+UBSan (not part of
# `make test`: it takes minutes on 2 cores).
test-cuda-emu: | build/deps.mk
	sh tests/cuda_emu/run.sh

# ---- fuzzing (libFuzzer, clang) ----------------------------------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build/fuzz/%)
FUZZ_TIME ?= 20
FUZZ_LIB_C := common/base/status.c common/base/text.c common/base/atomic_file.c common/base/infile.c \
              common/base/hash.c common/base/rng.c \
              common/data/data_npy.c common/data/data.c \
              common/base/kinds.c common/io/safetensors.c
build/fuzz/clang.ok: scripts/deps.sh
	@mkdir -p build/fuzz
	@scripts/deps.sh fuzz && touch $@

build/fuzz/%: tests/fuzz/%.c $(FUZZ_LIB_C) | build/deps.mk build/fuzz/clang.ok
	@mkdir -p $(dir $@)
	clang $(CSTD) -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all $(INCS) $(DEPS_CFLAGS) \
	  -o $@ $< $(FUZZ_LIB_C) $(DEPS_LIBS) -lm

# A fuzzer's dictionary, when there is one, is tests/fuzz/<fuzzer>.dict; its seeds
# are in tests/fuzz/corpus/<fuzzer>/.
test-fuzz: $(FUZZ_BINS)
	@set -e; for f in $(FUZZ_BINS); do echo "== $$f ($(FUZZ_TIME)s)"; \
	  mkdir -p build/fuzz/corpus-$$(basename $$f); \
	  dict=tests/fuzz/$$(basename $$f).dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
	  $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=0 $$dict build/fuzz/corpus-$$(basename $$f) \
	    tests/fuzz/corpus/$$(basename $$f) 2>build/fuzz/$$(basename $$f).log || \
	    { tail -40 build/fuzz/$$(basename $$f).log; exit 1; }; done

fuzz:
	$(MAKE) test-fuzz FUZZ_TIME=600

# ---- demo, benchmarks, install ----------------------------------------------
demo: ddpbench
	./ddpbench --mode compare

bench: $(BENCH_BINS) ddpbench
	@set -e; for b in $(BENCH_BINS); do echo "== $$b"; $$b; done

install: ddpbench
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 ddpbench $(DESTDIR)$(PREFIX)/bin/ddpbench
	$(if $(CUDA_LIB),install -d $(DESTDIR)$(PREFIX)/lib/ddpbench)
	$(if $(CUDA_LIB),install -m 755 $(CUDA_LIB) $(DESTDIR)$(PREFIX)/lib/ddpbench/libddpbench-cuda.so)

clean:
	rm -rf build/release build/release-debug build/san-* build/fuzz build/cuda-emu build/gpu-check ddpbench \
	  libddpbench-cuda.so

distclean:
	rm -rf build ddpbench libddpbench-cuda.so

help:
	@sed -n '2,15p' Makefile | sed 's/^# \{0,1\}//'

# The dependency files of what this configuration builds (not every .d under
# build/: one left by a file that has since moved would name a source that is
# gone).
-include $(LIB_OBJS:.o=.d) $(CUDA_OBJS:.o=.d) $(MAIN_OBJS:.o=.d) $(TEST_BINS:=.d) $(BENCH_BINS:=.d)
