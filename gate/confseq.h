/* gate/confseq.h: a confidence sequence for the median, an interval valid at
 * every look (Howard and Ramdas, Bernoulli 28(3), 2022): the band
 * |S_n - n/2| <= u_n = c g(n) on the count of d_i <= m, c calibrated exactly
 * for the cap by dynamic programming; the interval is
 * [d_(ceil(n/2 - u_n)), d_(floor(n/2 + u_n) + 1)].  docs/gate.md explains it. */
#ifndef DDPBENCH_CONFSEQ_H
#define DDPBENCH_CONFSEQ_H

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

#endif
