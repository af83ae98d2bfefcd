/* tests/unit/test_paired.c: the A/B gate's statistics on planted data with a
 * known answer: the confidence sequence's order statistics (by hand), its
 * exact exit probability (against every path of the walk, enumerated), its
 * coverage (against simulation, for two noises), its calibration (the
 * smallest scale that holds) and its width against the closed forms;
 * Wilcoxon's signed-rank distribution (against enumeration) and
 * Hodges-Lehmann's interval (by hand); the four verdicts on planted ratios,
 * one disturbed round that must not move the verdict, the gate's rule at a
 * look (the wall judged, a busy machine explained), and ABBA order. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

#include "gate/paired.h"
#include "tu_rand.h"

Test(paired, signed_rank_distribution_matches_enumeration)
{
    /* P(T <= t) counted over all 2^n sign patterns (python, itertools) */
    cr_assert_float_eq(paired_signed_rank_cdf(10, 8), 25.0 / 1024, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(10, 9), 33.0 / 1024, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(6, 0), 1.0 / 64, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(12, 13), 87.0 / 4096, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(12, 14), 107.0 / 4096, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(7, 28), 1.0, 1e-12);
    cr_assert_float_eq(paired_signed_rank_cdf(7, -1), 0.0, 1e-12);
}

Test(paired, hodges_lehmann_and_its_interval_by_hand)
{
    /* 10 pairs: 55 Walsh averages, the 28th is 0.2; at 95% the signed-rank
     * table cuts c = 9 from each end (P(T <= 8) = 0.0244), so the interval is
     * [W(9), W(47)] = [0.025, 0.4], of confidence 1 - 2 x 0.0244 */
    double d[] = {0.1, 0.3, -0.2, 0.5, 0.05, 0.4, 0.25, -0.1, 0.15, 0.6};
    paired_est_t e;
    cr_assert_eq(paired_estimate_hl(d, 10, 0.05, &e), 0);
    cr_assert_float_eq(e.estimate, 0.2, 1e-12);
    cr_assert_float_eq(e.lo, 0.025, 1e-12);
    cr_assert_float_eq(e.hi, 0.4, 1e-12);
    cr_assert_float_eq(e.conf, 1.0 - 2 * 25.0 / 1024, 1e-12);
    cr_assert_float_eq(paired_median(d, 10), 0.2, 1e-12);
    cr_assert(!e.uniform, "a fixed-sample interval");
    double five[] = {0.1, 0.2, 0.3, 0.4, 0.5};
    cr_assert_eq(paired_estimate_hl(five, 5, 0.05, &e), 0);
    cr_assert(isnan(e.lo) && isnan(e.hi), "5 pairs cannot give a 95%% signed-rank interval");
    cr_assert_eq(paired_estimate_hl(five, 0, 0.05, &e), -1);
}

// ---------------------------------------------------------------------------
// the confidence sequence

/* The order statistics of the interval, worked by hand for u_n = sqrt(n)
 * (c = 1): n = 16, u = 4: [d(ceil(8 - 4)), d(floor(8 + 4) + 1)] = [d(4),
 * d(13)]; n = 10, u = 3.162: [d(ceil(1.838)), d(floor(8.162) + 1)] = [d(2),
 * d(9)]; n = 4, u = 2: ranks 0 and 5, no end on either side. */
