/* bench/bench_epilogue_cuda.c: cuBLASLt's fused bias + activation epilogues
 * against what the CUDA backend does now, layer by layer (issue 25: "bias
 * and activation fused into the GEMM epilogue where cuBLASLt offers it --
 * measure, keep only what wins").  Nothing of the training step changes:
 * this measures, docs/gpu.md says what to wire in.
 *
 * For every layer of mlp-medium (ReLU, batch 256) and mlp-large (GELU, batch
 * 2048) -- the presets' widths, the GPU check's batches -- in fp32 and in
 * bf16 (--precision bf16's GEMM: bf16 operands, fp32 sums and output), one
 * group per forward layer and one per backward hidden layer:
 *   fwd l  A: GEMM (cublasSgemm / cublasGemmEx, as backend_cuda.c calls it)
 *             + kern_bias_act_fwd                       (z and a = act(z))
 *          B: one cublasLtMatmul, epilogue RELU_AUX_BIAS / GELU_AUX_BIAS
 *             (BIAS for the output layer)              (a, and the aux for
 *                                                        the backward)
 *   bwd l  A: the input gradient's GEMM of layer l+1 + kern_act_bwd of layer
 *             l + kern_bias_grad of layer l
 *          B: one cublasLtMatmul, epilogue DRELU_BGRAD / DGELU_BGRAD reading
 *             the forward's aux
 * Both paths read the same inputs (bf16 operands are converted once, outside
 * the timing: both paths would need them), and the backward's activation
 * state is B's forward output, so both see the same ReLU signs.
 *
 * Then, per group: each path is captured as a CUDA graph; its first launch
 * is checked against the other's (relative L2 distance of every output
 * within the group's tolerance, below; a disagreement fails the group and
 * nothing of it is timed); then 7 interleaved rounds A, B, A, B, ... each
 * launching the graph --reps times between two events (by default as
 * many as fill about 20 ms, 1 to 100: mlp-large's fp32 GEMMs take a few ms
 * each, mlp-medium's bf16 ones tens of us).  A group is "keep"
 * only when B was faster in every round, else "drop" (or "n/a" when
 * cuBLASLt offers no algorithm for it, and for a backward group whose
 * forward is n/a: it would read that forward's aux; an n/a forward group
 * still runs A once, so the layers after it get their input).  A table on
 * stdout, --json FILE with every figure.
 *
 * Tolerances (relative L2): fp32 ReLU and bias 1e-4 (summation order only:
 * about 2^-24 sqrt(k)); fp32 GELU 3e-3 (cuBLASLt's GELU is the tanh form,
 * ours the erf form: 4.7e-4 apart at most in value and 8.7e-4 in slope, a
 * few 1e-4 in relative L2); bf16 1.5e-2 (A rounds the bias, z and a, or the
 * gradient twice, to 8 bits: up to 2^-8 each, about 3e-3 together).
 *
 * Exit: 0 every group agreed (keep or drop), 1 a group disagreed or a CUDA
 * call failed, 2 bad options, 3 no GPU. */
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "common/base/kinds.h"
#include "common/device/kernels.h"

#define ME "bench_epilogue_cuda"
#define MAXL 8
#define MAXR 15
#define LT_WORKSPACE (32u << 20) /* what cuBLASLt asks for on Hopper */

#define CK(call)                                                                           \
    do {                                                                                   \
        cudaError_t e_ = (call);                                                           \
        if (e_ != cudaSuccess) {                                                           \
            fprintf(stderr, ME ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                    cudaGetErrorName(e_));                                                 \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)
#define BK(call)                                                                           \
    do {                                                                                   \
        cublasStatus_t s_ = (call);                                                        \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                                 \
            fprintf(stderr, ME ": %s:%d: %s: %s\n", __FILE__, __LINE__, #call,             \
                    cublasGetStatusName(s_));                                              \
            exit(1);                                                                       \
        }                                                                                  \
    } while (0)

typedef struct {
    const char *name;
    int dims[MAXL + 1], nl, batch;
    act_t act;
} model_t;

