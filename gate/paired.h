/* gate/paired.h: the A/B gate's statistics (ddpbench --against): each round
 * gives a paired log-ratio d = ln(candidate / base); their median is judged by
 * its confidence sequence, an interval valid at every look (Howard and Ramdas,
 * Bernoulli 28(3), 2022: the band |S_n - n/2| <= u_n = c g(n) on the count of
 * d_i <= m, c calibrated exactly for the cap by dynamic programming; the
 * interval [d_(ceil(n/2 - u_n)), d_(floor(n/2 + u_n) + 1)]), with the
 * Hodges-Lehmann estimate and Wilcoxon's interval beside it (reported only),
 * ABBA order and the gate's rule at one look.  Why these: docs/gate.md. */
#ifndef DDPBENCH_PAIRED_H
#define DDPBENCH_PAIRED_H

#include <stdbool.h>

// ---------------------------------------------------------------------------
// the median's confidence sequence

#define CONFSEQ_MAX 1000 /* the largest cap */

typedef enum {
    CONFSEQ_SQRT = 0, /* u_n = c sqrt(n) */
    CONFSEQ_MIXTURE,  /* u_n = c sqrt((n/4 + rho) ln((n/4 + rho) / (rho alpha^2))): Robbins' two-sided
                         normal mixture for a walk of variance n/4, tightest near n = 20; c = 1 is
                         the closed form */
    CONFSEQ_STITCHED, /* u_n = c 1.7 sqrt(V (ln ln 2V + 0.72 ln(10.4 / alpha))), V = max(n/4, 1):
                         Howard, Ramdas, McAuliffe and Sekhon (Ann. Statist. 2021), eq. (2),
                         two-sided (alpha/2 a side); c = 1 is the closed form */
} confseq_shape_t;

typedef struct {
    confseq_shape_t shape;
    int cap;      /* the most observations (looks at n = every, 2 every, ... <= cap) */
    int every;    /* a look after every `every` observations */
    double alpha; /* the chance asked for: the median outside the interval at some look */
    double c;     /* the scale of the shape */
    double rho;   /* CONFSEQ_MIXTURE's rho */
    double exit;  /* the exact chance that the walk leaves the band at a look, <= alpha */
} confseq_t;

/* The smallest c (to 1e-9) whose exit probability is at most alpha, for looks
 * every `every` observations up to cap.  0, or -1 on bad arguments or no memory. */
int confseq_calibrate(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha);

/* A boundary of the given shape and scale, not calibrated (the closed forms:
 * c = 1); its exact exit probability in cs->exit. */
int confseq_fixed(confseq_t *cs, confseq_shape_t shape, int cap, int every, double alpha,
                  double c);

/* The interval's 1-based order statistics at n; lo < 1: no lower end, hi > n: no upper end. */
void confseq_ranks(const confseq_t *cs, int n, int *lo, int *hi);

/* The exact probability that a fair coin's count leaves the band
 * [ceil(n/2 - u_n), floor(n/2 + u_n)] at some look n <= cap (NAN: no memory). */
double confseq_exit(const confseq_t *cs);

/* The interval at n observations d[0..n): [*lo, *hi], -INFINITY / INFINITY
 * where the band reaches past the data (guaranteed at the looks only).
 * Returns 0, or -1 when n is out of 1..cap or memory runs out. */
int confseq_interval(const confseq_t *cs, const double *d, int n, double *lo, double *hi);

// ---------------------------------------------------------------------------
// the paired rounds

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
static inline bool paired_base_first(int round)
{
    return round % 2 == 0;
}

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
