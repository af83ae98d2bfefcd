/* common/device/cuda_lib.h: the CUDA parts of ddpbench (backend_cuda.c, kernels_*.cu,
 * probe_cuda.c, comm/comm_nccl.c) as libddpbench-cuda.so, loaded only when CUDA is asked for
 * or probed (why: docs/gpu.md).  Builds that link the CUDA code in (tests/cuda_emu,
 * DDPBENCH_CUDA_LINKED) call it directly. */
#ifndef DDPBENCH_CUDA_LIB_H
#define DDPBENCH_CUDA_LIB_H

#define CUDA_LIB_NAME "libddpbench-cuda.so"

/* The library's function `name`, loading the library on first use (once per
 * process, thread-safe); NULL with the reason in why (ERR_LEN) when the
 * library cannot be loaded or lacks it. */
void *cuda_lib_symbol(const char *name, char *why);

#endif
