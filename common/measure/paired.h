/* common/measure/paired.h: the A/B gate's statistics (ddpbench --against).
 *
 * Two builds run round by round on one machine; each round gives one paired
 * log-ratio d = ln(candidate's median step / base's median step).  From the
 * n rounds the gate takes the median of d and its distribution-free interval
 * (the sign test inverted: order statistics, exact binomial, no random
 * numbers, so the same rounds always give the same verdict; a bootstrap of
 * the median approximates it).  Beside it, for comparison, the
 * Hodges-Lehmann estimate (the median of the n(n+1)/2 Walsh averages) with
 * Wilcoxon's signed-rank interval.  Why the median: docs/gate.md.
 *
 * Also here: the order of a round's two runs (ABBA), the verdict against a
 * tolerance, and how many rounds would settle a straddling interval. */
#ifndef DDPBENCH_PAIRED_H
#define DDPBENCH_PAIRED_H

#include <stdbool.h>

#define PAIRED_MAX 1000       /* rounds (the Walsh averages: n(n+1)/2 doubles) */
#define PAIRED_MIN_ROUNDS 6   /* the fewest with a 95% signed-rank interval */

typedef struct {
    int n;             /* pairs */
    double estimate;   /* Hodges-Lehmann estimate of the log-ratio */
    double lo, hi;     /* the interval on the log-ratio; NAN when n < PAIRED_MIN_ROUNDS */
    double conf;       /* its achieved confidence (>= the asked one; 0 without one) */
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

/* P(B <= k) for B ~ Binomial(n, 1/2) (the sign test). */
double paired_sign_cdf(int n, int k);

/* The gate's figure: the median of d[0..n) and its distribution-free
 * interval of confidence >= 1 - alpha, [d_(c), d_(n+1-c)] (the sign test
 * inverted).  Returns 0, or -1 when n is out of 1..PAIRED_MAX or memory runs
 * out. */
int paired_estimate_median(const double *d, int n, double alpha, paired_est_t *out);

/* The Hodges-Lehmann estimate and the signed-rank interval of confidence
 * >= 1 - alpha of d[0..n) (reported beside the gate's figure: tighter on
 * clean rounds, but one bad round in ten breaks its interval). */
int paired_estimate_hl(const double *d, int n, double alpha, paired_est_t *out);

/* The verdict of an estimate against a tolerance tol (a fraction of the
 * base's step: 0.05 for 5%); the bounds are ln(1 + tol) and ln(1 - tol). */
paired_verdict_t paired_judge(const paired_est_t *e, double tol);
const char *paired_verdict_name(paired_verdict_t v);

/* For PAIRED_NO_VERDICT: the rounds in all that would settle it at the
 * measured noise (the interval's half-width shrinking as 1/sqrt(n)); 0 when
 * it is settled already, -1 when no number of rounds would (the estimate
 * sits on the bound). With fewer than PAIRED_MIN_ROUNDS: at least that. */
int paired_rounds_to_settle(const paired_est_t *e, double tol);

/* ABBA: round r (from 0) runs the base first when true.  Rounds 0,1 give
 * B C | C B, so a drift that is linear in time cancels over each two rounds
 * and neither side always runs first (a warmer cache, a quieter moment). */
bool paired_base_first(int round);

#endif
