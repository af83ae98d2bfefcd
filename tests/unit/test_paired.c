/* tests/unit/test_paired.c: the A/B gate's statistics on planted data with a
 * known answer: Wilcoxon's signed-rank distribution (against brute-force
 * enumeration) and the sign test's, the median's and Hodges-Lehmann's
 * intervals (worked by hand), the four verdicts on planted ratios, one
 * disturbed round that must not move the verdict, the rounds that would settle a straddle, and ABBA order. */
#include <criterion/criterion.h>
#include <math.h>

#include "common/measure/paired.h"

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
    cr_assert_float_eq(e.median, 0.2, 1e-12);
}

Test(paired, too_few_rounds_have_no_interval)
{
    double d[] = {0.1, 0.2, 0.3, 0.4, 0.5};
    paired_est_t e;
    cr_assert_eq(paired_estimate_hl(d, 5, 0.05, &e), 0);
    cr_assert(isnan(e.lo) && isnan(e.hi), "5 pairs cannot give a 95%% interval");
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);
    cr_assert_eq(paired_rounds_to_settle(&e, 0.05), PAIRED_MIN_ROUNDS);
    cr_assert_eq(paired_estimate_hl(d, 0, 0.05, &e), -1);
}

/* n log-ratios: ln(ratio) plus a fixed, symmetric +-noise pattern */
static void planted(double *d, int n, double ratio, double noise)
{
    static const double pat[] = {0.3, -0.8, 1.0, -0.1, 0.6, -1.0, 0.0, 0.8, -0.3, -0.6, 0.1, 0.5};
    for (int i = 0; i < n; i++)
        d[i] = log(ratio) + noise * pat[i % 12];
}

Test(paired, sign_test_distribution)
{
    cr_assert_float_eq(paired_sign_cdf(10, 1), 11.0 / 1024, 1e-12);
    cr_assert_float_eq(paired_sign_cdf(10, 2), 56.0 / 1024, 1e-12);
    cr_assert_float_eq(paired_sign_cdf(6, 0), 1.0 / 64, 1e-12);
    cr_assert_float_eq(paired_sign_cdf(1000, 500), 0.5 + 0.5 * 0.025225, 1e-5);
}

Test(paired, median_and_its_interval_by_hand)
{
    /* sorted: -0.2 -0.1 0.05 0.1 0.15 | 0.25 0.3 0.4 0.5 0.6; median 0.2;
     * P(B <= 1) = 11/1024 <= 0.025 < P(B <= 2): c = 2, [d(2), d(9)] */
    double d[] = {0.1, 0.3, -0.2, 0.5, 0.05, 0.4, 0.25, -0.1, 0.15, 0.6};
    paired_est_t e;
    cr_assert_eq(paired_estimate_median(d, 10, 0.05, &e), 0);
    cr_assert_float_eq(e.estimate, 0.2, 1e-12);
    cr_assert_float_eq(e.lo, -0.1, 1e-12);
    cr_assert_float_eq(e.hi, 0.5, 1e-12);
    cr_assert_float_eq(e.conf, 1.0 - 2 * 11.0 / 1024, 1e-12);
    cr_assert_eq(paired_estimate_median(d, 5, 0.05, &e), 0);
    cr_assert(isnan(e.lo), "5 pairs cannot give a 95%% interval");
}

/* The gate's figure on planted ratios: each verdict, and the rounds that
 * would settle the straddle. */
Test(paired, four_verdicts_on_planted_ratios)
{
    double d[12];
    paired_est_t e;
    planted(d, 12, 1.10, 0.01); /* a 10% slowdown, +-1% noise */
    paired_estimate_median(d, 12, 0.05, &e);
    cr_assert_float_eq(exp(e.estimate), 1.10, 0.005);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_REGRESSED);
    cr_assert_eq(paired_rounds_to_settle(&e, 0.05), 0);

    planted(d, 12, 1.00, 0.01); /* unchanged */
    paired_estimate_median(d, 12, 0.05, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);

    planted(d, 12, 0.85, 0.01); /* 15% faster */
    paired_estimate_median(d, 12, 0.05, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_IMPROVED);

    planted(d, 12, 1.06, 0.04); /* 6% slower, too noisy to say so at 5% */
    paired_estimate_median(d, 12, 0.05, &e);
    cr_assert(e.lo < log(1.05) && e.hi > log(1.05));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);
    int more = paired_rounds_to_settle(&e, 0.05);
    cr_assert(more > 12, "a straddle needs more rounds, got %d", more);
    /* the half-width at 'more' rounds, scaled as 1/sqrt(n), clears the bound */
    double side = e.estimate - e.lo;
    cr_assert(side * sqrt(12.0 / more) <= e.estimate - log(1.05) + 1e-12);
    cr_assert(side * sqrt(12.0 / (more - 1)) > e.estimate - log(1.05));
}

/* The same verdicts from Hodges-Lehmann and the signed-rank interval. */
Test(paired, hodges_lehmann_verdicts)
{
    double d[12];
    paired_est_t e;
    planted(d, 12, 1.10, 0.01);
    paired_estimate_hl(d, 12, 0.05, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_REGRESSED);
    planted(d, 12, 1.00, 0.01);
    paired_estimate_hl(d, 12, 0.05, &e);
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);
}

/* A round whose one side ran on a busy core (5x slower, throughout): the
 * median's interval drops it (no change); Hodges-Lehmann's estimate barely
 * moves but 10 of its 55 Walsh averages carry the outlier and its interval
 * cuts only 9 from each end, so it can no longer say "no change" -- why the
 * gate uses the median.  (A mean of the ratios would call this a 40%
 * regression.) */
Test(paired, one_disturbed_round_does_not_move_the_verdict)
{
    double d[10];
    planted(d, 10, 1.00, 0.01);
    d[3] = log(5.0);
    paired_est_t e;
    paired_estimate_median(d, 10, 0.05, &e);
    cr_assert(fabs(exp(e.estimate) - 1.0) < 0.01, "estimate %g", exp(e.estimate));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_CHANGE);
    paired_estimate_hl(d, 10, 0.05, &e);
    cr_assert(fabs(exp(e.estimate) - 1.0) < 0.01, "estimate %g", exp(e.estimate));
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);
}

Test(paired, a_change_on_the_bound_cannot_be_settled)
{
    double d[10];
    planted(d, 10, 1.05, 0.03);
    paired_est_t e;
    paired_estimate_median(d, 10, 0.05, &e);
    e.estimate = log(1.05); /* exactly on it */
    cr_assert_eq(paired_judge(&e, 0.05), PAIRED_NO_VERDICT);
    cr_assert_eq(paired_rounds_to_settle(&e, 0.05), -1);
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