Test(confseq, the_interval_is_these_order_statistics)
{
    confseq_t cs;
    cr_assert_eq(confseq_fixed(&cs, CONFSEQ_SQRT, 40, 1, 0.05, 1.0), 0);
    int lo, hi;
    confseq_ranks(&cs, 16, &lo, &hi);
    cr_assert(lo == 4 && hi == 13, "n 16: ranks %d, %d", lo, hi);
    confseq_ranks(&cs, 10, &lo, &hi);
    cr_assert(lo == 2 && hi == 9, "n 10: ranks %d, %d", lo, hi);
    /* the data in a shuffled order: d(k) = k / 100 */
    double d[16];
    for (int i = 0; i < 16; i++)
        d[i] = ((i * 7) % 16 + 1) / 100.0;
    double a, b;
    cr_assert_eq(confseq_interval(&cs, d, 16, &a, &b), 0);
    cr_assert_float_eq(a, 0.04, 1e-12);
    cr_assert_float_eq(b, 0.13, 1e-12);
    cr_assert_eq(confseq_interval(&cs, d, 4, &a, &b), 0);
    cr_assert(isinf(a) && a < 0 && isinf(b) && b > 0, "n 4: %g..%g", a, b);
    cr_assert_eq(confseq_interval(&cs, d, 41, &a, &b), -1, "past the cap");
}

/* The dynamic program's exit probability equals the share of the 2^n coin
 * paths that leave the band at a look, counted one by one. */
static double exit_by_enumeration(const confseq_t *cs)
{
    long out = 0, all = 1L << cs->cap;
    int lo[CONFSEQ_MAX + 1], hi[CONFSEQ_MAX + 1];
    for (int n = 1; n <= cs->cap; n++)
        confseq_ranks(cs, n, &lo[n], &hi[n]);
    for (long path = 0; path < all; path++) {
        int s = 0;
        for (int n = 1; n <= cs->cap; n++) {
            s += (path >> (n - 1)) & 1;
            if (n % cs->every)
                continue;
            if (s < lo[n] || s > hi[n] - 1) {
                out++;
                break;
            }
        }
    }
    return (double)out / (double)all;
}

Test(confseq, exit_probability_matches_every_path)
{
    confseq_t cs;
    for (int every = 1; every <= 2; every++) {
        cr_assert_eq(confseq_calibrate(&cs, CONFSEQ_SQRT, 16, every, 0.05), 0);
        cr_assert_float_eq(cs.exit, exit_by_enumeration(&cs), 1e-12, "every %d", every);
        cr_assert_eq(confseq_fixed(&cs, CONFSEQ_MIXTURE, 16, every, 0.05, 0.7), 0);
        cr_assert_float_eq(cs.exit, exit_by_enumeration(&cs), 1e-12, "every %d", every);
    }
}