typedef struct { /* one group's verdict and figures */
    char id[64];
    int agreed, supported, wins, reps;
    double err[2], tol, a_us[MAXR], b_us[MAXR];
} group_t;

static struct {
    int rounds, reps;
    cudaStream_t s;
    cublasHandle_t blas;
    cublasLtHandle_t lt;
    void *ws;
    FILE *json;
    int njson, bad, ngroups;
    char keep[4096];
} B = {.rounds = 7};

// ---- data --------------------------------------------------------------------
static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float urand(float lo, float hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)(rng >> 40) / (float)(1ull << 24);
}

/* A device buffer of n floats, uniform in [lo, hi) (lo == hi: left unset). */
static float *dev_floats(size_t n, float lo, float hi)
{
    float *d;
    CK(cudaMalloc((void **)&d, n * sizeof *d));
    if (lo != hi) {
        float *h = malloc(n * sizeof *h);
        if (!h) {
            fprintf(stderr, ME ": out of host memory\n");
            exit(1);
        }
        for (size_t i = 0; i < n; i++)
            h[i] = urand(lo, hi);
        CK(cudaMemcpyAsync(d, h, n * sizeof *h, cudaMemcpyHostToDevice, B.s));
        CK(cudaStreamSynchronize(B.s)); /* the copy has read h before it is freed */
        free(h);
    }
    return d;
}

/* The same values as bf16 (a GEMM operand under --precision bf16). */
static uint16_t *dev_bf16(const float *src, int rows, int cols)
{
    uint16_t *d;
    CK(cudaMalloc((void **)&d, (size_t)rows * cols * sizeof *d));
    CK(kern_to_bf16(B.s, d, src, rows, cols, cols));
    return d;
}

/* The relative L2 distance of got from want (n floats, device); NaN when
 * either holds a NaN (an output never written is NaN: see poison()). */
static double rel_l2(const float *want, const float *got, size_t n)
{
    float *h = malloc(2 * n * sizeof *h);
    if (!h)
        exit(1);
    CK(cudaMemcpyAsync(h, want, n * sizeof *h, cudaMemcpyDeviceToHost, B.s));
    CK(cudaMemcpyAsync(h + n, got, n * sizeof *h, cudaMemcpyDeviceToHost, B.s));
    CK(cudaStreamSynchronize(B.s)); /* both paths' launches, then the copies, have run */
    double num = 0, den = 0;
    for (size_t i = 0; i < n; i++) {
        double d = (double)h[n + i] - h[i];
        num += d * d;
        den += (double)h[i] * h[i];
    }
    free(h);
    return sqrt(num / (den > 0 ? den : 1));
}

static void poison(void *p, size_t bytes) { CK(cudaMemsetAsync(p, 0xff, bytes, B.s)); }

// ---- the two paths -------------------------------------------------------------
/* A GEMM as backend_cuda.c's cuda_gemm calls it for row-major operands
 * (column-major C^T = op(B)^T op(A)^T): fp32 cublasSgemm, or bf16 operands
 * through cublasGemmEx with fp32 sums and output. */
static void gemm_a(int bf16, cublasOperation_t tw, int m, int n, int k, const void *W, int ldw,
                   const void *X, int ldx, float *C)
{
    const float one = 1.0f, zero = 0.0f;
    if (bf16)
        BK(cublasGemmEx(B.blas, tw, CUBLAS_OP_N, m, n, k, &one, W, CUDA_R_16BF, ldw, X,
                        CUDA_R_16BF, ldx, &zero, C, CUDA_R_32F, m, CUBLAS_COMPUTE_32F,
                        CUBLAS_GEMM_DEFAULT));
    else
        BK(cublasSgemm(B.blas, tw, CUBLAS_OP_N, m, n, k, &one, W, ldw, X, ldx, &zero, C, m));
}

typedef struct { /* one cublasLtMatmul, planned */
    cublasLtMatmulDesc_t d;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulHeuristicResult_t algo;
    int ok;
    const void *W, *X;
    float *D;
} lt_t;

