/* common/device/cuda_check.h: CUDACHECK / CUBLASCHECK / NCCLCHECK for library code.
 *
 * Like nccl-tests' macros, but they never print or exit: a failing call writes
 * one line "file:line: call: ErrorName: error string" into the caller's error
 * buffer (ERR_LEN bytes) and makes the enclosing function return
 * DDP_ERR_RUNTIME, so the message travels up to main() like every other error.
 *
 *     CUDACHECK(be->last_error, cudaMemcpyAsync(...)); */
#ifndef DDPBENCH_CUDA_CHECK_H
#define DDPBENCH_CUDA_CHECK_H

#include <cuda_runtime_api.h>

#include "common/base/status.h"

#define CUDACHECK(err, call)                                                               \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess)                                                             \
            return err_set((err), DDP_ERR_RUNTIME, "%s:%d: %s: %s: %s", __FILE__, __LINE__, \
                           #call, cudaGetErrorName(e_), cudaGetErrorString(e_));           \
    } while (0)

#ifdef CUBLAS_API_H_
#define CUBLASCHECK(err, call)                                                             \
    do {                                                                                   \
        cublasStatus_t s_ = (call);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS)                                                   \
            return err_set((err), DDP_ERR_RUNTIME, "%s:%d: %s: %s: %s", __FILE__, __LINE__, \
                           #call, cublasGetStatusName(s_), cublasGetStatusString(s_));     \
    } while (0)
#endif

#ifdef NCCL_H_
/* comm is the communicator the call used (NULL before one exists): its
 * ncclGetLastError text says which peer or transport failed. */
#define NCCLCHECK(err, comm, call)                                                         \
    do {                                                                                   \
        ncclResult_t r_ = (call);                                                          \
        if (r_ != ncclSuccess && r_ != ncclInProgress) {                                   \
            const char *last_ = ncclGetLastError(comm);                                    \
            return err_set((err), DDP_ERR_RUNTIME, "%s:%d: %s: %s%s%s", __FILE__, __LINE__, \
                           #call, ncclGetErrorString(r_), last_ && *last_ ? ": " : "",     \
                           last_ ? last_ : "");                                            \
        }                                                                                  \
    } while (0)
#endif

#endif
