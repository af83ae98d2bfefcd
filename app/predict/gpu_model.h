/* app/predict/gpu_model.h: single, DataParallel and DDP on a GPU box one does
 * not have, term by term (app/predict/README.md derives each term and cites
 * each constant).  A step is the sum of its terms; every term is a byte
 * count over a bandwidth, FLOPs over a share of peak, or operators times a
 * measured host cost.  Nothing here is fitted to a published case. */
#ifndef DDPBENCH_GPU_MODEL_H
#define DDPBENCH_GPU_MODEL_H

#include <stdbool.h>

#include "app/predict/profile.h"

/* The share of an operator's host cost that holds the interpreter lock,
 * measured by bench/torch_dispatch.py (PyTorch 1.13 on this project's CPU:
 * with 2 threads 0.96, range 0.46-1.47, over 9 ABBA rounds; the cost itself
 * is the workload's op_s, PROF_OP_S unless it cites another). */
#define GPU_LOCK_SHARE 0.96
/* Without peer access NCCL stages a ring through host memory (its SHM
 * transport), and the ring's traffic flows both ways at once, which CPUs
 * handle badly: on 2 GPUs over PCIe 3.0 x16, nccl-tests measured all-reduce
 * at 3.9 GB/s bus bandwidth against broadcast's one-way 10.31 GB/s
 * (NVIDIA/nccl#384; sjeaugey: "some CPUs do not handle bidirectional
 * traffic well").  The share of link.bw such a ring keeps: */
#define GPU_SHM_DUPLEX (3.9 / 10.31)
/* DDP's buckets (PyTorch's defaults: the first 1 MiB, then 25 MiB) */
#define GPU_FIRST_BUCKET (1024.0 * 1024.0)
#define GPU_BUCKET (25.0 * 1024.0 * 1024.0)
#define GPU_MAX_DEVICES 64

/* The terms, in the order a step runs them. */
typedef enum {
    GT_LOAD,      /* waiting for the data loader (when the workload gives its rate) */
    GT_H2D,       /* the batch from host memory to the device (device 0: all of it) */
    GT_SCATTER,   /* DP: device 0 sends each other device its rows */
    GT_REPLICATE, /* DP: the parameters from device 0 to the others */
    GT_FORWARD,
    GT_BACKWARD,
    GT_LAUNCH,    /* the host launching operators longer than the GPU computes */
    GT_GATHER,    /* DP: the outputs onto device 0 */
    GT_LOSS,      /* DP: the loss over the gathered outputs, on device 0 */
    GT_GRAD_OUT,  /* DP: the outputs' gradient back to each device */
    GT_REDUCE,    /* DP: the gradients summed onto device 0 */
    GT_ALLREDUCE, /* DDP: the bucketed all-reduce, the part backward did not hide */
    GT_DDP_FIXED, /* DDP: gradients into the buckets and back, the averaging */
    GT_OPTIM,     /* the optimizer (DP: on device 0 alone) */
    GT_COUNT
} gpu_term_t;

typedef struct {
    double term[GT_COUNT];
    double step;
} gpu_step_t;

typedef struct {
    int devices;
    int batch;                 /* rows per device */
    gpu_step_t single, dp, ddp;
    double ddp_hidden;         /* all-reduce time backward hid */
    bool dp_input_bound;       /* DP's data terms outweigh its compute */
} gpu_row_t;

/* Whether the workload's dtype has a peak on this GPU (tf32 falls back to
 * fp32 where there is none, as PyTorch does); else DDP_ERR_INPUT. */
int gpu_model_check(const hw_profile_t *hw, const workload_t *wl, char *err);
/* Row k (1..count). */
void gpu_model_row(const hw_profile_t *hw, const workload_t *wl, int k, gpu_row_t *row);
/* The term's key ("replicate") and its words ("the parameters copied from
 * device 0 to every other device"). */
const char *gpu_term_key(int t);
const char *gpu_term_words(int t);
/* The term that makes DP's step longer than DDP's at k devices (GT_COUNT
 * when DP is not slower). */
int gpu_model_dp_culprit(const gpu_row_t *row);
/* The peak FLOP/s and the share of it the model computes at. */
double gpu_model_peak(const hw_profile_t *hw, const workload_t *wl);

#endif