/* D (m x n) = op(W) X with epilogue epi; W is k x m (tw = T) or m x k. */
static lt_t lt_plan(int bf16, cublasOperation_t tw, int m, int n, int k, const void *W,
                    const void *X, float *D, cublasLtEpilogue_t epi, void *bias, void *aux,
                    int64_t aux_ld)
{
    lt_t p = {.W = W, .X = X, .D = D};
    cudaDataType t = bf16 ? CUDA_R_16BF : CUDA_R_32F;
    int32_t ta = tw, tn = CUBLAS_OP_N;
    uint32_t e = epi;
    BK(cublasLtMatmulDescCreate(&p.d, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
    BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_TRANSB, &tn, sizeof tn));
    BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_EPILOGUE, &e, sizeof e));
    if (bias)
        BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                          sizeof bias));
    if (aux) {
        BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER, &aux,
                                          sizeof aux));
        BK(cublasLtMatmulDescSetAttribute(p.d, CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_LD, &aux_ld,
                                          sizeof aux_ld));
    }
    int wr = tw == CUBLAS_OP_T ? k : m, wc = tw == CUBLAS_OP_T ? m : k;
    BK(cublasLtMatrixLayoutCreate(&p.la, t, (uint64_t)wr, (uint64_t)wc, wr));
    BK(cublasLtMatrixLayoutCreate(&p.lb, t, (uint64_t)k, (uint64_t)n, k));
    BK(cublasLtMatrixLayoutCreate(&p.ld, CUDA_R_32F, (uint64_t)m, (uint64_t)n, m));
    cublasLtMatmulPreference_t pref;
    uint64_t wsb = LT_WORKSPACE;
    BK(cublasLtMatmulPreferenceCreate(&pref));
    BK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                            sizeof wsb));
    int got = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(B.lt, p.d, p.la, p.lb, p.ld, p.ld, pref, 1,
                                                       &p.algo, &got);
    p.ok = st == CUBLAS_STATUS_SUCCESS && got > 0;
    BK(cublasLtMatmulPreferenceDestroy(pref));
    return p;
}

static void lt_run(const lt_t *p)
{
    const float one = 1.0f, zero = 0.0f;
    BK(cublasLtMatmul(B.lt, p->d, &one, p->W, p->la, p->X, p->lb, &zero, p->D, p->ld, p->D, p->ld,
                      &p->algo.algo, B.ws, LT_WORKSPACE, B.s));
}

static void lt_free(lt_t *p)
{
    if (!p->d) /* never planned */
        return;
    cublasLtMatrixLayoutDestroy(p->la), cublasLtMatrixLayoutDestroy(p->lb);
    cublasLtMatrixLayoutDestroy(p->ld), cublasLtMatmulDescDestroy(p->d);
}

// ---- a group: check, then time ---------------------------------------------------
typedef struct {
    int bf16, fwd;
    act_t act;
    cublasOperation_t tw;
    int m, n, k; /* column-major: D is m x n, the sum over k */
    const void *W, *X; /* the GEMM's operands (bf16 copies under bf16) */
    const float *bias;
    float *z, *a;      /* A: fwd z (and a); bwd the gradient, in place */
    const float *zin;  /* A, bwd: the activation's input */
    float *db, *part;  /* A, bwd: bias gradient and its scratch */
    lt_t lt;           /* lt.ok 0: n/a, for the reason na (NULL: cuBLASLt's) */
    const char *na;
    float *dl, *dbl;   /* B's D and bias gradient */
    float *aux;        /* B, fwd GELU: its aux (the GELU input) */
} path_t;

static void run_a(const path_t *p)
{
    gemm_a(p->bf16, p->tw, p->m, p->n, p->k, p->W, p->tw == CUBLAS_OP_T ? p->k : p->m, p->X, p->k,
           p->z);
    if (p->fwd) {
        CK(kern_bias_act_fwd(B.s, p->act, p->z, p->a, p->bias, p->n, p->m, p->bf16));
    } else {
        CK(kern_act_bwd(B.s, p->act, p->zin, p->zin, p->z, (size_t)p->m * p->n, p->bf16));
        CK(kern_bias_grad(B.s, p->db, p->z, p->n, p->m, 0, p->part));
    }
}

