# ddpbench: build, test, demo, install.
#
#   make              build ./ddpbench (CUDA backend too when nvcc is found)
#   make test         every test: unit suites, end-to-end scripts, the emulated
#                     GPU, the unit suites again under ASan+UBSan, DP/DDP under
#                     TSan, fuzzers
#   make demo         build, then a short compare run that shows the tool
#   make bench        the performance benchmarks (figures for the issues)
#   make test-cuda-emu  the CUDA backend and kernels on an emulated GPU (no GPU
#                     needed; part of make test); tests/gpu/check.sh on a real one
#   make gpu-kit      build/gpu-kit: the GPU check (tests/gpu/check.sh) with
#                     ddpbench, its GPU tests and the libraries a bare GPU box
#                     lacks, built here (it needs the toolkit and NCCL) and
#                     carried there: DDPBENCH_CHECK_OUT=DIR sh check.sh
#   make install PREFIX=/usr/local   (bin/ddpbench, lib/ddpbench/libddpbench-cuda.so)
#
# Options: NO_CUDA=1 (CPU only), NO_MPI=1 (no mpirun launcher, no --comm mpi),
# DEBUG=1 (-O0 -g), SAN=address|thread,
# EMU=1 (the CUDA backend on the emulated GPU, in build/cuda-emu),
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
# EMU=1 builds the CUDA backend against the emulated GPU of tests/cuda_emu/
# (no toolkit needed) into build/cuda-emu, with the release build's flags.
EMU      ?=
ifeq ($(SAN),)
  BUILD := build/release
else
  BUILD := build/san-$(SAN)
  NO_CUDA := 1   # sanitizer runtimes and the CUDA runtime do not mix well
  NO_MPI := 1    # nor MPI's (its tests need mpirun: tests/e2e/e2e_mpi.sh)
endif
ifneq ($(EMU),)
  BUILD := build/cuda-emu$(if $(SAN),-$(SAN))
  NO_CUDA :=
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
NODEPS_GOALS := clean distclean help print-main-objs
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
ifneq ($(EMU),)
  HAVE_CUDA := emu
  HAVE_NCCL := $(if $(wildcard tests/cuda_emu/nccl.h),emu)
endif
# MPI: the mpirun launcher (ddp/launch_mpi.c) and --comm mpi (comm_mpi.c),
# when scripts/deps.sh found Open MPI's mpi.h (it installs libopenmpi-dev).
HAVE_MPI :=
ifeq ($(NO_MPI),)
  ifneq ($(MPI_INCDIR),)
    ifneq ($(wildcard $(MPI_INCDIR)/mpi.h),)
      HAVE_MPI := 1
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
      $(info CUDA: $(if $(filter emu,$(HAVE_CUDA)),emulated (tests/cuda_emu),$(if $(HAVE_CUDA),yes ($(CUDA_VERSION)),$(if $(NO_CUDA),no (NO_CUDA=1),no (no $(NVCC) or no CUDA backend sources)))))
      $(info NCCL: $(if $(filter emu,$(HAVE_NCCL)),emulated,$(if $(HAVE_NCCL),yes,no)))
      $(info MPI: $(if $(HAVE_MPI),yes (Open MPI $(MPI_VERSION)),no$(if $(NO_MPI), (NO_MPI=1))))
      $(info OpenBLAS: $(OPENBLAS_VERSION))
    endif
  endif
endif

# ---- flags ------------------------------------------------------------------
CSTD     := -std=c11 -D_GNU_SOURCE
WARN     := -Wall -Wextra
INCS     := -I.
# -fno-math-errno: nothing reads errno after a math call, and without it gcc
# may not vectorise loops calling expf/sqrtf.
CFLAGS   += $(CSTD) $(OPT) $(WARN) $(INCS) $(DEPS_CFLAGS) -fno-math-errno -pthread -MMD -MP
# Each object's frame sizes and direct calls in a .ci file beside it (gcc's
# -fcallgraph-info; it changes no code): tests/structure/stack.sh bounds
# every frame and the deepest chain of them (docs/faults.md: ulimit -s 128).
# Only where an object is compiled (the %.o rule): a program compiled and
# linked in one step would leave its .ci among the executables (the GPU kit).
ifeq ($(origin STACK_INFO),undefined)
  STACK_INFO := $(shell $(CC) -fcallgraph-info=su -E -x c /dev/null >/dev/null 2>&1 && echo -fcallgraph-info=su)
