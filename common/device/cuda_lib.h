/* common/device/cuda_lib.h: the CUDA parts of ddpbench as a library loaded
 * only when CUDA is asked for or probed.
 *
 * The CUDA backend, its kernels, the GPU probe and NCCL (backend_cuda.c,
 * kernels_*.cu, probe_cuda.c, comm/comm_nccl.c) are built into
 * libddpbench-cuda.so, beside the binary (make install puts it in
 * PREFIX/lib/ddpbench; the binary's run path finds it in either place).
 * The program itself does not link cudart, cuBLAS or NCCL: a run on the CPU
 * never maps them, so it starts under a small address-space limit (ulimit -v)
 * and on a machine without them.  backend_cuda_probe (--backend auto) asks a
 * short-lived child that loads the library; backend_cuda_create and
 * comm_nccl_create load it into the process that will use the GPU, and call
 * its public functions of those names.  When it cannot be loaded they answer
 * as a build without CUDA would, with the loader's reason.  Builds that link the CUDA code in (the emulated GPU of
 * tests/cuda_emu, DDPBENCH_CUDA_LINKED) call it directly. */
#ifndef DDPBENCH_CUDA_LIB_H
#define DDPBENCH_CUDA_LIB_H

#define CUDA_LIB_NAME "libddpbench-cuda.so"

/* The library's function `name`, loading the library on first use (once per
 * process, thread-safe); NULL with the reason in why (ERR_LEN) when the
 * library cannot be loaded or lacks it. */
void *cuda_lib_symbol(const char *name, char *why);

#endif