static cudaGraphExec_t capture(const path_t *p, int lt)
{
    cudaGraph_t g;
    cudaGraphExec_t e;
    /* the graph holds the path's launches: a replay is the path, nothing else */
    CK(cudaStreamBeginCapture(B.s, cudaStreamCaptureModeThreadLocal));
    if (lt)
        lt_run(&p->lt);
    else
        run_a(p);
    CK(cudaStreamEndCapture(B.s, &g));
    CK(cudaGraphInstantiate(&e, g, 0));
    CK(cudaGraphDestroy(g));
    return e;
}

/* us per launch of e, over reps launches between two events */
static double time_graph(cudaGraphExec_t e, int reps, cudaEvent_t t0, cudaEvent_t t1)
{
    CK(cudaEventRecord(t0, B.s));
    for (int i = 0; i < reps; i++)
        CK(cudaGraphLaunch(e, B.s));
    CK(cudaEventRecord(t1, B.s));
    CK(cudaEventSynchronize(t1)); /* the round's end: its time is read now */
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, t0, t1));
    return 1e3 * ms / reps;
}

static double median(const double *v, int n, double *lo, double *hi)
{
    double s[MAXR];
    memcpy(s, v, (size_t)n * sizeof *s);
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && s[j] < s[j - 1]; j--) {
            double t = s[j];
            s[j] = s[j - 1], s[j - 1] = t;
        }
    *lo = s[0], *hi = s[n - 1];
    return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

static void report(const group_t *g, const char *epi, const path_t *p)
{
    double alo, ahi, blo, bhi, am = 0, bm = 0;
    double err = isnan(g->err[0]) || isnan(g->err[1]) ? NAN : fmax(g->err[0], g->err[1]);
    const char *v = !g->supported ? "n/a" : !g->agreed ? "FAIL" : g->wins == B.rounds ? "keep" : "drop";
    if (g->supported && g->agreed) {
        am = median(g->a_us, B.rounds, &alo, &ahi);
        bm = median(g->b_us, B.rounds, &blo, &bhi);
        printf("%-28s %-15s %5dx%5dx%5d  %8.1e %8.1e  %9.1f [%8.1f-%8.1f] %9.1f [%8.1f-%8.1f] %6.3f %2d/%d  %s\n",
               g->id, epi, p->n, p->m, p->k, err, g->tol, am, alo, ahi, bm,
               blo, bhi, bm / am, g->wins, B.rounds, v);
    } else {
        printf("%-28s %-15s %5dx%5dx%5d  %8.1e %8.1e  %s\n", g->id, epi, p->n, p->m, p->k,
               g->supported ? err : 0.0, g->tol,
               g->supported ? "FAIL: the paths disagree; not timed"
               : p->na      ? p->na
                            : "n/a: cuBLASLt offers no algorithm");
    }
    if (!strcmp(v, "keep"))
        snprintf(B.keep + strlen(B.keep), sizeof B.keep - strlen(B.keep), "%s%s", *B.keep ? " " : "", g->id);
    if (!B.json)
        return;
    fprintf(B.json, "%s{\"id\":\"%s\",\"rows\":%d,\"out\":%d,\"k\":%d,\"supported\":%d,\"agreed\":%d,"
            "\"err\":[%.3e,%.3e],\"tol\":%.1e,\"keep\":%d,\"b_wins\":%d,\"reps\":%d",
            B.njson++ ? "," : "", g->id, p->n, p->m, p->k, g->supported, g->agreed,
            isnan(g->err[0]) ? -1.0 : g->err[0], isnan(g->err[1]) ? -1.0 : g->err[1], g->tol,
            !strcmp(v, "keep"), g->wins, g->reps);
    if (g->supported && g->agreed) {
        fprintf(B.json, ",\"a_median_us\":%.2f,\"b_median_us\":%.2f,\"a_us\":[", am, bm);
        for (int r = 0; r < B.rounds; r++)
            fprintf(B.json, "%s%.2f", r ? "," : "", g->a_us[r]);
        fprintf(B.json, "],\"b_us\":[");
        for (int r = 0; r < B.rounds; r++)
            fprintf(B.json, "%s%.2f", r ? "," : "", g->b_us[r]);
        fprintf(B.json, "]");
    }
    fprintf(B.json, "}");
}

