/* common/nn/model.h: the MLP every mode trains, exactly nn.Sequential(Linear,
 * act, Linear, act, ..., Linear).  Parameters and gradients each live in one
 * flat arena in parameter order [W0,b0,W1,b1,...], W stored [out,in] row-major
 * like nn.Linear (y = x W^T + b).  A replica is one device's copy: its arenas
 * and the activation buffers for up to max_rows rows. */
#ifndef DDPBENCH_MODEL_H
#define DDPBENCH_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/device/backend.h"
#include "common/base/kinds.h"

#define MODEL_MAX_LAYERS 32

typedef struct {
    int nlayers;                        /* Linear layers */
    int dims[MODEL_MAX_LAYERS + 1];     /* widths, dims[0] = input */
    act_t act;                          /* between layers */
    size_t w_off[MODEL_MAX_LAYERS];     /* offset of W_l in the arena (floats) */
    size_t b_off[MODEL_MAX_LAYERS];     /* offset of b_l */
    size_t nparams;                     /* arena length (floats) */
    int max_width;                      /* max over dims */
} model_spec_t;

int model_spec_init(model_spec_t *s, const int *dims, int ndims, act_t act, char *err);
static inline int model_in_dim(const model_spec_t *s) { return s->dims[0]; }
static inline int model_out_dim(const model_spec_t *s) { return s->dims[s->nlayers]; }
/* Parameter p of the arena's order (2l: W_l, 2l+1: b_l): where it starts
 * and how many floats it holds. */
static inline size_t model_param_off(const model_spec_t *s, int p)
{
    return p % 2 == 0 ? s->w_off[p / 2] : s->b_off[p / 2];
}
static inline size_t model_param_count(const model_spec_t *s, int p)
{
    size_t out = (size_t)s->dims[p / 2 + 1];
    return p % 2 == 0 ? (size_t)s->dims[p / 2] * out : out;
}

/* nn.Linear's default init, on the host, from (seed, RNG_STREAM_INIT):
 * W, b ~ U(-1/sqrt(fan_in), 1/sqrt(fan_in)), layer by layer, W then b. */
void model_init_params(const model_spec_t *s, uint64_t seed, float *host_params);

/* Called by backward once layer l's dW and db are written (l = L-1 down to 0).
 * DDP's reducer uses it to launch a bucket's all-reduce while backward goes on.
 * A non-zero return aborts backward with that code. */
typedef int (*layer_hook_fn)(void *ctx, int layer);

typedef struct {
    backend_t *be;
    const model_spec_t *spec;
    int max_rows;
    int tgt_cols;
    float *params;   /* device arena [nparams] */
    float *grads;    /* device arena [nparams] */
    float *x;        /* input rows [max_rows, dims[0]] */
    float *y;        /* targets [max_rows, tgt_cols] */
    float *z[MODEL_MAX_LAYERS]; /* layer outputs before activation [max_rows, dims[l+1]] */
    float *a[MODEL_MAX_LAYERS]; /* after activation (a[L-1] == z[L-1]: no activation) */
    float *dbuf[2];  /* backward ping-pong [max_rows, max_width] */
    float *dout;     /* gradient of the output [max_rows, dims[L]] */
    float *loss_sum; /* one device float written by the loss */
    /* Where layer l's W, b and their gradients are: in the arenas (set by
     * replica_init), or where a sharded strategy put them (ZeRO-3 gathers a
     * layer's parameters into a buffer of its own; ZeRO-2 and -3 write its
     * gradients into the buffer of the bucket in flight). */
    float *pw[MODEL_MAX_LAYERS], *pb[MODEL_MAX_LAYERS];
    float *gw[MODEL_MAX_LAYERS], *gb[MODEL_MAX_LAYERS];
    /* Called before layer l's forward (backward false) and before its
     * backward (true), to place it (the pointers above); NULL: none.  A
     * non-zero return aborts the pass with that code, but MODEL_DETACH
     * before a backward ends it there without an error: layer l and those
     * below take no part in the loss's gradient (as below a detach). */
    int (*pre)(void *ctx, int layer, bool backward);
    void *pre_ctx;
} replica_t;
#define MODEL_DETACH 64