endif
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
EMU_OBJS :=
CUDA_LIB :=
CUDA_LDLIBS :=
ifeq ($(HAVE_CUDA),emu)
  # The emulated runtime, cuBLAS (and NCCL) headers stand in for the toolkit's,
  # and the CUDA code is linked in (DDPBENCH_CUDA_LINKED): no library to load.
  CFLAGS += -DHAVE_CUDA -DDDPBENCH_CUDA_LINKED -Itests/cuda_emu
  CU_SRCS := $(wildcard common/*/*.cu)
  EMU_OBJS := $(patsubst tests/cuda_emu/%.c,$(BUILD)/tests/cuda_emu/%.o,$(wildcard tests/cuda_emu/emu_*.c))
  LDLIBS += -lstdc++
  ifneq ($(HAVE_NCCL),)
    CFLAGS += -DHAVE_NCCL
  endif
else ifneq ($(HAVE_CUDA),)
  CFLAGS += -DHAVE_CUDA -I$(CUDA_HOME)/include -fPIC
  CU_SRCS := $(wildcard common/*/*.cu)
  CUDA_LIB := $(BUILD)/libddpbench-cuda.so
  CUDA_LDLIBS := -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcudart -lcublas -lstdc++
  LDLIBS += -ldl
  ifneq ($(HAVE_NCCL),)
    CFLAGS += -DHAVE_NCCL
    CUDA_LDLIBS += -L$(NCCL_LIBDIR) -Wl,-rpath,$(NCCL_LIBDIR) -lnccl
  endif
endif
# MPI is linked where it is used (--as-needed): the programs that may run
# under mpirun; the CUDA library never references it (NCCL's id travels
# through a callback, comm.h's exchange).
ifneq ($(HAVE_MPI),)
  CFLAGS += -DHAVE_MPI $(MPI_CFLAGS)
  LDLIBS += -Wl,--push-state,--as-needed $(MPI_LIBS) -Wl,--pop-state
endif
RUNPATH      := -Wl,-rpath,'$$ORIGIN' -Wl,-rpath,'$$ORIGIN/../lib/ddpbench'
TEST_RUNPATH := -Wl,-rpath,$(abspath $(BUILD))
# --fmad=false: no contraction into FMAs, so the elementwise kernels round
# exactly like the CPU backend (they are memory-bound; FMA would not speed them).
NVCCFLAGS := -O2 -std=c++17 --fmad=false $(NVCC_GENCODE) -I. -Xcompiler -Wall,-Wextra,-fPIC -MMD -MP

# ---- sources ----------------------------------------------------------------
# The library: the shared core's floors, the two strategies, the program's
# floors (app/*/: its outputs, --predict's model, ...) and the gate (gate/),
# linked by the tests and benchmarks too.
# Files named *_cuda.c or *_nccl.c need the CUDA/NCCL headers: only with them;
# *_mpi.c need mpi.h.
SRC_DIRS := $(sort $(dir $(wildcard common/*/ app/*/))) dp/ ddp/ gate/
CUDA_ONLY_C := $(wildcard $(addsuffix *_cuda.c,$(SRC_DIRS)))
NCCL_ONLY_C := $(wildcard $(addsuffix *_nccl.c,$(SRC_DIRS)))
MPI_ONLY_C := $(wildcard $(addsuffix *_mpi.c,$(SRC_DIRS)))
LIB_C    := $(wildcard $(addsuffix *.c,$(SRC_DIRS)))
ifeq ($(HAVE_MPI),)
  LIB_C := $(filter-out $(MPI_ONLY_C),$(LIB_C))
endif
ifeq ($(HAVE_CUDA),)
  LIB_C := $(filter-out $(CUDA_ONLY_C) $(NCCL_ONLY_C),$(LIB_C))
else ifeq ($(HAVE_NCCL),)
  LIB_C := $(filter-out $(NCCL_ONLY_C),$(LIB_C))
endif
ifeq ($(HAVE_CUDA),emu)
  CUDA_C   :=
  LIB_OBJS := $(LIB_C:%.c=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.cu.o) $(EMU_OBJS)
  CUDA_OBJS :=