/* Check the two paths of group p against each other, then time them. */
static void run_group(const char *id, const char *epi, path_t *p, double tol)
{
    group_t g = {.tol = tol, .supported = p->lt.ok};
    snprintf(g.id, sizeof g.id, "%s", id);
    B.ngroups++;
    if (!g.supported) {
        if (p->fwd) /* the next layer's input is A's output, as when both ran */
            run_a(p);
        report(&g, epi, p);
        return;
    }
    size_t n = (size_t)p->m * p->n;
    cudaGraphExec_t ga = capture(p, 0), gb = capture(p, 1);
    /* every output poisoned (NaN), then one launch each: what a path leaves
     * unwritten shows as NaN and fails the comparison */
    poison(p->z, n * sizeof(float));
    poison(p->dl, n * sizeof(float));
    if (p->fwd && p->act != ACT_NONE)
        poison(p->a, n * sizeof(float));
    if (p->aux)
        poison(p->aux, n * sizeof(float));
    if (!p->fwd)
        poison(p->db, (size_t)p->m * sizeof(float)), poison(p->dbl, (size_t)p->m * sizeof(float));
    CK(cudaGraphLaunch(ga, B.s));
    CK(cudaGraphLaunch(gb, B.s));
    if (p->fwd) {
        g.err[0] = rel_l2(p->act == ACT_NONE ? p->z : p->a, p->dl, n);
        g.err[1] = p->aux ? rel_l2(p->z, p->aux, n) : 0.0; /* GELU's aux is its input, z */
    } else {
        g.err[0] = rel_l2(p->z, p->dl, n);
        g.err[1] = rel_l2(p->db, p->dbl, (size_t)p->m);
    }
    g.agreed = g.err[0] <= tol && g.err[1] <= tol; /* NaN fails */
    if (!g.agreed) {
        B.bad = 1;
    } else {
        cudaEvent_t t0, t1;
        CK(cudaEventCreate(&t0));
        CK(cudaEventCreate(&t1));
        /* launches per round: about 20 ms of the slower path, 1 to 100 */
        double one = fmax(time_graph(ga, 1, t0, t1), time_graph(gb, 1, t0, t1));
        g.reps = B.reps ? B.reps : (int)fmin(100.0, fmax(1.0, 2e4 / fmax(one, 1e-3)));
        for (int r = 0; r < B.rounds; r++) { /* interleaved: drift hits both alike */
            g.a_us[r] = time_graph(ga, g.reps, t0, t1);
            g.b_us[r] = time_graph(gb, g.reps, t0, t1);
            g.wins += g.b_us[r] < g.a_us[r];
        }
        CK(cudaEventDestroy(t0));
        CK(cudaEventDestroy(t1));
    }
    CK(cudaGraphExecDestroy(ga));
    CK(cudaGraphExecDestroy(gb));
    report(&g, epi, p);
}

