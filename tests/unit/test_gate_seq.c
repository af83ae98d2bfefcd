/* tests/unit/test_gate_seq.c: the A/B gate's error rates, proved by
 * simulation with fixed seeds (the same numbers on every run).
 *
 * The gate's own rule (gate/paired.h: the calibrated interval, a look
 * after every ABBA pair, a lopsided round retaken while retakes are left,
 * paired_look's verdict, stopping at the first look that decides or at the
 * cap) is run on simulated child runs: each run's log figure is the side's
 * level, a drift in time (a linear trend and a slow wave: what ABBA order
 * is for), heavy-tailed noise, and disturbances (one side slowed, flagged
 * as disturbed or not; both sides slowed).  10,000 sequences a noise:
 *   - unchanged builds: "regressed" at most 1% of them, whatever round the
 *     gate stops at;
 *   - a planted 10% slowdown: "regressed" in at least 95% within the cap.
 * And the rule the gate had before (10 ABBA rounds, the sign-test interval
 * [d(2), d(9)] at 97.9%, extended once up to 3 x 10 rounds when it
 * straddles) is shown to exceed its own stated error when its second look
 * is counted, where the new rule keeps to its own. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gate/paired.h"
#include "tu_rand.h"

#define CAP 40     /* the gate's default most rounds (gate/options.h: GATE_AB_ROUNDS) */
#define TOL 0.05
#define SEQS 10000

static uint64_t rng;
/* Student's t with 3 degrees of freedom: tails like x^-4 (a mean is barely
 * finite, a variance not) */
static double student3(void)
{
    double z = tu_gauss(&rng), c = 0;
    for (int i = 0; i < 3; i++) {
        double g = tu_gauss(&rng);
        c += g * g;
    }
    return z / sqrt(c / 3);
}

/* A machine as the simulation sees it. */
typedef struct {
    const char *name;
    int noise;         /* 0 Gaussian, 1 Student t3, 2 contaminated: 90% sigma, 10% 5 x sigma */
    double sigma;      /* the scale of a run's log figure */
    double slope;      /* drift: log figure per run */
    double wave;       /* drift: a slow wave's amplitude (period ~60 runs) */
    double p_one;      /* a run of the candidate disturbed (slowed 5..50%) */
    double p_flagged;  /* ... and flagged as disturbed (else unseen) */
    double p_both;     /* a round disturbed on both sides (each slowed 0..30%, flagged) */
} machine_t;

static const machine_t machines[] = {
    {"Gaussian, drifting", 0, 0.03, 0.002, 0.02, 0, 0, 0},
    {"Student t3, drifting", 1, 0.025, 0.001, 0.03, 0, 0, 0},
    {"contaminated, drifting, one side disturbed", 2, 0.02, 0.001, 0.02, 0.2, 0.75, 0.1},
    {"t3, one side disturbed and unseen", 1, 0.02, 0.0, 0.02, 0.1, 0.0, 0.05},
};
#define NMACHINES ((int)(sizeof machines / sizeof machines[0]))

static double noise(const machine_t *m)
{
    switch (m->noise) {
    case 1:
        return m->sigma * student3();
    case 2:
        return (tu_unif(&rng) < 0.9 ? m->sigma : 5 * m->sigma) * tu_gauss(&rng);
    default:
        return m->sigma * tu_gauss(&rng);
    }
}

/* One gate on machine m with the candidate slower by `change` (a log):
 * its verdict, and the rounds it used in *rounds. */
static paired_verdict_t one_gate(const confseq_t *cs, const machine_t *m, double change,
                                 int *rounds)
{
    paired_round_t r[CAP];
    int n = 0, t = 0, retakes = PAIRED_RETAKES(cs->cap);
    double phase = 6.283185307179586 * tu_unif(&rng);
    for (int round = 0; round < cs->cap;) {
        bool base_first = paired_base_first(round);
        double x[2];
        bool dist[2] = {false, false};
        bool both = tu_unif(&rng) < m->p_both;
        for (int k = 0; k < 2; k++, t++) {
            int side = (k == 0) == base_first ? 0 : 1;
            x[side] = (side ? change : 0) + m->slope * t + m->wave * sin(phase + 0.1 * t) +
                      noise(m);
            if (side == 1 && tu_unif(&rng) < m->p_one) {
                x[side] += log(1.05) + (log(1.5) - log(1.05)) * tu_unif(&rng);
                dist[side] = tu_unif(&rng) < m->p_flagged;
            }
            if (both) {
                x[side] += log(1.3) * tu_unif(&rng);
                dist[side] = true;
            }
        }
        paired_round_t pr = {.d = x[1] - x[0], .d_wall = x[1] - x[0],
                             .lopsided = dist[0] != dist[1], .both = dist[0] && dist[1]};
        if (pr.lopsided && retakes > 0) { /* the gate retakes it */
            retakes--;
            continue;
        }
        r[n++] = pr;
        round++;
        if (round % cs->every)
            continue;
        paired_look_t lk;
        paired_look(cs, r, n, false, TOL, &lk);
        if (lk.verdict != PAIRED_NO_VERDICT) {
            *rounds = n;
            return lk.verdict;
        }
    }
    *rounds = n;
    return PAIRED_NO_VERDICT;
}

