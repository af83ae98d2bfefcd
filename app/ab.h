/* app/ab.h: the A/B gate, ddpbench --against BASE [--candidate CAND].
 *
 * Two executables run the same options as separate child processes with
 * --json, round by round in ABBA order (measure/paired.h); each round's pair
 * gives the ratio of their median steps.  ab.c runs the rounds (children,
 * their failures, Ctrl-C, retakes of disturbed rounds); ab_report.c judges
 * them (the paired statistic, the verdict, the attribution by phase and
 * device) and prints the text, --json or --csv. */
#ifndef DDPBENCH_AB_H
#define DDPBENCH_AB_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/base/kinds.h"
#include "common/config/config.h"
#include "common/measure/paired.h"
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
    double wall_s;                     /* the child's wall time, start to reaped */
} ab_side_t;

typedef struct {
    int round;       /* 0.. */
    bool base_first; /* ABBA: paired_base_first(round) */
    bool used;       /* false: disturbed and retaken */
    ab_side_t side[2];
    bool by_work;    /* the gate's figure is the work (both sides on the CPU), not the wall */
    double ratio;    /* the candidate's figure / the base's: the ratio judged */
    double ratio_wall; /* the candidate's step_p50 / the base's (reported) */
} ab_round_t;

#define AB_MAX_TAKES (2 * PAIRED_MAX)
#define AB_GROUPS 5

/* What the gate concluded. */
typedef struct {
    paired_est_t est, est_hl, est_clean; /* all used rounds; Hodges-Lehmann; not lopsided */
    bool by_work;          /* the figure judged is the work (CPU), not the median step */
    paired_est_t est_wall; /* the median step's paired ratios (when by_work: reported, and
                              judged only when no round was disturbed) */
    bool wall_judged;      /* by_work, and the wall time turned the verdict */
    paired_verdict_t verdict;
    int rounds_to_settle;  /* for no verdict: rounds in all (-1: none would) */
    int disturbed;         /* used rounds lopsided: one side disturbed, the other not */
    int both_disturbed;    /* used rounds disturbed on both sides */
    bool busy;             /* the machine was busy enough to say so (no attribution) */
    bool explained;        /* ... and it explains a change: the verdict became no verdict */
    char reason[512];
    /* attribution: median paired delta per device and phase group */
    int ndev;
    double delta[MAX_DEVICES][AB_GROUPS], base[MAX_DEVICES][AB_GROUPS], base_step;
    double work_ratio[MAX_DEVICES]; /* by_work: each device's median paired work ratio */
    int straggler;         /* the device that alone slowed down, -1 none */
} ab_judgement_t;

extern const char *const ab_group_names[AB_GROUPS];

/* The gate: run it and print its result; returns a status (DDP_OK for no
 * change or improved, DDP_ERR_REGRESSED, DDP_ERR_NOISY for no verdict,
 * DDP_ERR_RUNTIME / DDP_ERR_INTERRUPTED with err, DDP_ERR_INPUT). */
int ab_main(const config_t *cfg, int argc, char **argv, char *err);

/* The figure a round judges on one side (seconds): work_p10 or step_p50. */
static inline double round_figure(const ab_round_t *x, int side)
{
    return x->by_work ? x->side[side].work_p10 : x->side[side].step_p50;
}

/* One side disturbed and the other not (machine.disturbed in their JSON). */
bool ab_lopsided(const ab_round_t *r);

/* ab_report.c: judge the used rounds; print them (text on f, or --json /
 * --csv on f). */
void ab_judge(const config_t *cfg, const ab_round_t *r, int nr, ab_judgement_t *j);
void ab_print_text(FILE *f, const config_t *cfg, const char *base, const char *cand,
                   const ab_round_t *r, int nr, const ab_judgement_t *j);
int ab_print_json(FILE *f, const config_t *cfg, const char *base, const char *cand,
                  const ab_round_t *r, int nr, const ab_judgement_t *j);
void ab_print_csv(FILE *f, const config_t *cfg, const ab_round_t *r, int nr,
                  const ab_judgement_t *j);

#endif