else
  # the library's own objects, out of libddpbench.a
  CUDA_C   := $(filter $(CUDA_ONLY_C) $(NCCL_ONLY_C),$(LIB_C))
  LIB_C    := $(filter-out $(CUDA_C),$(LIB_C))
  LIB_OBJS := $(LIB_C:%.c=$(BUILD)/%.o)
  CUDA_OBJS := $(CUDA_C:%.c=$(BUILD)/%.o) $(CU_SRCS:%.cu=$(BUILD)/%.cu.o)
endif
# --report's style sheet and script, inlined into the page (report_html.c)
PAGE_ASSETS_O := $(BUILD)/app/report/report_page_assets.o
LIB_OBJS += $(PAGE_ASSETS_O)
# app/predict/'s JSON, compiled in (the rule is beside the page assets')
PREDICT_FILES_O := $(BUILD)/app/predict/predict_files.o
LIB_OBJS += $(PREDICT_FILES_O)
APP_C    := $(wildcard app/*.c)
MAIN_OBJS := $(APP_C:%.c=$(BUILD)/%.o)
TEST_SRCS := $(wildcard tests/unit/test_*.c)
TEST_BINS := $(TEST_SRCS:tests/unit/%.c=$(BUILD)/tests/unit/%)
# The NCCL suite (tests/gpu/): wherever NCCL is built, real or emulated; on a
# machine without a GPU its tests skip.
GPU_TEST_SRCS := $(if $(HAVE_NCCL),$(wildcard tests/gpu/test_*.c))
GPU_TEST_BINS := $(GPU_TEST_SRCS:tests/gpu/%.c=$(BUILD)/tests/gpu/%)
BENCH_SRCS := $(wildcard bench/bench_*.c)
BENCH_BINS := $(BENCH_SRCS:bench/%.c=$(BUILD)/bench/%)
LIB      := $(BUILD)/libddpbench.a

.PHONY: all test test-layers test-unit test-e2e test-asan test-tsan test-fuzz fuzz demo bench install \
        clean distclean help test-cuda-emu gpu-kit test-gpu-kit print-main-objs
.DEFAULT_GOAL := all

all: ddpbench

# ./ddpbench is a copy of the release (or sanitizer) build's binary, with the
# CUDA library beside it when there is one.
ddpbench: $(BUILD)/ddpbench $(CUDA_LIB)
	cp $< $@
	$(if $(CUDA_LIB),cp $(CUDA_LIB) libddpbench-cuda.so,rm -f libddpbench-cuda.so)

# The program's own objects, for tests that relink it with one object changed.
print-main-objs:
	@echo $(MAIN_OBJS)

$(BUILD)/ddpbench: $(MAIN_OBJS) $(LIB)
	$(CC) $(LDFLAGS) -o $@ $(MAIN_OBJS) $(LIB) $(LDLIBS) $(RUNPATH)

$(LIB): $(LIB_OBJS)
	@rm -f $@
	ar rcs $@ $^

# Only the entry points cuda_lib.h names leave the library; everything else
# in it (its copy of backend.c, status.c, ...) stays its own.
$(BUILD)/cuda.map: Makefile $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	@printf '{ global: backend_cuda_available; backend_cuda_probe; backend_cuda_probe_here; backend_cuda_gpus; backend_cuda_create;%s local: *; };\n' \
	  '$(if $(HAVE_NCCL), comm_nccl_create; comm_nccl_group_create;)' >$@

$(CUDA_LIB): $(CUDA_OBJS) $(LIB) $(BUILD)/cuda.map
	$(CC) -shared -o $@ $(CUDA_OBJS) $(LIB) -Wl,--version-script=$(BUILD)/cuda.map -Wl,-Bsymbolic \
	  -Wl,--no-undefined $(CUDA_LDLIBS) $(LDLIBS)

# Objects depend on the flags they were built with: a change of NO_CUDA or
# DEBUG rebuilds them.
FLAGS_STAMP := $(BUILD)/flags.txt
FLAGS_NOW := $(CC) $(CFLAGS) $(STACK_INFO) | $(NVCCFLAGS) | $(LDLIBS)
ifneq ($(WANT_DEPS),)
  ifneq ($(shell cat $(FLAGS_STAMP) 2>/dev/null),$(FLAGS_NOW))
    $(shell mkdir -p $(BUILD) && echo '$(FLAGS_NOW)' > $(FLAGS_STAMP))
  endif
endif

# Provenance (report_env.c puts it in every --json and banner): the source
# revision, the compiler and the flags, compiled into report_env.o alone,
# which is rebuilt when any of them changes.
REVISION := $(shell git describe --always --dirty --abbrev=12 2>/dev/null || echo unknown)
CC_VERSION := $(shell $(CC) --version 2>/dev/null | head -n 1 | tr -d "'\"")
BUILD_CFLAGS := $(CC) $(CSTD) $(OPT) -fno-math-errno $(if $(HAVE_CUDA),-DHAVE_CUDA) \
                $(if $(HAVE_NCCL),-DHAVE_NCCL) $(if $(HAVE_MPI),-DHAVE_MPI)
PROV_STAMP := $(BUILD)/provenance.txt
PROV_NOW := $(REVISION) | $(CC_VERSION) | $(BUILD_CFLAGS)
ifneq ($(WANT_DEPS),)
  ifneq ($(shell cat $(PROV_STAMP) 2>/dev/null),$(PROV_NOW))
    $(shell mkdir -p $(BUILD) && echo '$(PROV_NOW)' > $(PROV_STAMP))
  endif
endif
$(BUILD)/app/report/report_env.o: $(PROV_STAMP)
$(BUILD)/app/report/report_env.o: PROV_DEFS = -DDDPBENCH_REVISION='"$(REVISION)"' \
    -DDDPBENCH_CC='"$(CC_VERSION)"' -DDDPBENCH_CFLAGS='"$(BUILD_CFLAGS)"'

# A text file as the lines of a C string literal.
C_STRING = sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/^/"/' -e 's/$$/\\n"/'

# --emit-pytorch's script body (app/twin_body.py) as a C string for twin.c.
$(BUILD)/app/twin_body.h: app/twin_body.py
	@mkdir -p $(dir $@)
	$(C_STRING) $< >$@
$(BUILD)/app/twin.o: $(BUILD)/app/twin_body.h
$(BUILD)/app/twin.o: CFLAGS += -I$(BUILD)

# --report's page.css and page.js as C strings (report_page.h), an object of
# the report floor built from a generated source.
$(BUILD)/gen/report_page_assets.c: app/report/page.css app/report/page.js
	@mkdir -p $(dir $@)
	{ echo '/* generated from app/report/page.css and page.js */'; \
	  echo 'const char report_page_css[] ='; $(C_STRING) app/report/page.css; \
	  echo ';'; echo 'const char report_page_js[] ='; $(C_STRING) app/report/page.js; \
	  echo ';'; } >$@
$(PAGE_ASSETS_O): $(BUILD)/gen/report_page_assets.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

# app/predict/'s JSON (the shipped hardware/ and workload/ profiles, the
# published cases) as a table of C strings (profile.h's predict_files): a
# name works from any folder and after make install.
PREDICT_JSON := $(sort $(wildcard app/predict/*/*.json)) app/predict/published_cases.json
$(BUILD)/gen/predict_files.c: $(PREDICT_JSON)
	@mkdir -p $(dir $@)
	{ echo '/* generated from app/predict/ */'; echo '#include "app/predict/profile.h"'; \
	  echo 'const predict_file_t predict_files[] = {'; \
	  for f in $^; do echo "{\"$$(basename $$(dirname $$f))\", \"$$(basename $$f .json)\","; \
	    $(C_STRING) $$f; echo '},'; done; echo '{0, 0, 0}};'; } >$@
$(PREDICT_FILES_O): $(BUILD)/gen/predict_files.c $(FLAGS_STAMP)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/%.o: %.c $(FLAGS_STAMP) | build/deps.mk
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(STACK_INFO) $(PROV_DEFS) -c $< -o $@

ifeq ($(HAVE_CUDA),emu)
# Each launch k<<<grid, block, shmem, stream>>>(args); becomes
# emu_launch(grid, block, shmem, stream, [=]() { k(args); }); (emu_kernel.hpp),
# compiled as C++ at the release build's optimisation.
$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) tests/cuda_emu/emu_kernel.hpp | build/deps.mk
	@mkdir -p $(dir $@)
	perl -0777 -pe 's/(\w+)<<<(.*?)>>>\((.*?)\);/emu_launch($$2, [=]() { $$1($$3); });/gs' $< >$@.cpp
	@! grep -q '<<<' $@.cpp || { echo "cuda-emu: a launch in $< was not rewritten" >&2; exit 1; }
	$(CXX) -std=c++17 $(OPT) -ffp-contract=off -Wall -Wextra -include tests/cuda_emu/emu_kernel.hpp -Itests/cuda_emu -I. -MMD -MP -MF $(@:.o=.d) -MT $@ -c $@.cpp -o $@
else
$(BUILD)/%.cu.o: %.cu $(FLAGS_STAMP) | build/deps.mk
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -c $< -o $@
endif

$(BUILD)/tests/unit/%: tests/unit/%.c $(LIB) $(CUDA_LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CRITERION_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(CRITERION_LIBS) $(LDLIBS) \
	  $(TEST_RUNPATH)

# the emulator's own tests (EMU=1 only: they call the emulated runtime)
$(BUILD)/tests/cuda_emu/test_%: tests/cuda_emu/test_%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(CRITERION_CFLAGS) $(LDFLAGS) -o $@ $< $(LIB) $(CRITERION_LIBS) $(LDLIBS)

$(BUILD)/tests/gpu/%: tests/gpu/%.c $(LIB) $(CUDA_LIB)
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

# Each suite runs through scripts/timed.sh, which adds its seconds and result
# to build/test-times.txt; make test ends with that table (a failing suite
# prints it so far), so a slow suite is visible.
TIMED := sh scripts/timed.sh

test: test-layers test-unit test-e2e test-cuda-emu test-gpu-kit test-asan test-tsan test-fuzz
	@$(TIMED) --table $(TEST_T0)
	@echo "make test: all passed"

# make test builds with TEST_JOBS jobs (2: the 2-core machines it runs on),
# its builds being much of its time, while its suites still run one at a
# time, in the order above (each waits for the one before: order-only), so
# that their output stays in order and no two suites' timing checks meet.
TEST_JOBS ?= 2
ifneq ($(filter test,$(MAKECMDGOALS)),)
  ifeq ($(MAKELEVEL),0)
    MAKEFLAGS += -j$(TEST_JOBS)
    TEST_T0 := $(shell date +%s.%N; sh scripts/timed.sh --reset)
  endif
  test-unit: | test-layers
  test-e2e: | test-unit
  test-cuda-emu: | test-e2e
  test-gpu-kit: | test-cuda-emu
  test-asan: | test-gpu-kit
  test-tsan: | test-asan
  test-fuzz: | test-tsan
  # The later suites' builds (the emulated GPU's, the GPU kit, the two
  # sanitizers') are made ahead, one after the other from the layer check
  # on, in the job slot the suite running meanwhile leaves free (started
  # all at once they took both slots and the suites waited for them): each
  # is its own build folder; the suites find them made.  (The test tools
  # are installed once, first: two apt-gets at once would fight over its
  # lock.)
  test-cuda-emu: test-build-emu
  test-gpu-kit: test-build-kit
  test-asan: test-build-asan
  test-tsan: test-build-tsan
  test-build-emu: | test-layers
  test-build-kit: | test-build-emu
  test-build-asan: | test-build-kit
  test-build-tsan: | test-build-asan
  test-e2e test-cuda-emu test-build-emu: test-deps
endif
.PHONY: test-deps test-build-emu test-build-kit test-build-asan test-build-tsan test-build-tsan-bins
test-deps:
	@scripts/deps.sh test
test-build-emu: | build/deps.mk
	+@sh tests/cuda_emu/run.sh --build
test-build-kit: ddpbench
ifeq ($(HAVE_CUDA),1)
	+@mkdir -p build && $(MAKE) --no-print-directory gpu-kit >build/gpu-kit.log 2>&1 || { tail -n 20 build/gpu-kit.log; exit 1; }
endif
test-build-asan:
	+@$(MAKE) --no-print-directory -s SAN=address $(TEST_BINS:$(BUILD)/%=build/san-address/%)
test-build-tsan:
	+@$(MAKE) --no-print-directory -s SAN=thread test-build-tsan-bins

# The floors of common/ (common/README.md): includes and calls run one way;
# the self-test plants each kind of violation in a small tree and sees it caught;
# no frame is large, nor any chain of them (stack.sh, from the .ci files).
test-layers: ddpbench
	@$(TIMED) tests/structure/layers.sh sh tests/structure/layers.sh $(BUILD)
	@$(TIMED) tests/structure/layers_selftest.sh sh tests/structure/layers_selftest.sh
	@$(TIMED) tests/structure/stack.sh sh tests/structure/stack.sh $(BUILD)
	@$(TIMED) tests/structure/stack_selftest.sh sh tests/structure/stack_selftest.sh

test-unit: $(TEST_BINS) $(GPU_TEST_BINS) ddpbench
	@set -e; for t in $(TEST_BINS) $(GPU_TEST_BINS); do $(TIMED) $${t#$(BUILD)/} $$t $(CRITERION_ARGS); done

# The tools the scripts use (pgrep, python3 with numpy and torch, gnuplot)
# are installed first, as the build's libraries are: no check is skipped.
test-e2e: ddpbench
	@scripts/deps.sh test
	@set -e; for t in tests/e2e/e2e_*.sh; do $(TIMED) $$t sh $$t ./ddpbench; done

test-asan:
	$(MAKE) SAN=address test-unit-san

test-tsan:
	$(MAKE) SAN=thread test-unit-tsan

# Under a sanitizer: every unit suite (ASan+UBSan), or the threaded ones (TSan).
test-unit-san: $(TEST_BINS)
	@set -e; for t in $(TEST_BINS); do \
	  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 LSAN_OPTIONS=suppressions=$(CURDIR)/tests/unit/lsan.supp UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  $(TIMED) "$${t#$(BUILD)/} (SAN=$(SAN))" $$t $(CRITERION_ARGS); done

TSAN_TESTS := $(filter $(BUILD)/tests/unit/test_dp% $(BUILD)/tests/unit/test_ddp% $(BUILD)/tests/unit/test_comm% \
                        $(BUILD)/tests/unit/test_backend_cpu,$(TEST_BINS))
test-build-tsan-bins: $(TSAN_TESTS)
test-unit-tsan: $(TSAN_TESTS)
	@set -e; for t in $(TSAN_TESTS); do \
	  TSAN_OPTIONS="halt_on_error=1 suppressions=$(CURDIR)/tests/unit/tsan.supp" \
	  $(TIMED) "$${t#$(BUILD)/} (SAN=thread)" $$t $(CRITERION_ARGS); done

# The CUDA code without a GPU: backend_cuda.c and the kernels against an
# asynchronous CPU emulation of the CUDA runtime and cuBLAS, built with the
# release flags (EMU=1), the kernels again under ASan+UBSan.
test-cuda-emu: ddpbench | build/deps.mk
	@scripts/deps.sh test
	+@$(TIMED) tests/cuda_emu/run.sh sh tests/cuda_emu/run.sh

# ---- fuzzing (libFuzzer, clang) ----------------------------------------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BINS := $(FUZZ_SRCS:tests/fuzz/%.c=build/fuzz/%)
FUZZ_TIME ?= 20
FUZZ_LIB_C := common/base/status.c common/base/text.c common/base/atomic_file.c common/base/infile.c common/base/fault.c \
              common/base/hash.c common/base/rng.c common/base/procfile.c \
              app/load/data_npy.c common/data/data.c \
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
# The fuzzers run at the same time, each for FUZZ_TIME seconds (a budget in
# time, not in inputs: one after the other took twice the wall time for the
# same seconds of fuzzing each).
test-fuzz: $(FUZZ_BINS)
	@t0=$$(date +%s.%N); for f in $(FUZZ_BINS); do echo "== $$f ($(FUZZ_TIME)s)"; \
	  mkdir -p build/fuzz/corpus-$$(basename $$f); \
	  dict=tests/fuzz/$$(basename $$f).dict; [ -f $$dict ] && dict=-dict=$$dict || dict=; \
	  { $$f -max_total_time=$(FUZZ_TIME) -print_final_stats=0 $$dict build/fuzz/corpus-$$(basename $$f) \
	    tests/fuzz/corpus/$$(basename $$f) 2>build/fuzz/$$(basename $$f).log; \
	    echo $$? >build/fuzz/$$(basename $$f).rc; } & \
	  done; wait; bad=0; \
	for f in $(FUZZ_BINS); do [ "$$(cat build/fuzz/$$(basename $$f).rc)" = 0 ] || \
	  { echo "== $$f failed:"; tail -40 build/fuzz/$$(basename $$f).log; bad=1; }; done; \
	$(TIMED) --add "tests/fuzz: $(words $(FUZZ_BINS)) fuzzers at once, $(FUZZ_TIME) s each" $$t0 $$bad

fuzz:
	$(MAKE) test-fuzz FUZZ_TIME=600

# ---- the GPU kit: the GPU check for a box with only the driver, CUDA and PyTorch
# build/gpu-kit: ddpbench and the GPU test binaries (stripped, RPATH
# $ORIGIN/lib and no absolute path), tests/gpu/check.sh, the PyTorch
# reference, and every library they need but the box's own (tests/gpu/kit.sh).
KIT := build/gpu-kit
comma := ,
KIT_LDLIBS := $(filter-out -Wl$(comma)-rpath$(comma)%,$(LDLIBS))
KIT_CUDA_LDLIBS := $(filter-out -Wl$(comma)-rpath$(comma)%,$(CUDA_LDLIBS))
KIT_CUDA_LIB := $(KIT)/lib/libddpbench-cuda.so
KIT_CFLAGS := $(filter-out -MMD -MP,$(CFLAGS))
KIT_TESTS := $(KIT)/tests/test_cuda $(GPU_TEST_SRCS:tests/gpu/%.c=$(KIT)/tests/%)

# The kernels are the release build's own objects: nvcc's flags do not
# change without MPI, and compiling them again took a minute.
KIT_CU_OBJS ?= $(filter %.cu.o,$(CUDA_OBJS))
KIT_CUDA_OBJS := $(filter-out %.cu.o,$(CUDA_OBJS)) $(KIT_CU_OBJS)

gpu-kit: $(if $(filter 1,$(HAVE_CUDA)),$(CU_SRCS:%.cu=$(BUILD)/%.cu.o))
	@case "$(HAVE_CUDA)" in 1) ;; *) echo "make gpu-kit: needs the CUDA toolkit ($(NVCC)) and NCCL"; exit 1 ;; esac
	@test -n "$(HAVE_NCCL)" || { echo "make gpu-kit: needs NCCL (nccl.h and libnccl)"; exit 1; }
	@rm -rf $(KIT)
	@# Without MPI, from objects of its own: a GPU box has no mpirun to start
	@# ranks, and Debian's libmpi carries a RUNPATH to /usr that would pull
	@# its own libraries from outside the kit.
	@$(MAKE) --no-print-directory NO_MPI=1 BUILD=build/gpu-kit-objs KIT_CU_OBJS="$(CU_SRCS:%.cu=$(BUILD)/%.cu.o)" \
	  $(KIT)/ddpbench $(KIT_CUDA_LIB) $(KIT_TESTS)
	@sh tests/gpu/kit.sh $(KIT)

# make test builds the kit where the toolkit is (CI's machine), so that what
# it links stays inside it, runs its ddpbench once on the CPU, and rehearses
# the bare GPU box (tests/gpu/rehearse.sh: the kit's check.sh chrooted in a
# mount namespace with only the C library, sh, and cuBLAS/cudart/NCCL as
# PyTorch's wheels or the toolkit lay them out: every library found, the
# backend loaded, stopped only for want of a driver, python3 never handed
# the library path found for ddpbench).  check.sh's own judgements and its
# plan are checked everywhere, and so is a check killed midway from outside
# (tests/gpu/rehearse_kill.sh: on the emulated GPU, SIGKILL at its ddp step;
# the steps it finished are in its output folder).
test-gpu-kit:
	@$(TIMED) "tests/gpu/check.sh --self-test" sh -c 'sh tests/gpu/check.sh --self-test >build/gpu-check-selftest.log 2>&1' || \
	  { cat build/gpu-check-selftest.log; exit 1; }
	@tail -n 1 build/gpu-check-selftest.log
	@sh tests/gpu/check.sh --dry-run | grep -q '^ *9\. findings ' || { echo "test-gpu-kit: check.sh --dry-run lists no plan"; exit 1; }
	+@mkdir -p build && $(MAKE) --no-print-directory -s EMU=1 build/cuda-emu/ddpbench >build/cuda-emu-kill.build.log 2>&1 || \
	  { tail -n 20 build/cuda-emu-kill.build.log; exit 1; }
	@$(TIMED) tests/gpu/rehearse_kill.sh sh tests/gpu/rehearse_kill.sh build/cuda-emu
ifeq ($(HAVE_CUDA),1)
	@[ -f $(KIT)/ddpbench ] && [ -n "$(filter test,$(MAKECMDGOALS))" ] || \
	  { mkdir -p build && $(MAKE) --no-print-directory gpu-kit >build/gpu-kit.log 2>&1 || { tail -n 20 build/gpu-kit.log; exit 1; }; }
	@tail -n 1 build/gpu-kit.log
	@$(KIT)/ddpbench --backend cpu --mode single --steps 3 --quiet >/dev/null || \
	  { echo "test-gpu-kit: the kit's ddpbench does not run"; exit 1; }
	@echo "test-gpu-kit: the kit's ddpbench runs"
	@$(TIMED) tests/gpu/rehearse.sh sh tests/gpu/rehearse.sh $(KIT)
else
	@echo "test-gpu-kit: not built: no CUDA toolkit here ($(NVCC)); the emulator suite covers the CUDA code"
endif

$(KIT)/ddpbench: $(MAIN_OBJS) $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) -s -o $@ $(MAIN_OBJS) $(LIB) $(KIT_LDLIBS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/lib'

# The CUDA library beside the kit's other libraries: the binaries dlopen it
# through their RPATH, and it finds what it needs in its own folder or the box's.
$(KIT_CUDA_LIB): $(KIT_CUDA_OBJS) $(LIB) $(BUILD)/cuda.map
	@mkdir -p $(dir $@)
	$(CC) -shared -s -o $@ $(KIT_CUDA_OBJS) $(LIB) -Wl,--version-script=$(BUILD)/cuda.map -Wl,-Bsymbolic \
	  -Wl,--no-undefined $(KIT_CUDA_LDLIBS) $(KIT_LDLIBS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN'

$(KIT)/tests/test_cuda: tests/unit/test_cuda.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(KIT_CFLAGS) $(CRITERION_CFLAGS) $(LDFLAGS) -s -o $@ $< $(LIB) $(CRITERION_LIBS) $(KIT_LDLIBS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'

$(KIT)/tests/%: tests/gpu/%.c $(LIB)
	@mkdir -p $(dir $@)
	$(CC) $(KIT_CFLAGS) $(CRITERION_CFLAGS) $(LDFLAGS) -s -o $@ $< $(LIB) $(CRITERION_LIBS) $(KIT_LDLIBS) -Wl,--disable-new-dtags,-rpath,'$$ORIGIN/../lib'

# ---- demo, benchmarks, install ----------------------------------------------
# The demo: compare on this machine, and its page (--report) to open in a browser.
demo: ddpbench
	@mkdir -p build
	./ddpbench --mode compare --report build/demo.html
	@echo "demo: the page is build/demo.html ($$(wc -c <build/demo.html) bytes; open it in any browser, offline)"

bench: $(BENCH_BINS) ddpbench
	@set -e; for b in $(BENCH_BINS); do echo "== $$b"; $$b; done

install: ddpbench
	install -d $(DESTDIR)$(PREFIX)/bin
	install -m 755 ddpbench $(DESTDIR)$(PREFIX)/bin/ddpbench
	$(if $(CUDA_LIB),install -d $(DESTDIR)$(PREFIX)/lib/ddpbench)
	$(if $(CUDA_LIB),install -m 755 $(CUDA_LIB) $(DESTDIR)$(PREFIX)/lib/ddpbench/libddpbench-cuda.so)

clean:
	rm -rf build/release build/release-debug build/san-* build/fuzz build/cuda-emu* build/gpu-check build/gpu-kit build/gpu-kit-objs build/gpu-rehearsal \
	  ddpbench libddpbench-cuda.so

distclean:
	rm -rf build ddpbench libddpbench-cuda.so

help:
	@sed -n '2,15p' Makefile | sed 's/^# \{0,1\}//'

# The dependency files of what this configuration builds (not every .d under
# build/: one left by a file that has since moved would name a source that is
# gone).
-include $(LIB_OBJS:.o=.d) $(CUDA_OBJS:.o=.d) $(MAIN_OBJS:.o=.d) $(TEST_BINS:=.d) $(GPU_TEST_BINS:=.d) \
  $(BENCH_BINS:=.d)