/* What replica_init_sharded leaves out: the arenas a sharded strategy does
 * not hold (NULL; the layer pointers its own to set). */
#define REPLICA_NO_PARAMS 1u
#define REPLICA_NO_GRADS 2u

/* Allocate a replica's buffers on be (all zeroed). */
int replica_init(replica_t *r, backend_t *be, const model_spec_t *s, int max_rows,
                 int tgt_cols, char *err);
/* The FLOPs of one row's forward and backward (a multiply-add is 2): the
 * GEMMs (no input gradient for the first layer) and the bias additions. */
double model_flops_per_row(const model_spec_t *s);
/* Bytes of the activation buffers replica_init allocates (MEM_ACTS). */
double replica_act_bytes(const model_spec_t *s, int max_rows, int tgt_cols);
/* The same without the arenas in `skip` (REPLICA_NO_*). */
int replica_init_sharded(replica_t *r, backend_t *be, const model_spec_t *s, int max_rows,
                         int tgt_cols, unsigned skip, char *err);
void replica_free(replica_t *r);

/* Forward rows rows of x (device, usually r->x) into replica_output(r). */
int model_forward(replica_t *r, const float *x, int rows);
static inline float *replica_output(const replica_t *r) { return r->z[r->spec->nlayers - 1]; }

/* Backward from dout [rows, dims[L]] (may be r->dout), given the activations of
 * the last forward over x.  Gradients are written into r->grads (accumulate:
 * added to them, as after no_sync micro-batches).  hook may be NULL. */
int model_backward(replica_t *r, const float *x, int rows, const float *dout,
                   bool accumulate, layer_hook_fn hook, void *hook_ctx);

/* Loss of the last forward against targets tgt (device), gradient into r->dout
 * scaled by grad_scale (1/denominator of the mean); the sum of row losses lands
 * in r->loss_sum (device). */
int model_loss(replica_t *r, loss_t kind, const float *tgt, int rows, float grad_scale);

/* A double sum (agrees across modes to rounding) and an FNV-1a hash of the bits. */
typedef struct {
    double sum;
    double abs_sum;
    uint64_t bits;
} param_checksum_t;
param_checksum_t model_checksum(const float *host_params, size_t n);

/* How many of the host parameters are NaN or infinite; when any, where the
 * first is ("layer 2 weight [3, 0] is nan") into where[size]. */
size_t model_count_nonfinite(const model_spec_t *s, const float *host_params, char *where,
                             size_t size);

/* DDPBENCH_FAULT=ulp (base/fault.h): the largest weight of the middle layer
 * one ulp up in r's parameters (waits for the device); *p: which parameter.
 * The largest, so that the difference lasts: an update much larger than a
 * parameter rounds both copies of it alike. */
int replica_nudge(replica_t *r, int *p);

/* The L2 norm of r's gradients (waits for the device). */
int replica_grad_norm(replica_t *r, double *norm);

/* --check-replicas: a 64-bit hash of n host floats' bits as four floats of
 * 16 bits each, whole numbers every transport moves exactly. */
void model_fingerprint(const float *p, size_t n, float f[4]);

/* Parameter p's name in messages: "layer 2 weight", "layer 2 bias" (layers from 1). */
const char *model_param_name(int p, char *buf, size_t n);
/* Where host arrays a and b of s's parameters differ bit for bit: the first
 * parameter that does (*first; -1: none) and its largest |a - b| there;
 * returns the largest |a - b| over all (a NaN against a number: infinity). */
double model_diff(const model_spec_t *s, const float *a, const float *b, int *first,
                  double *first_delta);

/* Largest |a-b| / max(|a|,|b|,floor) over two arrays; the equivalence contract's measure. */
double max_rel_diff(const float *a, const float *b, size_t n, double floor);

#endif
