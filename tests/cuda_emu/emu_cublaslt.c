/* tests/cuda_emu/emu_cublaslt.c: cuBLASLt's matmul with the bias and
 * activation epilogues bench/bench_epilogue_cuda.c measures, on the CPU (see
 * cublasLt.h), queued on the caller's stream like the emulated cuBLAS.
 *
 * What each epilogue computes, as cublasLt.h documents it (D is m x n,
 * column-major; "sum" is alpha op(A) op(B), the GEMM's own arithmetic,
 * emu_gemm_now):
 *   BIAS                 D = sum + bias[i]                    (bias: m floats)
 *   RELU_AUX_BIAS        t = sum + bias[i]; D = max(t, 0); aux = bit-mask of t > 0
 *   GELU_AUX_BIAS        t = sum + bias[i]; D = gelu(t);   aux = t (the GELU input)
 *   DRELU_BGRAD          D = sum where the aux bit is set, else 0; bias = row sums of D
 *   DGELU_BGRAD          D = sum * gelu'(aux);              bias = row sums of D
 * (and the forms without BIAS / AUX / BGRAD).  cuBLASLt's GELU is the tanh
 * approximation 0.5 t (1 + tanh(sqrt(2/pi) (t + 0.044715 t^3))), not the
 * exact erf form ddpbench's kernels compute.  The aux leading dimension is
 * in bits for the ReLU mask (a multiple of 128) and in elements for GELU's
 * input (a multiple of 8), at least m either way.  The mask's bit order is
 * cuBLASLt's own business: here bit i + j*ld, but nothing may read it except
 * the backward epilogue.  The bias gradient is each row's sum in column order.
 *
 * Environment: EMU_LT_PLANT=no-bias leaves the forward bias out,
 * EMU_LT_PLANT=no-bgrad leaves the bias gradient unwritten: planted faults
 * that the benchmark's agreement check must catch (tests/cuda_emu/run.sh);
 * EMU_LT_PLANT=no-act-algo offers no algorithm for the forward activation
 * epilogues (RELU_AUX_BIAS and GELU_AUX_BIAS), as a cuBLASLt may for a
 * shape or type: the benchmark must judge them n/a and go on. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cublasLt.h"

struct emu_lt {
    int magic;
};
struct emu_lt_desc {
    cublasOperation_t ta, tb;
    uint32_t epi;
    void *bias, *aux;
    int64_t aux_ld;
};
struct emu_lt_layout {
    cudaDataType type;
    uint64_t rows, cols;
    int64_t ld;
};
struct emu_lt_pref {
    size_t max_ws;
};

static void *lt_alloc(size_t n)
{
    void *p = calloc(1, n);
    if (!p)
        emu_die("cuBLASLt: out of memory");
    return p;
}

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h)
{
    *h = lt_alloc(sizeof **h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h)
{
    free(h);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t compute,
                                        cudaDataType_t scale)
{
    if (compute != CUBLAS_COMPUTE_32F || scale != CUDA_R_32F)
        emu_die("cublasLtMatmulDescCreate: only fp32 compute and scale are emulated");
    *d = lt_alloc(sizeof **d);
    (*d)->ta = (*d)->tb = CUBLAS_OP_N;
    (*d)->epi = CUBLASLT_EPILOGUE_DEFAULT;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d)
{
    free(d);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size)
{
    /* the sizes cuBLASLt checks: a wrong one is CUBLAS_STATUS_INVALID_VALUE */
    size_t want = a == CUBLASLT_MATMUL_DESC_BIAS_POINTER || a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER
                      ? sizeof(void *)
                  : a == CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD ? sizeof(int64_t)
                                                              : sizeof(int32_t);
    if (!buf || size != want)
        return CUBLAS_STATUS_INVALID_VALUE;
    int32_t v = 0;
    if (want == sizeof(int32_t))
        memcpy(&v, buf, sizeof v);
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA: d->ta = (cublasOperation_t)v; break;
    case CUBLASLT_MATMUL_DESC_TRANSB: d->tb = (cublasOperation_t)v; break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE: d->epi = (uint32_t)v; break;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER: memcpy(&d->bias, buf, sizeof d->bias); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER: memcpy(&d->aux, buf, sizeof d->aux); break;
    case CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD: memcpy(&d->aux_ld, buf, sizeof d->aux_ld); break;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        if (v != CUDA_R_32F)
            emu_die("cublasLtMatmulDescSetAttribute: only an fp32 bias is emulated");
        break;
    default: emu_die("cublasLtMatmulDescSetAttribute: attribute %d is not emulated", (int)a);
    }
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld)
{
    if (type != CUDA_R_32F && type != CUDA_R_16BF)
        emu_die("cublasLtMatrixLayoutCreate: type %d is not emulated (fp32, bf16)", (int)type);
    *l = lt_alloc(sizeof **l);
    **l = (struct emu_lt_layout){type, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l)
{
    free(l);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p)
{
    *p = lt_alloc(sizeof **p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p)
{
    free(p);
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size)
{
    if (a != CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES || !buf || size != sizeof(uint64_t))
        return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t v;
    memcpy(&v, buf, sizeof v);
    p->max_ws = (size_t)v;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------
// what a matmul may be

enum { E_RELU = 2, E_BIAS = 4, E_DRELU = 8, E_BGRAD = 16, E_GELU = 32, E_DGELU = 64, E_AUX = 128 };

static int epi_known(uint32_t e)
{
    static const uint32_t known[] = {
        CUBLASLT_EPILOGUE_DEFAULT,   CUBLASLT_EPILOGUE_RELU,          CUBLASLT_EPILOGUE_RELU_AUX,
        CUBLASLT_EPILOGUE_BIAS,      CUBLASLT_EPILOGUE_RELU_BIAS,     CUBLASLT_EPILOGUE_RELU_AUX_BIAS,
        CUBLASLT_EPILOGUE_DRELU,     CUBLASLT_EPILOGUE_DRELU_BGRAD,   CUBLASLT_EPILOGUE_GELU,
        CUBLASLT_EPILOGUE_GELU_AUX,  CUBLASLT_EPILOGUE_GELU_BIAS,     CUBLASLT_EPILOGUE_GELU_AUX_BIAS,
        CUBLASLT_EPILOGUE_DGELU,     CUBLASLT_EPILOGUE_DGELU_BGRAD};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (known[i] == e)
            return 1;
    return 0;
}

/* The shapes of a product: op(A) is m x k, op(B) k x n, C and D m x n.
 * CUBLAS_STATUS_SUCCESS when cuBLASLt would take it, else why not. */
static cublasStatus_t lt_check(const struct emu_lt_desc *d, const struct emu_lt_layout *A,
                               const struct emu_lt_layout *B, const struct emu_lt_layout *C,
                               const struct emu_lt_layout *D, int *m, int *n, int *k)
{
    uint64_t am = d->ta == CUBLAS_OP_N ? A->rows : A->cols, ak = d->ta == CUBLAS_OP_N ? A->cols : A->rows;
    uint64_t bk = d->tb == CUBLAS_OP_N ? B->rows : B->cols, bn = d->tb == CUBLAS_OP_N ? B->cols : B->rows;
    if (ak != bk || C->rows != am || C->cols != bn || D->rows != am || D->cols != bn)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (A->ld < (int64_t)A->rows || B->ld < (int64_t)B->rows || C->ld < (int64_t)C->rows ||
        D->ld < (int64_t)D->rows)
        return CUBLAS_STATUS_INVALID_VALUE;
    if (A->type != B->type || C->type != CUDA_R_32F || D->type != CUDA_R_32F)
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (!epi_known(d->epi))
        return CUBLAS_STATUS_INVALID_VALUE;
    if (d->epi & E_AUX) { /* cublasLt.h: the aux ld's multiple and minimum */
        int64_t mult = d->epi & (E_RELU | E_DRELU) ? 128 : 8;
        if (d->aux_ld % mult != 0 || d->aux_ld < (int64_t)D->rows)
            return CUBLAS_STATUS_INVALID_VALUE;
    }
    *m = (int)am, *n = (int)bn, *k = (int)ak;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t d,
                                              cublasLtMatrixLayout_t A, cublasLtMatrixLayout_t B,
                                              cublasLtMatrixLayout_t C, cublasLtMatrixLayout_t D,
                                              cublasLtMatmulPreference_t p, int requested,
                                              cublasLtMatmulHeuristicResult_t results[],
                                              int *returned)
{
    (void)h, (void)p;
    int m, n, k;
    *returned = 0;
    if (requested <= 0)
        return CUBLAS_STATUS_INVALID_VALUE;
    cublasStatus_t st = lt_check(d, A, B, C, D, &m, &n, &k);
    const char *plant = getenv("EMU_LT_PLANT");
    if (plant && !strcmp(plant, "no-act-algo") && d->epi & (E_RELU | E_GELU) && d->epi & E_AUX)
        st = CUBLAS_STATUS_NOT_SUPPORTED;
    if (st != CUBLAS_STATUS_SUCCESS)
        return CUBLAS_STATUS_NOT_SUPPORTED; /* no algorithm for it */
    memset(&results[0], 0, sizeof results[0]);
    results[0].state = CUBLAS_STATUS_SUCCESS;
    results[0].wavesCount = 1.0f;
    *returned = 1;
    return CUBLAS_STATUS_SUCCESS;
}

// ---------------------------------------------------------------------------
// the matmul, on the stream's thread

typedef struct {
    struct emu_lt_desc d;
    int m, n, k, bf16;
    float alpha;
    const void *A, *B;
    int lda, ldb, ldd;
    float *D;
    int plant_no_bias, plant_no_bgrad;
} lt_op_t;

static const float GELU_C = 0.7978845608028654f, GELU_A = 0.044715f; /* sqrt(2/pi) */

static float gelu_tanh(float t)
{
    return 0.5f * t * (1.0f + tanhf(GELU_C * (t + GELU_A * t * t * t)));
}

static float gelu_tanh_grad(float t)
{
    float u = tanhf(GELU_C * (t + GELU_A * t * t * t));
    return 0.5f * (1.0f + u) + 0.5f * t * (1.0f - u * u) * GELU_C * (1.0f + 3.0f * GELU_A * t * t);
}

static void run_lt(void *arg)
{
    const lt_op_t *o = arg;
    const struct emu_lt_desc *d = &o->d;
    emu_gemm_now(d->ta == CUBLAS_OP_T, d->tb == CUBLAS_OP_T, o->m, o->n, o->k, o->alpha, o->A,
                 o->lda, o->B, o->ldb, o->bf16, 0.0f, o->D, o->ldd);
    const float *bias = d->epi & E_BIAS && !o->plant_no_bias ? d->bias : NULL;
    uint8_t *mask = d->aux;
    float *aux = d->aux;
    for (int j = 0; j < o->n; j++)
        for (int i = 0; i < o->m; i++) {
            float *v = &o->D[i + (size_t)j * o->ldd];
            size_t p = (size_t)i + (size_t)j * (size_t)d->aux_ld;
            float t = *v + (bias ? bias[i] : 0.0f);
            if (d->epi & E_RELU) {
                if (d->epi & E_AUX)
                    mask[p / 8] = (uint8_t)(t > 0.0f ? mask[p / 8] | 1u << p % 8 : mask[p / 8] & ~(1u << p % 8));
                t = t > 0.0f ? t : 0.0f;
            } else if (d->epi & E_GELU) {
                if (d->epi & E_AUX)
                    aux[p] = t;
                t = gelu_tanh(t);
            } else if (d->epi & E_DRELU) {
                t = mask[p / 8] >> p % 8 & 1u ? t : 0.0f;
            } else if (d->epi & E_DGELU) {
                t = t * gelu_tanh_grad(aux[p]);
            }
            *v = t;
        }
    if (d->epi & E_BGRAD && !o->plant_no_bgrad) {
        float *bg = d->bias;
        for (int i = 0; i < o->m; i++) {
            float s = 0.0f;
            for (int j = 0; j < o->n; j++)
                s += o->D[i + (size_t)j * o->ldd];
            bg[i] = s;
        }
    }
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t d, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t Adesc, const void *B,
                              cublasLtMatrixLayout_t Bdesc, const void *beta, const void *C,
                              cublasLtMatrixLayout_t Cdesc, void *D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t *algo, void *workspace,
                              size_t workspace_bytes, cudaStream_t stream)
{
    (void)h, (void)algo;
    int m, n, k;
    cublasStatus_t st = lt_check(d, Adesc, Bdesc, Cdesc, Ddesc, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (*(const float *)beta != 0.0f || C != D)
        emu_die("cublasLtMatmul: only beta = 0 with C = D is emulated");
    emu_check_stream(stream, "cublasLtMatmul");
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    size_t es = Adesc->type == CUDA_R_16BF ? 2 : 4;
    emu_check_ptr(A, ((size_t)(Adesc->cols - 1) * Adesc->ld + Adesc->rows) * es, "cublasLtMatmul A");
    emu_check_ptr(B, ((size_t)(Bdesc->cols - 1) * Bdesc->ld + Bdesc->rows) * es, "cublasLtMatmul B");
    emu_check_ptr(D, ((size_t)(n - 1) * Ddesc->ld + m) * sizeof(float), "cublasLtMatmul D");
    if (workspace_bytes)
        emu_check_ptr(workspace, workspace_bytes, "cublasLtMatmul workspace");
    if (d->epi & (E_BIAS | E_BGRAD)) {
        if (!d->bias)
            return CUBLAS_STATUS_INVALID_VALUE;
        emu_check_ptr(d->bias, (size_t)m * sizeof(float), "cublasLtMatmul bias");
    }
    if (d->epi & E_AUX) {
        if (!d->aux)
            return CUBLAS_STATUS_INVALID_VALUE;
        size_t last = (size_t)(n - 1) * (size_t)d->aux_ld + (size_t)m; /* elements (bits for ReLU) */
        emu_check_ptr(d->aux, d->epi & (E_RELU | E_DRELU) ? (last + 7) / 8 : last * sizeof(float),
                      "cublasLtMatmul aux");
    }
    lt_op_t *o = lt_alloc(sizeof *o);
    const char *plant = getenv("EMU_LT_PLANT");
    *o = (lt_op_t){*d, m, n, k, Adesc->type == CUDA_R_16BF, *(const float *)alpha, A, B,
                   (int)Adesc->ld, (int)Bdesc->ld, (int)Ddesc->ld, D,
                   plant && !strcmp(plant, "no-bias"), plant && !strcmp(plant, "no-bgrad")};
    emu_count_kernel(); /* one kernel: the GEMM and its epilogue */
    emu_enqueue(stream, run_lt, o, free);
    return CUBLAS_STATUS_SUCCESS;
}
