/* app/predict/predict.h: --predict, DP's and DDP's step on 1..8 devices from what one device
 * and one collective benchmark measured: single's phases per step on the global batch, the
 * model's sizes, DDP's buckets and --mode comm's fits (time = alpha + bytes * beta) of
 * all-reduce, broadcast and reduce on K0 ranks.  The alpha-beta model, term by term, and
 * what it leaves out (the reasons a prediction can miss, which compare names):
 * docs/results.md. */
#ifndef DDPBENCH_PREDICT_H
#define DDPBENCH_PREDICT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/config/config.h"
#include "common/measure/collperf.h"
#include "common/measure/timing.h"
#include "common/nn/model.h"
#include "common/train/strategy.h"

#define PREDICT_MAX_DEVICES 8
#define PREDICT_MAX_BUCKETS 64

typedef struct {
    /* single mode on the global batch: seconds per step */
    double phase_s[PH_COUNT];
    int batch;                 /* global batch (rows of one micro-batch) */
    int accum;
    double param_bytes;
    double in_bytes_per_row;   /* features: what DP scatters */
    double out_bytes_per_row;  /* outputs: what DP gathers (and sends back as gradients) */
    int nbuckets;
    double bucket_bytes[PREDICT_MAX_BUCKETS]; /* DDP's, in launch order (last layer first) */
    bool overlap;
    /* the collectives, from --mode comm on k0 ranks (NULL: no cost measured) */
    const collperf_coll_t *all_reduce, *broadcast, *reduce;
    int k0;
    /* how many benches each op's quickest time was taken over, and how far
     * apart the benches were: the largest size's slowest over its quickest,
     * less 1, the worst collective's (0 for one bench) */
    int benches;
    double bench_spread;
} predict_in_t;

typedef struct {
    int devices;
    double dp_phase_s[PH_COUNT];  /* DP's device 0 */
    double ddp_phase_s[PH_COUNT]; /* a DDP rank */
    double dp_step_s, ddp_step_s;
    double ddp_comm_s;            /* every bucket's all-reduce, hidden or not */
} predict_row_t;

/* The step of K devices, K = 1..PREDICT_MAX_DEVICES into rows[K-1]. */
void predict_steps(const predict_in_t *in, predict_row_t rows[PREDICT_MAX_DEVICES]);
/* One row, for K devices. */
void predict_row(const predict_in_t *in, int k, predict_row_t *out);
/* Seconds of an all-reduce of `bytes` on k ranks (ring alpha-beta from the fit). */
double predict_all_reduce_s(const predict_in_t *in, int k, double bytes);

/* The crossover: the smallest model, scaled from this one, on which DDP on k
 * devices takes a shorter step than single, calibrated on two measured
 * steps.  A model s times as large (its widths grown; the same batch and
 * buckets) computes forward, backward and the optimizer s times as long and
 * all-reduces s times the bytes; the rest of each step (data, loss, waits)
 * stays.  So single's step is single_s + (s-1) single_grow, where
 * single_grow is its measured forward, backward and optimizer, and DDP's is
 * ddp_s + (s-1) ddp_grow + exposed(s) - exposed(1), with ddp_grow its ranks'
 * and exposed the model's exposed all-reduce (predict_row).  Scales 2^(i/4)
 * from 1/PREDICT_SCALE_MAX to PREDICT_SCALE_MAX are tried; the first that
 * wins, and every larger one, must win.  Returns its parameters (the scale
 * in *scale), or -1 when none does or nothing was measured. */
#define PREDICT_SCALE_MAX 4096.0
double predict_crossover(const predict_in_t *in, int k, double single_s, double single_grow,
                         double ddp_s, double ddp_grow, double *scale);

/* DDP's ZeRO stages on 1..8 devices under c (predict_zero.c): bytes, time (in: the measured
 * collectives), memory as ddp's table allocates it plus the activations of tgt_cols-wide
 * batches, and, under --mem-limit (mem_limit bytes, 0: none), the crossover. */
void predict_zero_table(FILE *f, const config_t *c, double mem_limit, const model_spec_t *s,
                        int tgt_cols, const predict_in_t *in, const strategy_t *ddp);

#endif
