/* tests/cuda_emu/cublas_v2.h: the cuBLAS calls ddpbench makes, emulated on
 * the CPU (emu_runtime.c): a plain column-major SGEMM with cuBLAS's argument
 * checks, queued on the handle's stream; under TF32 math the operands are
 * rounded to TF32 first, as tensor cores do.  CUBLAS_API_H_ is defined so
 * cuda_check.h provides CUBLASCHECK. */
#ifndef CUBLAS_V2_H_
#define CUBLAS_V2_H_
#define CUBLAS_API_H_
#include "cuda_runtime_api.h"
typedef enum { CUBLAS_STATUS_SUCCESS = 0, CUBLAS_STATUS_NOT_INITIALIZED = 1, CUBLAS_STATUS_INVALID_VALUE = 7, CUBLAS_STATUS_EXECUTION_FAILED = 13 } cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1 } cublasOperation_t;
typedef enum { CUBLAS_DEFAULT_MATH = 0, CUBLAS_TF32_TENSOR_OP_MATH = 3, CUBLAS_PEDANTIC_MATH = 2 } cublasMath_t;
typedef struct emu_blas *cublasHandle_t;
typedef enum { MAJOR_VERSION = 0, MINOR_VERSION, PATCH_LEVEL } libraryPropertyType;
cublasStatus_t cublasGetProperty(libraryPropertyType t, int *v);
cublasStatus_t cublasCreate(cublasHandle_t *h);
cublasStatus_t cublasDestroy(cublasHandle_t h);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s);
cublasStatus_t cublasSetMathMode(cublasHandle_t h, cublasMath_t m);
const char *cublasGetStatusName(cublasStatus_t s);
const char *cublasGetStatusString(cublasStatus_t s);
cublasStatus_t cublasSgemm(cublasHandle_t h, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                           const float *alpha, const float *A, int lda, const float *B, int ldb,
                           const float *beta, float *C, int ldc);
#endif