/* The smallest scale: c holds (exit <= alpha), a hair less does not. */
Test(confseq, calibration_is_the_smallest_scale_that_holds)
{
    confseq_t cs, less;
    cr_assert_eq(confseq_calibrate(&cs, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA), 0);
    cr_assert(cs.exit <= PAIRED_ALPHA, "exit %g", cs.exit);
    cr_assert_eq(confseq_fixed(&less, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA, cs.c - 1e-8), 0);
    cr_assert(less.exit > PAIRED_ALPHA, "c - 1e-8 holds too: %g", less.exit);
    cr_assert_float_eq(cs.exit, confseq_exit(&cs), 0.0);
    /* the same calibration every time: no random numbers */
    confseq_t again;
    confseq_calibrate(&again, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    cr_assert(again.c == cs.c && again.exit == cs.exit);
}

/* The closed forms (Robbins' normal mixture, Howard et al.'s stitched
 * boundary, each at c = 1) hold too -- their exact exit probability is at
 * most alpha -- and the exact calibration is never wider than either at
 * n = 10, 20, 40 (the widths docs/gate.md quotes). */
Test(confseq, exact_calibration_beats_the_closed_forms)
{
    confseq_t cal, mix, st;
    confseq_calibrate(&cal, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    confseq_fixed(&mix, CONFSEQ_MIXTURE, 40, PAIRED_EVERY, PAIRED_ALPHA, 1.0);
    confseq_fixed(&st, CONFSEQ_STITCHED, 40, PAIRED_EVERY, PAIRED_ALPHA, 1.0);
    cr_assert(mix.exit <= PAIRED_ALPHA && st.exit <= PAIRED_ALPHA, "mixture %g, stitched %g",
              mix.exit, st.exit);
    const int ns[] = {10, 20, 40};
    /* ranks [lo, hi] at c = 1.2649 (cap 40, looks every 2, alpha 5%) */
    const int want_lo[] = {1, 5, 12}, want_hi[] = {10, 16, 29};
    for (int i = 0; i < 3; i++) {
        int a, b, ma, mb, sa, sb;
        confseq_ranks(&cal, ns[i], &a, &b);
        confseq_ranks(&mix, ns[i], &ma, &mb);
        confseq_ranks(&st, ns[i], &sa, &sb);
        cr_assert(a == want_lo[i] && b == want_hi[i], "n %d: [%d, %d]", ns[i], a, b);
        cr_assert(a >= ma && b <= mb && a >= sa && b <= sb, "n %d: calibrated [%d,%d], mixture "
                  "[%d,%d], stitched [%d,%d]", ns[i], a, b, ma, mb, sa, sb);
    }
    /* at n = 40 the closed forms are wider by ranks */
    int a, b, sa, sb;
    confseq_ranks(&cal, 40, &a, &b);
    confseq_ranks(&st, 40, &sa, &sb);
    cr_assert(a - sa >= 2, "stitched [%d, %d] against [%d, %d]", sa, sb, a, b);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;

/* The interval covers the true median at every look as often as the walk
 * says (1 - exit), whatever the noise: Gaussian and Cauchy, 20,000
 * sequences each; a wrong rank in the interval would move this by a lot. */
Test(confseq, coverage_at_every_look_is_the_walks)
{
    confseq_t cs;
    confseq_calibrate(&cs, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    const int N = 20000;
    for (int noise = 0; noise < 2; noise++) {
        rng = 12345 + noise;
        int missed = 0;
        for (int t = 0; t < N; t++) {
            double d[40], m = 0.7; /* the true median */
            for (int i = 0; i < 40; i++)
                d[i] = m + (noise ? tan(3.141592653589793 * (tu_unif(&rng) - 0.5)) : tu_gauss(&rng));
            for (int n = PAIRED_EVERY; n <= 40; n += PAIRED_EVERY) {
                double lo, hi;
                confseq_interval(&cs, d, n, &lo, &hi);
                if (m < lo || m > hi) {
                    missed++;
                    break;
                }
            }
        }
        double rate = (double)missed / N, se = sqrt(cs.exit * (1 - cs.exit) / N);
        cr_assert(fabs(rate - cs.exit) < 4 * se, "noise %d: missed at some look %.4f, the walk "
                  "says %.4f", noise, rate, cs.exit);
    }
}

// ---------------------------------------------------------------------------
// verdicts

/* n log-ratios: ln(ratio) plus a fixed, symmetric +-noise pattern */
static void planted(double *d, int n, double ratio, double noise)
{
    static const double pat[] = {0.3, -0.8, 1.0, -0.1, 0.6, -1.0, 0.0, 0.8, -0.3, -0.6, 0.1, 0.5};
    for (int i = 0; i < n; i++)
        d[i] = log(ratio) + noise * pat[i % 12];
}

Test(paired, four_verdicts_on_planted_ratios)
{
    confseq_t cs;
    confseq_calibrate(&cs, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    double d[24];
    paired_est_t e;
    planted(d, 12, 1.10, 0.01); /* a 10% slowdown, +-1% noise */
    cr_assert_eq(paired_estimate_seq(&cs, d, 12, &e), 0);
    cr_assert_float_eq(exp(e.estimate), 1.10, 0.005);
    cr_assert(e.uniform && e.conf == 1 - PAIRED_ALPHA);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_REGRESSED);

    planted(d, 12, 1.00, 0.01); /* unchanged */
    paired_estimate_seq(&cs, d, 12, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);

    planted(d, 12, 0.85, 0.01); /* 15% faster */
    paired_estimate_seq(&cs, d, 12, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_IMPROVED);

    planted(d, 24, 1.06, 0.04); /* 6% slower, too noisy to say so at 5% */
    paired_estimate_seq(&cs, d, 24, &e);
    cr_assert(e.lo < log(1.05) && e.hi > log(1.05));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);

    planted(d, 6, 1.00, 0.001); /* six rounds: the interval is still open */
    paired_estimate_seq(&cs, d, 6, &e);
    cr_assert(isinf(e.lo) && isinf(e.hi));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);
}

/* Rounds whose one side ran on a busy core (5x slower, throughout): the
 * median's interval drops them -- one in 12 rounds, two in 16 -- and still
 * says no change (a mean of the ratios would call one in 12 a 13%
 * regression).  Why the gate judges the median. */
Test(paired, disturbed_rounds_do_not_move_the_verdict)
{
    confseq_t cs;
    confseq_calibrate(&cs, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    double d[16];
    planted(d, 16, 1.00, 0.01);
    d[3] = log(5.0);
    paired_est_t e;
    paired_estimate_seq(&cs, d, 12, &e);
    cr_assert(fabs(exp(e.estimate) - 1.0) < 0.01, "estimate %g", exp(e.estimate));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);
    d[13] = log(5.0);
    paired_estimate_seq(&cs, d, 16, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);
}

/* The rule at a look: the wall judged when no round was disturbed; a change
 * only the lopsided rounds show made no verdict (explained). */
Test(paired, the_gates_rule_at_a_look)
{
    confseq_t cs;
    confseq_calibrate(&cs, PAIRED_SHAPE, 40, PAIRED_EVERY, PAIRED_ALPHA);
    paired_round_t r[16];
    double d[16];
    planted(d, 16, 1.00, 0.01);
    for (int i = 0; i < 16; i++)
        r[i] = (paired_round_t){.d = d[i], .d_wall = d[i] + log(1.2)};
    paired_look_t lk;
    /* the work unchanged, the wall 20% slower, nothing disturbed: regressed by the wall */
    cr_assert_eq(paired_look(&cs, r, 16, true, 0.05, &lk), 0);
    cr_assert(lk.verdict == PAIRED_REGRESSED && lk.wall_judged);
    /* ... judged by the wall itself (not by_work): regressed, not "by the wall" */
    paired_look(&cs, r, 16, false, 0.05, &lk);
    cr_assert(lk.verdict == PAIRED_NO_CHANGE && !lk.wall_judged);
    /* one round disturbed on both sides: the wall is not judged */
    r[5].both = true;
    paired_look(&cs, r, 16, true, 0.05, &lk);
    cr_assert(lk.verdict == PAIRED_NO_CHANGE && !lk.wall_judged && lk.both == 1);
    r[5].both = false;
    /* 10% slower only in the lopsided rounds (10 of 16): explained */
    for (int i = 0; i < 16; i++) {
        r[i].d_wall = r[i].d;
        if (i < 14) {
            r[i].d += log(1.10);
            r[i].lopsided = true;
        }
    }
    paired_look(&cs, r, 16, false, 0.05, &lk);
    cr_assert(lk.verdict == PAIRED_NO_VERDICT && lk.explained && lk.lopsided == 14, "verdict %d",
              lk.verdict);
}

Test(paired, abba_order)
{
    /* B C | C B | B C | C B */
    bool want[] = {true, false, true, false};
    for (int r = 0; r < 4; r++)
        cr_assert_eq(paired_base_first(r), want[r], "round %d", r);
}

Test(paired, median)
{
    double v[] = {3, 1, 2, 10};
    cr_assert_float_eq(paired_median(v, 4), 2.5, 1e-12);
    cr_assert_float_eq(paired_median(v, 3), 2.0, 1e-12);
    cr_assert_float_eq(v[0], 3.0, 0.0, "left as it was");
    cr_assert(isnan(paired_median(v, 0)));
}
