/* gate/paired.h: the A/B gate's statistics (ddpbench --against).
 *
 * Two builds run round by round on one machine; each round gives one paired
 * log-ratio d = ln(candidate's figure / base's figure).  The gate looks after
 * every ABBA pair of rounds and judges the median of the d's by its
 * confidence sequence (confseq.h): an interval valid at every look at once,
 * so the gate may stop at the first look that decides, and the chance of a
 * wrong verdict stays bounded whenever it stops.  Distribution-free (a
 * count of signs), exact (calibrated by dynamic programming for the cap),
 * no random numbers: the same rounds always give the same verdict.  Beside
 * it, reported only, the Hodges-Lehmann estimate (the median of the
 * n(n+1)/2 Walsh averages) with Wilcoxon's fixed-sample signed-rank
 * interval.  Why the median: docs/gate.md.
 *
 * Also here: the order of a round's two runs (ABBA), the verdict against a
 * tolerance, and the gate's rule at one look (paired_look): the verdict on
 * all used rounds, a change that only the lopsided rounds show (one side
 * disturbed, the other not) turned into no verdict, and, when the figure
 * is the CPU work, the median step judged too when no round was disturbed. */
#ifndef DDPBENCH_PAIRED_H
#define DDPBENCH_PAIRED_H

#include <stdbool.h>

#include "gate/confseq.h"

#define PAIRED_MAX CONFSEQ_MAX /* rounds (the Walsh averages: n(n+1)/2 doubles) */
#define PAIRED_MIN_ROUNDS 6    /* the fewest with a 95% signed-rank interval */
#define PAIRED_ALPHA 0.05      /* the chance that the median leaves the interval at any look */
#define PAIRED_EVERY 2         /* a look after every ABBA pair of rounds */
#define PAIRED_SHAPE CONFSEQ_SQRT /* u_n = c sqrt(n), c calibrated for the cap */
/* lopsided rounds retaken at most, for a cap of `cap` rounds: a machine busy
 * throughout cannot be waited out */
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
 * confidence >= 1 - alpha of d[0..n) (reported beside the gate's figure,
 * never judged: tighter on clean rounds, but one bad round in ten breaks
 * its interval, and a fixed-sample interval does not survive a look at
 * every pair). */
int paired_estimate_hl(const double *d, int n, double alpha, paired_est_t *out);

/* The verdict of an estimate against a tolerance tol (a fraction of the
 * base's figure: 0.05 for 5%); the bounds are ln(1 + tol) and ln(1 - tol). */
paired_verdict_t paired_judge(const paired_est_t *e, double tol);
const char *paired_verdict_name(paired_verdict_t v);

/* ABBA: round r (from 0) runs the base first when true.  Rounds 0,1 give
 * B C | C B, so a drift that is linear in time cancels over each two rounds
 * and neither side always runs first (a warmer cache, a quieter moment). */
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

/* The gate's rule on the n used rounds r[0..n) against tolerance tol:
 *   1. the verdict of the median's confidence sequence over all of them;
 *   2. by_work (the figure is the CPU work): when no round was disturbed
 *      (the wall time can be trusted), a median step whose own interval
 *      lies beyond the tolerance is a regression too (a change in waiting
 *      alone leaves the work as it was);
 *   3. when lopsided rounds are among them, a regression or an improvement
 *      must stand on the other rounds alone, else no verdict (explained).
 * Returns 0, or -1 when n is out of 1..cs->cap or memory runs out. */
int paired_look(const confseq_t *cs, const paired_round_t *r, int n, bool by_work, double tol,
                paired_look_t *out);

#endif
