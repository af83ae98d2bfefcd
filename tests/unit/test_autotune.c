/* tests/unit/test_autotune.c: --bucket-mb auto.  The candidates skip caps that
 * give the same buckets and fit the warm-up; every rank picks the same cap
 * (the run would deadlock or drift otherwise), the choice is one of those
 * tried, and training still matches single mode. */
#include "ddp/autotune.h"
#include "testutil.h"

Test(autotune, candidates_fit_the_warmup_and_differ)
{
    /* mlp-small: 0.25 and 1 MiB give the same 3 buckets, 4 MiB and more 2 */
    int dims[] = {64, 512, 512, 10};
    model_spec_t spec;
    cr_assert_eq(model_spec_init(&spec, dims, 4, ACT_GELU, NULL), DDP_OK);
    autotune_t t;
    autotune_init(&t, &spec, 1.0, 0, 8);
    cr_assert_eq(t.n, 2, "%d candidates", t.n);
    cr_assert_float_eq(t.mb[0], 0.25, 1e-12);
    cr_assert_float_eq(t.mb[1], 4.0, 1e-12);
    cr_assert_eq(t.first, 1, "the first warm-up step is not a trial");
    cr_assert_float_eq(autotune_before(&t, 0), 0.0, 0);
    cr_assert_float_eq(autotune_before(&t, 1), 0.25, 0);
    cr_assert_float_eq(autotune_before(&t, 2), 4.0, 0);
    cr_assert_float_eq(autotune_before(&t, 3), 0.0, 0);
    cr_assert(!autotune_due(&t, 1) && autotune_due(&t, 2));
    /* two warm-up steps leave room for one trial: nothing to choose */
    autotune_init(&t, &spec, 1.0, 0, 2);
    cr_assert_eq(t.n, 0);
    /* after --resume the trials start after the resumed step */
    autotune_init(&t, &spec, 1.0, 40, 8);
    cr_assert_eq(t.first, 41);
}

Test(autotune, ranks_agree_and_training_matches_single, .timeout = 60)
{
    const char *common = "--layers 32,256,256,256,4 --loss mse --optim sgd --lr 0.05 --samples 240 "
                         "--batch 24 --steps 14 "
                         "--warmup-steps 8 --backend cpu --quiet --first-bucket-mb 0.001";
    char line[512], err[ERR_LEN];
    run_result_t ddp, single;
    snprintf(line, sizeof line, "%s --mode ddp --gpus 0,1,2 --bucket-mb auto", common);
    /* ranks that disagreed would deadlock, or drift apart */
    cr_assert_eq(tu_run(line, &ddp, err), DDP_OK, "%s", err);
    cr_assert_geq(ddp.ntuned, 2, "%d caps tried", ddp.ntuned);
    bool tried = false;
    for (int i = 0; i < ddp.ntuned; i++) {
        tried |= ddp.tuned_mb[i] == ddp.bucket_mb_chosen;
        cr_assert_gt(ddp.tuned_s[i], 0.0);
    }
    cr_assert(tried, "chose %g MiB, which was not tried", ddp.bucket_mb_chosen);
    snprintf(line, sizeof line, "%s --mode single", common);
    cr_assert_eq(tu_run(line, &single, err), DDP_OK, "%s", err);
    tu_assert_params_close(&single, &ddp, 1e-5, "ddp with --bucket-mb auto vs single");
    result_free(&ddp);
    result_free(&single);
}
