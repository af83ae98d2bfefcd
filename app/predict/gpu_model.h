/* app/predict/gpu_model.h: single, DataParallel and DDP on a GPU box one does
 * not have, term by term (app/predict/README.md derives each term and cites
 * each constant).  A step is the sum of its terms: a byte count over a
 * bandwidth, FLOPs over a share of peak, or operators times a measured host
 * cost.  Nothing here is fitted to a published case. */
#ifndef DDPBENCH_GPU_MODEL_H
#define DDPBENCH_GPU_MODEL_H

#include <stdbool.h>
#include <stddef.h>

#include "app/predict/profile.h"

/* The measured constants (README.md, "The constants" and "Without peer
 * access"): the share of an operator's host cost under the interpreter lock
 * (bench/torch_dispatch.py), the share of the one-way rate a ring through
 * host memory keeps (NVIDIA/nccl#384); PyTorch DDP's bucket caps. */
#define GPU_LOCK_SHARE 0.96
#define GPU_SHM_DUPLEX (3.9 / 10.31)
#define GPU_FIRST_BUCKET (1024.0 * 1024.0)
#define GPU_BUCKET (25.0 * 1024.0 * 1024.0)
#define GPU_MAX_DEVICES 64
#define GPU_MODES 3 /* single, dp, ddp: indexed by mode_t_ */

/* The terms, in the order a step runs them; gpu_terms[t] names each. */
typedef enum {
    GT_LOAD, GT_H2D, GT_SCATTER, GT_REPLICATE, GT_FORWARD, GT_BACKWARD, GT_LAUNCH, GT_GATHER,
    GT_LOSS, GT_GRAD_OUT, GT_REDUCE, GT_ALLREDUCE, GT_DDP_FIXED, GT_OPTIM, GT_COUNT
} gpu_term_t;

/* A term's key ("replicate") and its words ("the parameters replicated from
 * device 0 to every other device"); [GT_COUNT] is "none". */
extern const struct gpu_term_name { const char *key, *words; } gpu_terms[GT_COUNT + 1];

typedef struct {
    double term[GT_COUNT];
    double step;               /* seconds */
    double rate;               /* samples/s over every GPU it runs on */
} gpu_step_t;

typedef struct {
    int devices;
    int batch;                 /* rows per device */
    gpu_step_t m[GPU_MODES];   /* [MODE_SINGLE], [MODE_DP], [MODE_DDP] */
    double ddp_hidden;         /* all-reduce time backward hid */
    bool dp_input_bound;       /* DP's data terms outweigh its compute */
    int dp_culprit;            /* the term that makes DP slower than DDP; GT_COUNT: it is not */
} gpu_row_t;

/* A box and a workload on 1..count GPUs (--hardware), and the published
 * case on that box the model is checked against. */
typedef struct {
    bool on;
    hw_profile_t hw;
    workload_t wl;
    gpu_row_t rows[GPU_MAX_DEVICES];
    char check[512];           /* cases_check's line, or "" */
} gpu_lesson_t;

/* Whether the workload's dtype has a peak on this GPU (tf32 falls back to
 * fp32 where there is none, as PyTorch does); else DDP_ERR_INPUT. */
int gpu_model_check(const hw_profile_t *hw, const workload_t *wl, char *err);
/* Row k (1..count). */
void gpu_model_row(const hw_profile_t *hw, const workload_t *wl, int k, gpu_row_t *row);
/* The peak FLOP/s the workload's dtype computes at on this GPU. */
double gpu_model_peak(const hw_profile_t *hw, const workload_t *wl);

// cases.c: the published measurements the model is held against (published_cases.json,
// compiled in like the profiles), each predicted from the shipped profiles and judged against
// its tolerance; docs/predict-cases.md says how the unit test holds each declared status to it.

typedef struct {
    char id[64], what[160];
    double predicted, published, tolerance;
    bool pass, declared_pass, flag; /* flag: a yes/no case (no tolerance) */
} case_result_t;

/* The compiled-in cases, parsed (free with cJSON_Delete), or NULL. */
cJSON *cases_load(char *err);
/* One case of the list, predicted and judged; DDP_ERR_INPUT when it names
 * a profile or key that is not there. */
int cases_eval(const cJSON *c, case_result_t *r, char *err);
/* "checked against SOURCE: FIGURE predicted X, published Y (within,
 * tolerance T%)" for the first case held against this hardware profile's
 * name, or "". */
void cases_check(const char *hardware, char *out, size_t n);

#endif
