/* app/predict/gpu_model.c: the term-by-term model of gpu_model.h.  One
 * function per mode; the numbers are the profiles' and the measured
 * constants of gpu_model.h, derived in app/predict/README.md. */
#include <math.h>
#include <string.h>

#include "app/predict/gpu_model.h"
#include "common/base/status.h"

static const char *const keys[GT_COUNT] = {
    "load", "h2d", "scatter", "replicate", "forward", "backward", "launch", "gather",
    "loss", "grad_out", "reduce", "all_reduce", "ddp_fixed", "optimizer"};
static const char *const words[GT_COUNT] = {
    "waiting for one process's data loader",
    "the batch copied from host memory to the GPU",
    "device 0 scattering every other device's rows",
    "the parameters replicated from device 0 to every other device",
    "forward",
    "backward",
    "the host launching operators slower than the GPU runs them",
    "the outputs gathered onto device 0",
    "the loss over every device's outputs, on device 0",
    "the outputs' gradient scattered back from device 0",
    "the gradients reduced onto device 0",
    "the bucketed all-reduce that backward did not hide",
    "DDP's copies into its buckets and back, and the averaging",
    "the optimizer step"};

const char *gpu_term_key(int t)
{
    return t >= 0 && t < GT_COUNT ? keys[t] : "none";
}

const char *gpu_term_words(int t)
{
    return t >= 0 && t < GT_COUNT ? words[t] : "none";
}

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

/* A ring all-reduce's bus bandwidth: the profile's measured one, else the
 * links' (through host memory: the share a two-way ring keeps). */
static double ring_bw(const hw_profile_t *hw, int k)
{
    if (hw->allreduce_bw > 0)
        return hw->allreduce_bw;
    return fan_bw(hw, k) * (hw->p2p ? 1.0 : GPU_SHM_DUPLEX);
}

/* A ring all-reduce of bytes over k GPUs (nccl-tests' busbw relation). */
static double all_reduce_s(const hw_profile_t *hw, int k, double bytes)
{
    if (k < 2)
        return 0.0;
    return 2.0 * (k - 1) / k * bytes / ring_bw(hw, k) + 2.0 * (k - 1) * hw->link_latency;
}

static double grad_bytes(const workload_t *wl)
{
    return 4.0 * wl->params; /* fp32 gradients, as autocast keeps them */
}

static double optim_s(const hw_profile_t *hw, const workload_t *wl)
{
    /* bytes read and written per parameter: SGD p, g -> p; momentum adds
     * its buffer; Adam p, g, m, v -> p, m, v (fp32) */
    static const double per[] = {12.0, 20.0, 28.0};
    return per[wl->optimizer] * wl->params / hw->mem_bw;
}

/* forward and backward of rows on one GPU, and the host's launches of
 * `launch` seconds: the GPU runs ahead of nothing, so the longer wins */
static void compute(const hw_profile_t *hw, const workload_t *wl, int rows, double launch,
                    gpu_step_t *s)
{
    double c = rows * wl->flops_per_sample / (hw->efficiency * gpu_model_peak(hw, wl));
    s->term[GT_FORWARD] = c / 3.0; /* backward is twice forward's FLOPs */
    s->term[GT_BACKWARD] = 2.0 * c / 3.0;
    s->term[GT_LAUNCH] = fmax(0.0, launch - c);
}

/* The data loader: one process's workers for its rows, overlapped with the
 * rest of the step (they prefetch); what it adds is the wait. */
static void finish(const workload_t *wl, int rows, gpu_step_t *s)
{
    double t = 0.0;
    for (int i = 0; i < GT_COUNT; i++)
        t += s->term[i];
    if (wl->load_rate > 0)
        s->term[GT_LOAD] = fmax(0.0, rows / (wl->load_rate * wl->load_workers) - t);
    s->step = t + s->term[GT_LOAD];
}

// ---------------------------------------------------------------------------
// the modes

static void single(const hw_profile_t *hw, const workload_t *wl, gpu_step_t *s)
{
    int rows = rows_of(wl, 1);
    memset(s, 0, sizeof *s);
    s->term[GT_H2D] = rows * wl->in_bytes / hw->pcie_bw;
    compute(hw, wl, rows, wl->ops * wl->op_s, s);
    s->term[GT_OPTIM] = optim_s(hw, wl);
    finish(wl, rows, s);
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
    memset(s, 0, sizeof *s);
    s->term[GT_H2D] = all * wl->in_bytes / hw->pcie_bw;
    s->term[GT_SCATTER] = (k - 1) * rows * wl->in_bytes / bw;
    s->term[GT_REPLICATE] = grad_bytes(wl) / bw + lat; /* broadcast_coalesced: NCCL, pipelined */
    double launch = wl->ops * wl->op_s * (1.0 + (k - 1) * GPU_LOCK_SHARE);
    compute(hw, wl, rows, launch, s);
    s->term[GT_GATHER] = (k - 1) * rows * wl->out_bytes / bw;
    if (!wl->loss_inside) {
        s->term[GT_LOSS] = 2.0 * all * wl->out_bytes / hw->mem_bw;
        s->term[GT_GRAD_OUT] = (k - 1) * rows * wl->out_bytes / bw;
    }
    s->term[GT_REDUCE] = grad_bytes(wl) / bw + lat; /* reduce_add_coalesced: NCCL reduce */
    s->term[GT_OPTIM] = optim_s(hw, wl);
    finish(wl, all, s);
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
    double late = 4.0 * wl->late_params, even = grad_bytes(wl) - late;
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
    memset(s, 0, sizeof *s);
    s->term[GT_H2D] = rows * wl->in_bytes / hw->pcie_bw;
    compute(hw, wl, rows, wl->ops * wl->op_s, s);
    double total = 0.0;
    double bwd = s->term[GT_BACKWARD] + s->term[GT_LAUNCH] * 2.0 / 3.0;
    s->term[GT_ALLREDUCE] = exposed(hw, wl, k, bwd, &total);
    *hidden = total - s->term[GT_ALLREDUCE];
    s->term[GT_DDP_FIXED] = 6.0 * grad_bytes(wl) / hw->mem_bw;
    s->term[GT_OPTIM] = optim_s(hw, wl);
    finish(wl, rows, s);
}

void gpu_model_row(const hw_profile_t *hw, const workload_t *wl, int k, gpu_row_t *row)
{
    memset(row, 0, sizeof *row);
    row->devices = k;
    row->batch = rows_of(wl, k);
    single(hw, wl, &row->single);
    dp(hw, wl, k, &row->dp);
    ddp(hw, wl, k, &row->ddp, &row->ddp_hidden);
    const double *t = row->dp.term;
    double compute = t[GT_FORWARD] + t[GT_BACKWARD] + t[GT_LAUNCH];
    row->dp_input_bound = k > 1 && (t[GT_LOAD] > 0 || t[GT_H2D] + t[GT_SCATTER] > compute);
}

int gpu_model_dp_culprit(const gpu_row_t *row)
{
    if (!(row->dp.step > row->ddp.step))
        return GT_COUNT;
    int best = GT_COUNT;
    double most = 0.0;
    for (int i = 0; i < GT_COUNT; i++) {
        double d = row->dp.term[i] - row->ddp.term[i];
        if (d > most) {
            most = d;
            best = i;
        }
    }
    return best;
}
