/* gate/ab_judge.h: the A/B gate's judgement of its used rounds at one look:
 * the rule (gate/paired.h: the median's confidence sequence, the wall
 * judged by the work's side when no round was disturbed, a change only the
 * lopsided rounds show made no verdict), the words for a busy machine, and
 * where the change went: each device's work, and each device's phase groups,
 * each with its own interval, so that a phase is named only beyond its own
 * noise.  Pure: it reads rounds and writes a judgement, nothing else. */
#ifndef DDPBENCH_AB_JUDGE_H
#define DDPBENCH_AB_JUDGE_H

#include <stdbool.h>

#include "gate/ab_round.h"
#include "gate/paired.h"

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

#endif