// ---- a model in one precision ------------------------------------------------------
static void run_model(const model_t *M, int bf16)
{
    const char *pr = bf16 ? "bf16" : "fp32";
    int L = M->nl, bs = M->batch;
    float *W[MAXL], *b[MAXL], *z[MAXL], *a[MAXL], *dl[MAXL];
    void *aux[MAXL] = {0}, *W16[MAXL] = {0};
    int64_t aux_ld[MAXL] = {0};
    int fwd_ok[MAXL] = {0}; /* B's forward ran: its aux is there for the backward */
    size_t maxw = 0;
    for (int l = 0; l < L; l++) {
        int din = M->dims[l], dout = M->dims[l + 1];
        W[l] = dev_floats((size_t)dout * din, -1.0f / sqrtf((float)din), 1.0f / sqrtf((float)din));
        /* a bias of the sums' own size: one left out cannot hide in the tolerance */
        b[l] = dev_floats((size_t)dout, -0.5f, 0.5f);
        z[l] = dev_floats((size_t)bs * dout, 0, 0);
        a[l] = dev_floats((size_t)bs * dout, 0, 0);
        dl[l] = dev_floats((size_t)bs * dout, 0, 0);
        if (bf16)
            W16[l] = dev_bf16(W[l], dout, din);
        if ((size_t)dout > maxw)
            maxw = (size_t)dout;
    }
    float *x = dev_floats((size_t)bs * M->dims[0], -1.0f, 1.0f);
    float *db = dev_floats(maxw, 0, 0), *dbl = dev_floats(maxw, 0, 0);
    float *part = NULL;
    size_t np = kern_bias_grad_scratch(bs, (int)maxw);
    if (np)
        part = dev_floats(np, 0, 0);
    char id[64], epi[32];
    double tol_act = M->act == ACT_GELU ? 3e-3 : 1e-4;
    // forward, layer by layer: layer l reads A's activation of layer l-1
    for (int l = 0; l < L; l++) {
        int din = M->dims[l], dout = M->dims[l + 1];
        act_t act = l == L - 1 ? ACT_NONE : M->act;
        const float *in = l == 0 ? x : a[l - 1];
        void *in16 = bf16 ? dev_bf16(in, bs, din) : NULL;
        cublasLtEpilogue_t e = CUBLASLT_EPILOGUE_BIAS;
        if (act == ACT_RELU) { /* a bit-mask, ld in bits, a multiple of 128 */
            e = CUBLASLT_EPILOGUE_RELU_AUX_BIAS;
            aux_ld[l] = (dout + 127) / 128 * 128;
            CK(cudaMalloc(&aux[l], (size_t)aux_ld[l] / 8 * bs));
        } else if (act == ACT_GELU) { /* the GELU input, packed (widths are multiples of 8) */
            e = CUBLASLT_EPILOGUE_GELU_AUX_BIAS;
            aux_ld[l] = dout;
            aux[l] = dev_floats((size_t)bs * dout, 0, 0);
        }
        path_t p = {.bf16 = bf16, .fwd = 1, .act = act, .tw = CUBLAS_OP_T, .m = dout, .n = bs,
                    .k = din, .W = bf16 ? W16[l] : (void *)W[l], .X = bf16 ? in16 : (const void *)in,
                    .bias = b[l], .z = z[l], .a = a[l], .dl = dl[l],
                    .aux = act == ACT_GELU ? aux[l] : NULL};
        p.lt = lt_plan(bf16, CUBLAS_OP_T, dout, bs, din, p.W, p.X, dl[l], e, b[l], aux[l], aux_ld[l]);
        snprintf(id, sizeof id, "%s/%s/fwd%d", M->name, pr, l);
        snprintf(epi, sizeof epi, "%s", act == ACT_RELU ? "RELU_AUX_BIAS" : act == ACT_GELU ? "GELU_AUX_BIAS" : "BIAS");
        run_group(id, epi, &p, bf16 ? 1.5e-2 : act == ACT_NONE ? 1e-4 : tol_act);
        fwd_ok[l] = p.lt.ok;
        lt_free(&p.lt);
        if (in16)
            CK(cudaFree(in16));
    }
    // backward: layer l+1's input gradient through layer l's activation, and
    // layer l's bias gradient, for each hidden layer l
    for (int l = L - 2; l >= 0; l--) {
        int din = M->dims[l + 1], dout = M->dims[l + 2];
        float *g = dev_floats((size_t)bs * dout, -1.0f, 1.0f);
        void *g16 = bf16 ? dev_bf16(g, bs, dout) : NULL;
        float *nx = dev_floats((size_t)bs * din, 0, 0), *nxl = dev_floats((size_t)bs * din, 0, 0);
        /* the activation's state both paths read: B's forward (its aux; for
         * A the GELU input, or ReLU's output, positive exactly where the
         * mask is set) */
        const float *zin = M->act == ACT_GELU ? aux[l] : dl[l];
        path_t p = {.bf16 = bf16, .fwd = 0, .act = M->act, .tw = CUBLAS_OP_N, .m = din, .n = bs,
                    .k = dout, .W = bf16 ? W16[l + 1] : (void *)W[l + 1],
                    .X = bf16 ? g16 : (const void *)g, .z = nx, .zin = zin, .db = db, .part = part,
                    .dl = nxl, .dbl = dbl};
        cublasLtEpilogue_t e = M->act == ACT_GELU ? CUBLASLT_EPILOGUE_DGELU_BGRAD : CUBLASLT_EPILOGUE_DRELU_BGRAD;
        if (fwd_ok[l])
            p.lt = lt_plan(bf16, CUBLAS_OP_N, din, bs, dout, p.W, p.X, nxl, e, dbl, aux[l], aux_ld[l]);
        else
            p.na = "n/a: its forward group is n/a (no aux to read)";
        snprintf(id, sizeof id, "%s/%s/bwd%d", M->name, pr, l);
        snprintf(epi, sizeof epi, "%s", M->act == ACT_GELU ? "DGELU_BGRAD" : "DRELU_BGRAD");
        run_group(id, epi, &p, bf16 ? 1.5e-2 : tol_act);
        lt_free(&p.lt);
        CK(cudaFree(g));
        CK(cudaFree(nx));
        CK(cudaFree(nxl));
        if (g16)
            CK(cudaFree(g16));
    }
    for (int l = 0; l < L; l++) {
        CK(cudaFree(W[l]));
        CK(cudaFree(b[l]));
        CK(cudaFree(z[l]));
        CK(cudaFree(a[l]));
        CK(cudaFree(dl[l]));
        if (aux[l])
            CK(cudaFree(aux[l]));
        if (W16[l])
            CK(cudaFree(W16[l]));
    }
    CK(cudaFree(x));
    CK(cudaFree(db));
    CK(cudaFree(dbl));
    if (part)
        CK(cudaFree(part));
}

