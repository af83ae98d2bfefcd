/* app/predict/gpu_model.c: the term-by-term model of gpu_model.h.  One
 * function per mode; the numbers are the profiles' and the measured
 * constants of gpu_model.h, derived in app/predict/README.md. */
#include <math.h>
#include <string.h>

#include "app/predict/gpu_model.h"
#include "common/base/status.h"

const struct gpu_term_name gpu_terms[GT_COUNT + 1] = {
    {"load", "waiting for one process's data loader"},
    {"h2d", "the batch copied from host memory to the GPU"},
    {"scatter", "device 0 scattering every other device's rows"},
    {"replicate", "the parameters replicated from device 0 to every other device"},
    {"forward", "forward"},
    {"backward", "backward"},
    {"launch", "the host launching operators slower than the GPU runs them"},
    {"gather", "the outputs gathered onto device 0"},
    {"loss", "the loss over every device's outputs, on device 0"},
    {"grad_out", "the outputs' gradient scattered back from device 0"},
    {"reduce", "the gradients reduced onto device 0"},
    {"all_reduce", "the bucketed all-reduce that backward did not hide"},
    {"ddp_fixed", "DDP's copies into its buckets and back, and the averaging"},
    {"optimizer", "the optimizer step"},
    {"none", "none"}};

double gpu_model_peak(const hw_profile_t *hw, const workload_t *wl)
{
    double p = hw->flops[wl->dtype];
    return p > 0 ? p : wl->dtype == PROF_TF32 ? hw->flops[PROF_FP32] : 0.0;
}

int gpu_model_check(const hw_profile_t *hw, const workload_t *wl, char *err)
{
    if (gpu_model_peak(hw, wl) > 0)
        return DDP_OK;
    return err_set(err, DDP_ERR_INPUT, "%s: gpu.flops.%s is 0: %s has no %s units for %s's dtype",
                   hw->from, profile_dtypes[wl->dtype], hw->gpu, profile_dtypes[wl->dtype],
                   wl->name);
}

// ---------------------------------------------------------------------------
// the pieces

/* Rows per device on k devices: the workload's per-device batch, or its
 * global batch split like torch.chunk. */
static int rows_of(const workload_t *wl, int k)
{
    return wl->global_batch > 0 ? (wl->global_batch + k - 1) / k : wl->batch_per_device;
}

/* What k GPUs' links carry at once from or to one of them: a ring's bus
 * bandwidth, and device 0's copies to its peers (one link each, at most
 * what all of one GPU's links carry). */
static double fan_bw(const hw_profile_t *hw, int k)
{
    return fmin(hw->gpu_bw, (k - 1) * hw->link_bw);
}

/* A ring all-reduce of bytes over k GPUs (nccl-tests' busbw relation) at
 * the profile's measured bus bandwidth, else the links' (through host
 * memory: the share a two-way ring keeps). */
static double all_reduce_s(const hw_profile_t *hw, int k, double bytes)
{
    double bw = hw->allreduce_bw > 0 ? hw->allreduce_bw
                                     : fan_bw(hw, k) * (hw->p2p ? 1.0 : GPU_SHM_DUPLEX);
    return k < 2 ? 0.0 : 2.0 * (k - 1) / k * bytes / bw + 2.0 * (k - 1) * hw->link_latency;
}

#define GRAD_BYTES(wl) (4.0 * (wl)->params) /* fp32 gradients, as autocast keeps them */

/* What every mode's GPU does with its rows: copy them in, forward and
 * backward, the host's launches of `launch` seconds (the GPU runs ahead of
 * nothing, so the longer wins), the optimizer. */
static void base(const hw_profile_t *hw, const workload_t *wl, int rows, double launch,
                 gpu_step_t *s)
{
    memset(s, 0, sizeof *s);
    s->term[GT_H2D] = rows * wl->in_bytes / hw->pcie_bw;
    double c = rows * wl->flops_per_sample / (hw->efficiency * gpu_model_peak(hw, wl));
    s->term[GT_FORWARD] = c / 3.0; /* backward is twice forward's FLOPs */
    s->term[GT_BACKWARD] = 2.0 * c / 3.0;
    s->term[GT_LAUNCH] = fmax(0.0, launch - c);
    /* bytes read and written per parameter: SGD p, g -> p; momentum adds
     * its buffer; Adam p, g, m, v -> p, m, v (fp32) */
    static const double per[] = {12.0, 20.0, 28.0};
    s->term[GT_OPTIM] = per[wl->optimizer] * wl->params / hw->mem_bw;
}

/* The data loader: one process's workers for its rows, overlapped with the
 * rest of the step (they prefetch); what it adds is the wait.  The step and
 * its samples/s over every GPU (all: their rows). */
static void finish(const workload_t *wl, int rows, int all, gpu_step_t *s)
{
    double t = 0.0;
    for (int i = 0; i < GT_COUNT; i++)
        t += s->term[i];
    if (wl->load_rate > 0)
        s->term[GT_LOAD] = fmax(0.0, rows / (wl->load_rate * wl->load_workers) - t);
    s->step = t + s->term[GT_LOAD];
    s->rate = all / s->step;
}

