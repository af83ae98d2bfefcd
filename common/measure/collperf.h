/* common/measure/collperf.h: what --mode comm measured, in nccl-tests' terms (sizes,
 * algbw and busbw as docs/modes.md defines them): per collective and message size, one
 * op's time out of place and in place, and the elements the check found wrong. */
#ifndef DDPBENCH_COLLPERF_H
#define DDPBENCH_COLLPERF_H

#include <stdbool.h>

#include "common/base/kinds.h"

#define COLLPERF_MAX_SIZES 48
#define COLLPERF_MAX_COLLS 5

enum { COLLPERF_OUT_OF_PLACE = 0, COLLPERF_IN_PLACE = 1 };

typedef struct {
    long bytes;        /* nccl-tests' size (docs/modes.md) */
    long count;        /* floats per rank in the op (comm_op_t.count) */
    double time_s[2];  /* per op, [out of place, in place], the slowest rank */
    long wrong[2];     /* elements the check found wrong, every rank together */
} collperf_point_t;

typedef struct {
    int kind;          /* comm.h's coll_kind_t */
    char name[24];     /* "all-reduce" */
    double bus_factor;
    int npoints;
    collperf_point_t pt[COLLPERF_MAX_SIZES];
} collperf_coll_t;

typedef struct {
    int world;
    backend_kind_t backend;
    comm_kind_t comm;
    int devices[MAX_DEVICES];
    long iters, warmup_iters;
    int ncoll;
    collperf_coll_t coll[COLLPERF_MAX_COLLS];
    long wrong_total;
} collperf_t;

/* Bytes per second of point p, place 0 (out of place) or 1 (in place). */
double collperf_algbw(const collperf_point_t *p, int place);
double collperf_busbw(const collperf_coll_t *c, const collperf_point_t *p, int place);
/* nccl-tests' "Avg bus bandwidth": the mean busbw over every point and place. */
double collperf_avg_busbw(const collperf_t *r);
/* The collective named `kind` (coll_kind_t), or NULL. */
const collperf_coll_t *collperf_find(const collperf_t *r, int kind);

/* The alpha-beta model of one collective: time = alpha + bytes * beta (out of place)
 * fitted to its points; false when there are fewer than two sizes. */
bool collperf_fit(const collperf_coll_t *c, double *alpha_s, double *beta_s_per_byte);
/* Seconds for a message of `bytes`: the measured point when one is within a
 * factor of 1.5, else the fit (interpolating between the nearest points). */
double collperf_time_at(const collperf_coll_t *c, double bytes);

#endif
