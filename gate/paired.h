/* gate/paired.h: the A/B gate's statistics (ddpbench --against): each round
 * gives a paired log-ratio d = ln(candidate / base); their median is judged by
 * its confidence sequence (confseq.h), with the Hodges-Lehmann estimate and
 * Wilcoxon's interval beside it (reported only), ABBA order and the gate's
 * rule at one look.  Why these: docs/gate.md. */
#ifndef DDPBENCH_PAIRED_H
#define DDPBENCH_PAIRED_H

#include <stdbool.h>

#include "gate/confseq.h"

#define PAIRED_MAX CONFSEQ_MAX /* rounds (the Walsh averages: n(n+1)/2 doubles) */
#define PAIRED_ALPHA 0.05      /* the chance that the median leaves the interval at any look */
#define PAIRED_EVERY 2         /* a look after every ABBA pair of rounds */
#define PAIRED_SHAPE CONFSEQ_SQRT /* u_n = c sqrt(n), c calibrated for the cap */
/* lopsided rounds retaken at most: a machine busy throughout cannot be waited out */
#define PAIRED_RETAKES(cap) ((cap) / 5 + 1)

typedef struct {
    int n;             /* pairs */
    double estimate;   /* the estimate of the log-ratio (the median; Hodges-Lehmann's for _hl) */
    double lo, hi;     /* the interval on the log-ratio: NAN without one (too few pairs for
                          _hl), -INFINITY / INFINITY where a confidence sequence is open */
    double conf;       /* its confidence (>= the asked one; 0 without one) */
    bool uniform;      /* the confidence holds at every look at once (a confidence sequence) */
    double median;     /* the plain median of the log-ratios */
    double spread;     /* 1.4826 x their median absolute deviation (a robust sd) */
} paired_est_t;

typedef enum {
    PAIRED_NO_CHANGE = 0, /* the interval inside +-tolerance */
    PAIRED_IMPROVED,      /* the interval wholly below -tolerance */
    PAIRED_REGRESSED,     /* the interval wholly beyond +tolerance */
    PAIRED_NO_VERDICT,    /* it straddles a bound (or there is none) */
} paired_verdict_t;

/* The median of v[0..n) (v is left as it was). NAN when n == 0. */
double paired_median(const double *v, int n);

/* P(T <= t) for Wilcoxon's signed-rank statistic T on n pairs (no ties). */
double paired_signed_rank_cdf(int n, int t);

/* The median of d[0..n) and its interval from the confidence sequence cs
 * (confseq_interval: valid at every look at once).  Returns 0, or -1 when
 * n is out of 1..cs->cap or memory runs out. */
int paired_estimate_seq(const confseq_t *cs, const double *d, int n, paired_est_t *out);

/* The Hodges-Lehmann estimate and the fixed-sample signed-rank interval of
 * confidence >= 1 - alpha of d[0..n) (reported, never judged: docs/gate.md). */
int paired_estimate_hl(const double *d, int n, double alpha, paired_est_t *out);

/* The verdict of an estimate against a tolerance tol (a fraction of the
 * base's figure: 0.05 for 5%); the bounds are ln(1 + tol) and ln(1 - tol). */
paired_verdict_t paired_judge(const paired_est_t *e, double tol);
const char *paired_verdict_name(paired_verdict_t v);

/* ABBA: round r (from 0) runs the base first when true (docs/gate.md: why). */
bool paired_base_first(int round);

/* One used round, as the gate's rule sees it. */
typedef struct {
    double d;      /* ln(candidate / base) of the figure judged */
    double d_wall; /* ln of the median steps' ratio (the same as d when the figure is the step) */
    bool lopsided; /* one side disturbed, the other not */
    bool both;     /* both sides disturbed */
} paired_round_t;

/* The gate at one look. */
typedef struct {
    paired_est_t est;       /* all used rounds */
    paired_est_t est_clean; /* the rounds not lopsided */
    paired_est_t est_wall;  /* the median step's ratios (by_work) */
    paired_verdict_t verdict;
    bool wall_judged;       /* by the work, the wall time turned the verdict to regressed */
    bool explained;         /* the lopsided rounds explain a change: made no verdict */
    int lopsided, both;     /* rounds lopsided; rounds disturbed on both sides */
} paired_look_t;

/* The gate's rule on the n used rounds r[0..n) against tolerance tol: the
 * median's verdict over all; by_work with no round disturbed, a median step
 * beyond the tolerance regresses too; a change only lopsided rounds show is
 * no verdict (explained).  0, or -1 when n is out of 1..cs->cap or no memory. */
int paired_look(const confseq_t *cs, const paired_round_t *r, int n, bool by_work, double tol,
                paired_look_t *out);

#endif
