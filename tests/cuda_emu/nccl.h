/* tests/cuda_emu/nccl.h: the NCCL calls ddpbench makes, emulated on the CPU
 * (emu_nccl.c) so comm_nccl.c runs on the emulated GPU: ranks in different
 * processes (DDP) or threads meet in a shared-memory segment named by the
 * ncclUniqueId; collectives are queued on the caller's stream and run on its
 * thread, waiting there for their peers as NCCL kernels do; non-blocking
 * init stays ncclInProgress until every rank has joined; ncclCommAbort
 * releases a collective stuck waiting.  NCCL_H_ is defined so cuda_check.h
 * provides NCCLCHECK. */
#ifndef NCCL_H_
#define NCCL_H_
#include "cuda_runtime_api.h"
#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 0
#ifdef __cplusplus
extern "C" {
#endif
typedef struct emu_nccl_comm *ncclComm_t;
typedef struct {
    char internal[128];
} ncclUniqueId;
typedef enum {
    ncclSuccess = 0, ncclUnhandledCudaError = 1, ncclSystemError = 2, ncclInternalError = 3,
    ncclInvalidArgument = 4, ncclInvalidUsage = 5, ncclRemoteError = 6, ncclInProgress = 7
} ncclResult_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4 } ncclRedOp_t;
typedef enum {
    ncclFloat16 = 6, ncclHalf = 6, ncclFloat = 7, ncclFloat32 = 7, ncclBfloat16 = 9
} ncclDataType_t;
typedef struct {
    int blocking;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER {1}
ncclResult_t ncclGetUniqueId(ncclUniqueId *id);
ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config);
ncclResult_t ncclCommInitAll(ncclComm_t *comms, int ndev, const int *devlist);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *state);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);
const char *ncclGetErrorString(ncclResult_t r);
const char *ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGroupStart(void);
ncclResult_t ncclGroupEnd(void);
ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclRedOp_t op, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclReduce(const void *send, void *recv, size_t count, ncclDataType_t t,
                        ncclRedOp_t op, int root, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count, ncclDataType_t t,
                               ncclRedOp_t op, ncclComm_t comm, cudaStream_t s);
ncclResult_t ncclGetVersion(int *version);
#ifdef __cplusplus
}
#endif
#endif
