/* tests/cuda_emu/cublas_v2.h: the cuBLAS calls ddpbench makes, emulated on
 * the CPU (emu_runtime.c): a plain column-major SGEMM with cuBLAS's argument
 * checks, queued on the handle's stream; under TF32 math the operands are
 * rounded to TF32 first, as tensor cores do; cublasGemmEx takes bf16
 * operands (exact in fp32) with an fp32 C and fp32 sums, the one form
 * --precision bf16 uses.  A GEMM queued on a capturing stream by a handle
 * without a workspace (cublasSetWorkspace) is refused: CUBLAS_STATUS_NOT_SUPPORTED,
 * the reason in cublasGetStatusString.  CUBLAS_API_H_ is defined so
 * cuda_check.h provides CUBLASCHECK. */
#ifndef CUBLAS_V2_H_
#define CUBLAS_V2_H_
#define CUBLAS_API_H_
#include "cuda_runtime_api.h"
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_EXECUTION_FAILED = 13, CUBLAS_STATUS_NOT_SUPPORTED = 15 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;
typedef struct emu_blas *cublasHandle_t;
/* library_types.h's, the members ddpbench names (their CUDA values) */
typedef enum { CUDA_R_32F = 0, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum { CUBLAS_COMPUTE_32F = 68, CUBLAS_COMPUTE_32F_FAST_TF32 = 77 } cublasComputeType_t;
typedef enum { CUBLAS_GEMM_DEFAULT = -1 } cublasGemmAlgo_t;
typedef enum { MAJOR_VERSION = 0, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
cublasStatus_t cublasSetWorkspace(cublasHandle_t h, void *workspace, size_t bytes);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
cublasStatus_t cublasGemmEx(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n,
                            int k, const void *alpha, const void *A, cudaDataType Atype, int lda,
                            const void *B, cudaDataType Btype, int ldb, const void *beta, void *C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t compute,
                            cublasGemmAlgo_t algo);
#endif
