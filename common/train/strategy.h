/* common/train/strategy.h: the three ways to train, behind one table each:
 * single_strategy (single.c), dp_strategy (dp/) and ddp_strategy (ddp/).
 * run takes a validated config (backend resolved, at least one device) and
 * a checked dataset, trains, and fills a run_result_t; DDP_ERR_INPUT for
 * the devices the user named, DDP_ERR_RUNTIME for a fault, one line in err. */
#ifndef DDPBENCH_STRATEGY_H
#define DDPBENCH_STRATEGY_H

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/measure/collperf.h"
#include "common/measure/result.h"
#include "common/nn/model.h"

/* What one device holds, in bytes, as the strategy allocates it. */
typedef struct {
    double params, grads, optim;
} strategy_mem_t;

typedef struct {
    int (*run)(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err);
    /* Device `device` of `devices` under c (DDP: its --zero stage). */
    int (*mem)(const model_spec_t *s, const config_t *c, int devices, int device,
               strategy_mem_t *out, char *err);
    /* The sizes of the collectives a step sends, in bytes (DDP's buckets),
     * at most max of them into bytes[]: *n.  NULL: none. */
    int (*collectives)(const model_spec_t *s, const config_t *c, double *bytes, int max, int *n,
                       char *err);
    /* DDP: every collective --coll names over --min-bytes..--max-bytes on
     * cfg's devices, one rank each (--mode comm, and what --predict
     * measures).  NULL elsewhere. */
    int (*comm_bench)(const config_t *cfg, collperf_t *out, char *err);
    /* DDP: run where rank r runs its own configuration rank_config(cfg, r),
     * as ranks another launcher started each parse their own command line
     * (the start-up check must then catch a difference: --scenario
     * mismatch, the tests).  NULL elsewhere. */
    int (*run_each)(const config_t *cfg, const dataset_t *data,
                    const config_t *(*rank_config)(const config_t *cfg, int rank),
                    run_result_t *res, char *err);
} strategy_t;

extern const strategy_t single_strategy, dp_strategy, ddp_strategy;

static inline const strategy_t *strategy_of(mode_t_ mode)
{
    return mode == MODE_DP ? &dp_strategy : mode == MODE_DDP ? &ddp_strategy : &single_strategy;
}

/* How the outputs speak of a strategy's runs and what of a run they show:
 * each mode's words and shape, written once here (bookends.c), so that no
 * report, page or gate branches on the mode. */
typedef struct {
    const char *title;  /* in sentences: "single", "DP", "DDP" */
    const char *member; /* one of its devices: "device", "rank" */
    const char *lane;   /* its devices' second stream on a timeline ("copies", "comm"); NULL:
                           none */
    const char *css;    /* the page's class of its measured points */
    int dx;             /* their offset on the page, so that the modes at one device count
                           stand apart */
    const char *phase[PH_COUNT]; /* a phase's name in its tables where not phase_name's */
    const char *graphs; /* --cuda-graph on: what each full step after the first replays */
    const char *pytorch; /* its PyTorch twin (--emit-pytorch) */
    bool reference;     /* the run the others are checked against (single): one device, and
                           --threads are its BLAS threads */
    bool lead;          /* device 0 alone gathers, computes the loss and steps: its table is
                           device 0's, the others apart */
    bool ranks;         /* a process per device, alike: buckets, --zero, --comm-hook,
                           --slow-rank, each rank's own samples */
} strategy_words_t;

/* Mode m's words (compare's and comm's say nothing of a strategy). */
const strategy_words_t *strategy_words(mode_t_ m);

/* What every strategy's device holds when it keeps the whole model: the
 * parameters, their gradients, and the optimizer's state when it steps
 * (train/bookends.c). */
strategy_mem_t strategy_mem_whole(const model_spec_t *s, const config_t *c, bool steps);

#endif