typedef struct {
    int count[4];   /* by verdict */
    double rounds;  /* mean rounds used */
    int most;       /* the most rounds used */
} tally_t;

static tally_t run_gates(const machine_t *m, double change, uint64_t seed)
{
    confseq_t cs;
    cr_assert_eq(confseq_calibrate(&cs, PAIRED_SHAPE, CAP, PAIRED_EVERY, PAIRED_ALPHA), 0);
    rng = seed;
    tally_t t = {{0}, 0, 0};
    for (int i = 0; i < SEQS; i++) {
        int used;
        t.count[one_gate(&cs, m, change, &used)]++;
        t.rounds += used;
        if (used > t.most)
            t.most = used;
    }
    t.rounds /= SEQS;
    return t;
}

static void say(const char *what, const machine_t *m, const tally_t *t)
{
    cr_log_info("%s, %s: no change %d, improved %d, regressed %d, no verdict %d of %d; rounds "
                "mean %.1f, most %d", what, m->name, t->count[PAIRED_NO_CHANGE],
                t->count[PAIRED_IMPROVED], t->count[PAIRED_REGRESSED],
                t->count[PAIRED_NO_VERDICT], SEQS, t->rounds, t->most);
}

/* Unchanged builds: a false "regressed" in at most 1% of the sequences,
 * whatever round each stopped at. */
Test(gate_seq, unchanged_regressed_at_most_1pct)
{
    for (int i = 0; i < NMACHINES; i++) {
        tally_t t = run_gates(&machines[i], 0.0, 1000 + (uint64_t)i);
        say("unchanged", &machines[i], &t);
        cr_assert(t.count[PAIRED_REGRESSED] <= SEQS / 100, "%s: regressed %d of %d",
                  machines[i].name, t.count[PAIRED_REGRESSED], SEQS);
        cr_assert(t.count[PAIRED_IMPROVED] <= SEQS / 100, "%s: improved %d of %d",
                  machines[i].name, t.count[PAIRED_IMPROVED], SEQS);
    }
}

/* A planted 10% slowdown: found in at least 95% within the cap. */
Test(gate_seq, planted_10pct_found_in_95pct)
{
    for (int i = 0; i < NMACHINES; i++) {
        tally_t t = run_gates(&machines[i], log(1.10), 2000 + (uint64_t)i);
        say("10% slower", &machines[i], &t);
        cr_assert(t.count[PAIRED_REGRESSED] >= SEQS * 95 / 100, "%s: regressed %d of %d",
                  machines[i].name, t.count[PAIRED_REGRESSED], SEQS);
        cr_assert(t.count[PAIRED_NO_CHANGE] == 0, "%s: no change %d", machines[i].name,
                  t.count[PAIRED_NO_CHANGE]);
    }
}

// ---------------------------------------------------------------------------
// the rule before: 10 rounds, then at most one extension