// ---- options -------------------------------------------------------------------------
static void usage(FILE *f)
{
    fprintf(f,
            "usage: " ME " [options]\n"
            "  --model NAME       mlp-medium, mlp-large or all (default all)\n"
            "  --layers W,W,...   a model of these widths instead (each a multiple of 8)\n"
            "  --act relu|gelu    its activation (default relu)\n"
            "  --batch N          its batch (default 256)\n"
            "  --precision P      fp32, bf16 or all (default all)\n"
            "  --rounds N         interleaved timed rounds, odd, 1..%d (default 7)\n"
            "  --reps N           graph launches per round (default: about 20 ms' worth, 1..100)\n"
            "  --gpu N            the GPU (default 0)\n"
            "  --json FILE        every figure, as JSON\n",
            MAXR);
}

static void bad(const char *opt, const char *what)
{
    fprintf(stderr, ME ": error: %s: %s\n", opt, what);
    exit(2);
}

static int num(const char *opt, const char *s, int min, int max)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < min || v > max)
        bad(opt, "not a whole number in range");
    return (int)v;
}

int main(int argc, char **argv)
{
    static const model_t presets[] = {
        {"mlp-medium", {1024, 2048, 2048, 1024}, 3, 256, ACT_RELU},
        {"mlp-large", {4096, 8192, 8192, 8192, 4096}, 4, 2048, ACT_GELU},
    };
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"layers", 1, 0, 'l'}, {"act", 1, 0, 'a'},  {"batch", 1, 0, 'b'},
        {"precision", 1, 0, 'p'}, {"rounds", 1, 0, 'r'}, {"reps", 1, 0, 'n'}, {"gpu", 1, 0, 'g'},
        {"json", 1, 0, 'j'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    const char *model = "all", *prec = "all", *json = NULL;
    model_t custom = {"custom", {0}, 0, 256, ACT_RELU};
    int gpu = 0, c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'l': {
            char *s = optarg, *end;
            custom.nl = -1;
            while (custom.nl < MAXL) {
                long w = strtol(s, &end, 10);
                if (end == s || w < 8 || w > 65536 || w % 8)
                    bad("--layers", "each width a multiple of 8, 8..65536 (cuBLASLt's aux leading dimension)");
                custom.dims[++custom.nl] = (int)w;
                if (*end != ',')
                    break;
                s = end + 1;
            }
            if (*end != '\0' || custom.nl < 2)
                bad("--layers", "two layers or more (a hidden layer), at most 8, widths separated by commas");
            break;
        }
        case 'a':
            if (strcmp(optarg, "relu") && strcmp(optarg, "gelu"))
                bad("--act", "relu or gelu (the activations cuBLASLt's epilogues offer)");
            custom.act = strcmp(optarg, "relu") ? ACT_GELU : ACT_RELU;
            break;
        case 'b': custom.batch = num("--batch", optarg, 1, 1 << 20); break;
        case 'p':
            if (strcmp(optarg, "fp32") && strcmp(optarg, "bf16") && strcmp(optarg, "all"))
                bad("--precision", "fp32, bf16 or all");
            prec = optarg;
            break;
        case 'r':
            B.rounds = num("--rounds", optarg, 1, MAXR);
            if (B.rounds % 2 == 0)
                bad("--rounds", "an odd number (the median is a round's own figure)");
            break;
        case 'n': B.reps = num("--reps", optarg, 1, 100000); break;
        case 'g': gpu = num("--gpu", optarg, 0, 1023); break;
        case 'j': json = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc)
        bad(argv[optind], "unexpected argument");
    if (strcmp(model, "all") && strcmp(model, "mlp-medium") && strcmp(model, "mlp-large"))
        bad("--model", "mlp-medium, mlp-large or all");
    int ngpu = 0;
    cudaError_t e = cudaGetDeviceCount(&ngpu);
    if (e != cudaSuccess || ngpu == 0) {
        fprintf(stderr, ME ": no GPU (%s)\n", e != cudaSuccess ? cudaGetErrorName(e) : "none visible");
        return 3;
    }
    if (gpu >= ngpu)
        bad("--gpu", "no such GPU");
    CK(cudaSetDevice(gpu));
    CK(cudaStreamCreateWithFlags(&B.s, cudaStreamNonBlocking));
    BK(cublasCreate(&B.blas));
    BK(cublasSetStream(B.blas, B.s));
    BK(cublasLtCreate(&B.lt));
    CK(cudaMalloc(&B.ws, LT_WORKSPACE));
    /* path A's GEMMs are captured too: given no workspace, cuBLAS would
     * allocate one inside the graph (backend_cuda.c sets its own the same
     * way); one stream orders A's use of it and B's */
    BK(cublasSetWorkspace(B.blas, B.ws, LT_WORKSPACE));
    char tmp[4096] = "";
    if (json) {
        snprintf(tmp, sizeof tmp, "%s.tmp", json);
        if (!(B.json = fopen(tmp, "w")))
            bad("--json", "cannot write the file");
        fprintf(B.json, "{\"tool\":\"" ME "\",\"rounds\":%d,\"groups\":[", B.rounds);
    }
    printf("%-28s %-15s %17s  %8s %8s  %32s %32s %6s %5s  %s\n", "group", "cuBLASLt epilogue",
           "rows x out x k", "rel err", "tol", "A: GEMM + kernels, us [range]",
           "B: cublasLtMatmul, us [range]", "B/A", "B won", "verdict");
    for (int pi = 0; pi < 2; pi++) {
        if (strcmp(prec, "all") && strcmp(prec, pi ? "bf16" : "fp32"))
            continue;
        if (custom.nl > 0) {
            run_model(&custom, pi);
            continue;
        }
        for (size_t mi = 0; mi < sizeof presets / sizeof presets[0]; mi++)
            if (!strcmp(model, "all") || !strcmp(model, presets[mi].name))
                run_model(&presets[mi], pi);
    }
    printf("keep: %s\n", *B.keep ? B.keep : "(none)");
    if (B.json) {
        fprintf(B.json, "],\"agreed\":%d,\"groups_judged\":%d}\n", !B.bad, B.ngroups);
        if (fclose(B.json) != 0 || rename(tmp, json) != 0)
            bad("--json", "cannot write the file");
    }
    CK(cudaFree(B.ws));
    BK(cublasLtDestroy(B.lt));
    BK(cublasDestroy(B.blas));
    CK(cudaStreamDestroy(B.s));
    return B.bad ? 1 : 0;
}