// ---------------------------------------------------------------------------
// the modes

static void single(const hw_profile_t *hw, const workload_t *wl, gpu_step_t *s)
{
    int rows = rows_of(wl, 1);
    base(hw, wl, rows, wl->ops * wl->op_s, s);
    finish(wl, rows, rows, s);
}

/* DataParallel: one process, one thread per GPU under one interpreter
 * lock; device 0 holds the batch, the master parameters and the optimizer. */
static void dp(const hw_profile_t *hw, const workload_t *wl, int k, gpu_step_t *s)
{
    if (k == 1) { /* nn.DataParallel on one device calls the module itself */
        single(hw, wl, s);
        return;
    }
    int rows = rows_of(wl, k), all = rows * k;
    double bw = fan_bw(hw, k), lat = (k - 1) * hw->link_latency;
    base(hw, wl, rows, wl->ops * wl->op_s * (1.0 + (k - 1) * GPU_LOCK_SHARE), s);
    s->term[GT_H2D] = all * wl->in_bytes / hw->pcie_bw; /* the whole batch to device 0 */
    s->term[GT_SCATTER] = (k - 1) * rows * wl->in_bytes / bw;
    s->term[GT_REPLICATE] = GRAD_BYTES(wl) / bw + lat; /* broadcast_coalesced: NCCL, pipelined */
    s->term[GT_GATHER] = (k - 1) * rows * wl->out_bytes / bw;
    if (!wl->loss_inside) {
        s->term[GT_LOSS] = 2.0 * all * wl->out_bytes / hw->mem_bw;
        s->term[GT_GRAD_OUT] = (k - 1) * rows * wl->out_bytes / bw;
    }
    s->term[GT_REDUCE] = GRAD_BYTES(wl) / bw + lat; /* reduce_add_coalesced: NCCL reduce */
    finish(wl, all, all, s);
}

/* DDP's buckets against backward: gradients become ready evenly through
 * backward, last layer first (the late parameters, a tied embedding, only
 * at its end); buckets go out in order on one stream.  Through host memory
 * (no peer access) none of it hides: the published runs without P2P pay
 * the whole all-reduce however long backward is (app/predict/README.md).
 * Returns the all-reduce time after backward; *total every bucket's. */
static double exposed(const hw_profile_t *hw, const workload_t *wl, int k, double backward,
                      double *total)
{
    double late = 4.0 * wl->late_params, even = GRAD_BYTES(wl) - late;
    double done = 0.0, end = 0.0, cap = GPU_FIRST_BUCKET;
    *total = 0.0;
    while (done < even) {
        double b = fmin(cap, even - done);
        done += b;
        double t = all_reduce_s(hw, k, b);
        end = fmax(end, hw->p2p ? backward * done / even : backward) + t;
        *total += t;
        cap = GPU_BUCKET;
    }
    if (late > 0) {
        double t = all_reduce_s(hw, k, late);
        end = fmax(end, backward) + t;
        *total += t;
    }
    return fmax(0.0, end - backward);
}

static void ddp(const hw_profile_t *hw, const workload_t *wl, int k, gpu_step_t *s, double *hidden)
{
    int rows = rows_of(wl, k);
    base(hw, wl, rows, wl->ops * wl->op_s, s);
    double total = 0.0;
    double bwd = s->term[GT_BACKWARD] + s->term[GT_LAUNCH] * 2.0 / 3.0;
    s->term[GT_ALLREDUCE] = exposed(hw, wl, k, bwd, &total);
    *hidden = total - s->term[GT_ALLREDUCE];
    s->term[GT_DDP_FIXED] = 6.0 * GRAD_BYTES(wl) / hw->mem_bw;
    finish(wl, rows, rows * k, s);
}

void gpu_model_row(const hw_profile_t *hw, const workload_t *wl, int k, gpu_row_t *row)
{
    memset(row, 0, sizeof *row);
    row->devices = k;
    row->batch = rows_of(wl, k);
    single(hw, wl, &row->m[MODE_SINGLE]);
    dp(hw, wl, k, &row->m[MODE_DP]);
    ddp(hw, wl, k, &row->m[MODE_DDP], &row->ddp_hidden);
    const double *t = row->m[MODE_DP].term, *d = row->m[MODE_DDP].term;
    double compute = t[GT_FORWARD] + t[GT_BACKWARD] + t[GT_LAUNCH];
    row->dp_input_bound = k > 1 && (t[GT_LOAD] > 0 || t[GT_H2D] + t[GT_SCATTER] > compute);
    /* the term with DP's largest excess over DDP's, when DP is slower */
    row->dp_culprit = GT_COUNT;
    double most = 0.0;
    for (int i = 0; i < GT_COUNT && row->m[MODE_DP].step > row->m[MODE_DDP].step; i++)
        if (t[i] - d[i] > most) {
            most = t[i] - d[i];
            row->dp_culprit = i;
        }
}
