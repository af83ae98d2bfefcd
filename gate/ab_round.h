/* gate/ab_round.h: what the A/B gate holds of its rounds: each side's child
 * run as read from its --json (ab_child.c), a round's pair, and how the
 * rounds ended (ab.c).  Types and one-line helpers only, so that the
 * runner, the judgement (ab_judge.c) and the outputs (ab_report.c) share
 * them without calling each other. */
#ifndef DDPBENCH_AB_ROUND_H
#define DDPBENCH_AB_ROUND_H

#include <cJSON.h>
#include <stdbool.h>

#include "common/base/kinds.h"
#include "gate/confseq.h"
#include "common/measure/timing.h"

enum { AB_BASE = 0, AB_CAND = 1 };

/* One child run, as the gate reads its --json. */
typedef struct {
    cJSON *json;                       /* the whole object (every figure, for --json) */
    double step_p50;                   /* step_time_s.p50: the wall figure */
    double work_p10;                   /* work_cpu_s.p10 (NAN: none, a GPU run) */
    double work_dev[MAX_DEVICES];      /* devices[].work_cpu_s.p10 (NAN: none) */
    int ndev;
    double phase[MAX_DEVICES][PH_COUNT]; /* devices[].phases_s_per_step */
    double load1;                      /* environment.loadavg's first figure; NAN if none */
    bool disturbed;                    /* machine.disturbed, when the child records it */
    char why[160];                     /* machine.why: what disturbed it */
    char core[32];                     /* the BLAS kernels that ran: environment.blas's
                                          "(core NAME" ("" when it names none) */
    double wall_s;                     /* the child's wall time, start to reaped */
} ab_side_t;

typedef struct {
    int round;       /* 0..; -1 the warm-up */
    bool base_first; /* ABBA: paired_base_first(round) */
    bool used;       /* false: disturbed and retaken (and the warm-up) */
    ab_side_t side[2];
    bool by_work;    /* the gate's figure is the work (both sides on the CPU), not the wall */
    double ratio;    /* the candidate's figure / the base's: the ratio judged */
    double ratio_wall; /* the candidate's step_p50 / the base's (reported) */
} ab_round_t;

/* Why the rounds ended. */
typedef enum {
    AB_STOP_DECIDED = 0, /* a look's interval settled it */
    AB_STOP_BUDGET,      /* another pair would not fit --gate-budget */
    AB_STOP_CAP,         /* the most rounds (--repeat) */
} ab_stop_t;

/* How the gate ran. */
typedef struct {
    const char *base, *cand; /* the two executables */
    confseq_t cs;            /* the interval's calibration (cap = the most rounds) */
    double budget_s;         /* --gate-budget */
    double tolerance_pct;    /* --tolerance */
    double seconds;          /* the gate's wall time, the warm-up included */
    ab_stop_t stop;
    int retaken;             /* lopsided rounds retaken */
} ab_gate_t;

/* The figure a round judges on one side (seconds): work_p10 or step_p50. */
static inline double round_figure(const ab_round_t *x, int side)
{
    return x->by_work ? x->side[side].work_p10 : x->side[side].step_p50;
}

/* One side disturbed and the other not (machine.disturbed in their JSON). */
static inline bool ab_lopsided(const ab_round_t *r)
{
    return r->side[AB_BASE].disturbed != r->side[AB_CAND].disturbed;
}

#endif
