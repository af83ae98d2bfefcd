/* common/device/backend_cuda.h: what other CUDA-only code may know about the CUDA
 * backend beyond backend.h: the in-process GPU count (shared by the forked
 * probe and backend creation) and a CUDA backend's device and compute stream
 * (comm_nccl.c orders its collectives after the backend's work with them).
 * Include only from files built with HAVE_CUDA. */
#ifndef DDPBENCH_BACKEND_CUDA_H
#define DDPBENCH_BACKEND_CUDA_H

#include <cuda_runtime_api.h>

#include "common/device/backend.h"

/* cudaGetDeviceCount in THIS process (it initialises CUDA here): the count, or
 * 0 with the reason in why (ERR_LEN): "no CUDA driver
 * (cudaErrorInsufficientDriver)", "no CUDA device (cudaErrorNoDevice)", or the
 * runtime's own error name and text.  CUDA_VISIBLE_DEVICES applies. */
int cuda_count_devices(char *why);

/* Count and describe the GPUs in this process (probe.h's answer): what a
 * throwaway probe child calls, here or through the CUDA library's exports. */
struct gpu_probe_msg;
void backend_cuda_probe_here(struct gpu_probe_msg *m);

/* The cuBLAS workspace each CUDA backend gives its handle at creation
 * (cublasSetWorkspace; counted as MEM_WORKSPACE) for a device of compute
 * capability `major`: PyTorch's default, 32 MiB from Hopper on, else
 * 8 MiB + 128 KiB. */
size_t backend_cuda_blas_workspace_bytes(int major);

/* be must be a CUDA backend (backend_kind(be) == BACKEND_CUDA). */
int backend_cuda_device(const backend_t *be);
cudaStream_t backend_cuda_stream(const backend_t *be);
/* Count memory a CUDA library allocated on be's device for us (NCCL's
 * buffers) in its memory figures; negative when it is freed. */
void backend_cuda_account(backend_t *be, long long delta_bytes);
/* When a completed timed cudaEvent_t of be's device completed, on the now_s()
 * clock, through be's re-anchored clock (comm_nccl.c's spans). */
int backend_cuda_event_time(backend_t *be, cudaEvent_t ev, double *t_s);
/* The host time (now_s) of be's clock anchor, which its event times are
 * elapsed from in float milliseconds: it moves with the run (about once a
 * step), a DP member's too as it follows replays (test_cuda holds it). */
double backend_cuda_anchor_s(const backend_t *be);

#endif