/* P(B <= k), B ~ Binomial(n, 1/2) */
static double sign_cdf(int n, int k)
{
    double c = 0.0;
    for (int i = 0; i <= k && i <= n; i++)
        c += exp(lgamma(n + 1.0) - lgamma(i + 1.0) - lgamma(n - i + 1.0) - n * log(2.0));
    return c;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Its interval: the median of d[0..n) with the sign test inverted at 95%,
 * [d(c), d(n+1-c)], c the largest with P(B <= c-1) <= 2.5% */
static paired_est_t old_interval(const double *d, int n)
{
    static double cut_conf[31][2]; /* by n: c, and the confidence */
    if (cut_conf[n][0] == 0) {
        int c = 0;
        while (c + 1 <= n / 2 && sign_cdf(n, c) <= 0.025)
            c++;
        cut_conf[n][0] = c;
        cut_conf[n][1] = c ? 1.0 - 2.0 * sign_cdf(n, c - 1) : 0.0;
    }
    double s[30];
    memcpy(s, d, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    paired_est_t e = {.n = n};
    int c = (int)cut_conf[n][0];
    e.estimate = n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
    e.lo = c ? s[c - 1] : NAN;
    e.hi = c ? s[n - c] : NAN;
    e.conf = cut_conf[n][1];
    return e;
}

/* Its extension: the rounds in all that would settle a straddle at the
 * measured noise (the half-width shrinking as 1/sqrt(n)); -1 none would */
static int old_settle(const paired_est_t *e)
{
    double up = log1p(TOL), down = log1p(-TOL), x = e->estimate;
    bool su = e->lo <= up && e->hi > up, sd = e->lo < down && e->hi >= down;
    double bound = su && (!sd || fabs(x - up) <= fabs(x - down)) ? up : down;
    double side = x > bound ? x - e->lo : e->hi - x, dist = fabs(x - bound);
    if (dist <= 0 || side <= 0)
        return -1;
    double need = e->n * (side / dist) * (side / dist);
    if (need > 1000)
        return -1;
    int r = (int)ceil(need);
    return r > e->n ? r : e->n + 1;
}

/* The true change sits on the tolerance (+5%: not a regression beyond it),
 * the noise Gaussian.  Its stated error: the chance that the median lies
 * outside the interval it reports is 1 - its confidence (2.1% at 10
 * rounds), and a "regressed" (the interval's low end above the truth) is
 * half of the 10-round figure, P(B <= 1) = 11/1024 = 1.07%.  With the
 * second look counted, 200,000 sequences miss 2.8% and say regressed 1.37%
 * (5 standard errors above what the test asks, 15% over the stated).  The
 * new rule on the same sequences stays within its own: at most its exact
 * exit probability (4.7%) missed at the stop, at most half of it
 * regressed. */
Test(gate_seq, the_old_rule_exceeds_its_stated_error_the_new_does_not)
{
    const int N = 200000;
    double m = log1p(TOL), sigma = 0.03;
    rng = 777;
    long miss = 0, regressed = 0;
    double stated_miss = 0.0;
    for (int i = 0; i < N; i++) {
        double d[30];
        for (int k = 0; k < 30; k++)
            d[k] = m + sigma * tu_gauss(&rng);
        paired_est_t e = old_interval(d, 10);
        if (paired_judge(&e, TOL) == PAIRED_NO_VERDICT) {
            int want = old_settle(&e);
            if (want > 10 && want <= 30)
                e = old_interval(d, want);
        }
        miss += m < e.lo || m > e.hi;
        regressed += paired_judge(&e, TOL) == PAIRED_REGRESSED;
        stated_miss += 1.0 - e.conf;
    }
    stated_miss /= N;
    double stated_regressed = sign_cdf(10, 1);
    cr_log_info("old rule at the bound: missed %.4f (stated %.4f), regressed %.4f (stated %.4f)",
                (double)miss / N, stated_miss, (double)regressed / N, stated_regressed);
    cr_assert((double)miss / N > 1.15 * stated_miss, "missed %.4f, stated %.4f",
              (double)miss / N, stated_miss);
    cr_assert((double)regressed / N > 1.15 * stated_regressed, "regressed %.4f, stated %.4f",
              (double)regressed / N, stated_regressed);

    /* the new rule, the same truth and noise: its stated error is its exact
     * exit probability, at whatever look it stops */
    confseq_t cs;
    confseq_calibrate(&cs, PAIRED_SHAPE, CAP, PAIRED_EVERY, PAIRED_ALPHA);
    const int M = 40000;
    rng = 778;
    long nmiss = 0, nreg = 0;
    for (int i = 0; i < M; i++) {
        double d[CAP];
        for (int k = 0; k < CAP; k++)
            d[k] = m + sigma * tu_gauss(&rng);
        paired_est_t e;
        for (int n = PAIRED_EVERY; n <= CAP; n += PAIRED_EVERY) {
            paired_estimate_seq(&cs, d, n, &e);
            if (paired_judge(&e, TOL) != PAIRED_NO_VERDICT)
                break;
        }
        nmiss += m < e.lo || m > e.hi;
        nreg += paired_judge(&e, TOL) == PAIRED_REGRESSED;
    }
    double se = sqrt(cs.exit / M);
    cr_log_info("new rule at the bound: missed %.4f, regressed %.4f (stated: at most %.4f, and "
                "half of it)", (double)nmiss / M, (double)nreg / M, cs.exit);
    cr_assert((double)nmiss / M <= cs.exit + 3 * se, "missed %.4f, exit %.4f", (double)nmiss / M,
              cs.exit);
    cr_assert((double)nreg / M <= cs.exit / 2 + 3 * se, "regressed %.4f, exit/2 %.4f",
              (double)nreg / M, cs.exit / 2);
}
