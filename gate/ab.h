/* gate/ab.h: the A/B gate's insides (ab.c runs them): each side's child run
 * (ab_child.c: its own process group, stopped past its deadline, nothing of
 * it outliving its round), a round's pair and how the rounds ended, the
 * judgement at a look (ab_judge.c: pure, rounds in, a judgement out) and the
 * outputs (ab_report.c: the text, --json and --csv; docs/gate.md shows each). */
#ifndef DDPBENCH_AB_H
#define DDPBENCH_AB_H

#include <cJSON.h>
#include <stdbool.h>
#include <stdio.h>

#include "common/base/kinds.h"
#include "common/config/config.h"
#include "common/measure/timing.h"
#include "gate/paired.h"

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

/* One child run: its command line and deadline. */
typedef struct {
    char **args;       /* its argv, args[0] the executable, NULL-terminated */
    int which;         /* AB_BASE or AB_CAND */
    int round;         /* 0..; -1 the warm-up */
    double deadline_s; /* > 0: stopped past it and reported as hung */
    const char *deadline_why; /* what set the deadline, for the message */
} ab_child_t;

/* Run it to its end and fill s (s->json the caller's): DDP_OK; DDP_ERR_RUNTIME
 * naming the side and the round when it failed, hung, printed no JSON or lacks
 * the figures; DDP_ERR_INTERRUPTED when the gate was asked to stop. */
int ab_child_run(const ab_child_t *c, ab_side_t *s, char *err);

#define AB_GROUPS 5

extern const char *const ab_group_names[AB_GROUPS];

/* What the gate concluded at a look. */
typedef struct {
    paired_look_t look;    /* the rule's verdict and its estimates */
    paired_est_t est_hl;   /* Hodges-Lehmann (reported, never judged) */
    bool by_work;          /* the figure judged is the work (CPU), not the median step */
    bool busy;             /* the machine was busy enough to say so (no attribution) */
    char reason[512];      /* why a regressed by the wall, or why busy */
    /* attribution: per device and phase group, the median paired delta
     * (seconds a step) with its interval, against the base's median */
    int ndev;
    double delta[MAX_DEVICES][AB_GROUPS], delta_lo[MAX_DEVICES][AB_GROUPS],
        delta_hi[MAX_DEVICES][AB_GROUPS], base[MAX_DEVICES][AB_GROUPS], base_step;
    /* by_work: each device's median paired work ratio and its interval */
    double work_ratio[MAX_DEVICES], work_lo[MAX_DEVICES], work_hi[MAX_DEVICES];
    int straggler;         /* the device that alone slowed down beyond its noise, -1 none */
} ab_judgement_t;

/* Judge the used rounds of r[0..nr) with the gate's interval cs against
 * tolerance tol (a fraction); the verdict is j->look.verdict. */
void ab_judge(const confseq_t *cs, double tol, const ab_round_t *r, int nr, ab_judgement_t *j);

/* How much device dv's work grew (by the work), else its forward+backward,
 * as a fraction: the estimate, and its interval's low end into *lo. */
double ab_growth(const ab_judgement_t *j, int dv, double *lo);

/* A delta's interval excludes 0: the move is beyond its own noise. */
static inline bool ab_beyond_noise(double lo, double hi)
{
    return lo > 0.0 || hi < 0.0;
}

/* "1.061..1.104" of a log-ratio's interval, an open end as "open" */
void ab_ratio_range(char *buf, size_t n, double lo, double hi);
void ab_print_text(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                   const ab_judgement_t *j);
/* DDP_OK, or DDP_ERR_RUNTIME when the write failed */
int ab_print_json(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j);
void ab_print_csv(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j);

#endif
