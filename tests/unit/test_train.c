/* tests/unit/test_train.c: single-device training end to end: the seed demos
 * learn, results are reproducible, accumulation equals a bigger batch. */
#include "testutil.h"

Test(train, seed_logreg_separates_its_data)
{
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--model seed-logreg --backend cpu --quiet", &r, err), DDP_OK, "%s", err);
    cr_assert_eq(r.steps, 100, "10 epochs of 10 batches");
    cr_assert(r.train_accuracy > 0.90, "training accuracy %.3f", r.train_accuracy);
    result_free(&r);
}

Test(train, regression_loss_falls_tenfold)
{
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--layers 16,64,4 --act tanh --loss mse --optim adam --lr 0.01 "
                        "--samples 1024 --batch 64 --epochs 30 --noise 0.01 --backend cpu "
                        "--quiet",
                        &r, err),
                 DDP_OK, "%s", err);
    cr_assert_geq(r.log.n, 2);
    double first = r.log.pt[0].loss, last = r.log.pt[r.log.n - 1].loss;
    cr_assert(last * 10.0 < first, "loss %.5f after epoch 1, %.5f at the end", first, last);
    result_free(&r);
}

Test(train, classes_learn_with_cross_entropy)
{
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--model mlp-small --samples 4096 --epochs 3 --backend cpu --quiet", &r,
                        err),
                 DDP_OK, "%s", err);
    cr_assert(r.train_accuracy > 0.80, "accuracy %.3f", r.train_accuracy);
    result_free(&r);
}

Test(train, same_seed_same_bits_other_seed_other_bits)
{
    char err[ERR_LEN];
    run_result_t a, b, c;
    const char *args = "--model seed-linear --epochs 2 --backend cpu --quiet";
    cr_assert_eq(tu_run(args, &a, err), DDP_OK, "%s", err);
    cr_assert_eq(tu_run(args, &b, err), DDP_OK, "%s", err);
    cr_assert_eq(a.checksum.bits, b.checksum.bits);
    cr_assert_eq(tu_run("--model seed-linear --epochs 2 --backend cpu --quiet --seed 1", &c, err),
                 DDP_OK, "%s", err);
    cr_assert_neq(a.checksum.bits, c.checksum.bits);
    result_free(&a);
    result_free(&b);
    result_free(&c);
}

Test(train, accumulation_equals_the_bigger_batch)
{
    char err[ERR_LEN];
    run_result_t a, b;
    const char *common = "--layers 8,16,3 --loss ce --optim sgd --lr 0.1 --momentum 0.9 "
                         "--samples 120 --steps 20 --backend cpu --quiet";
    char one[512], two[512];
    snprintf(one, sizeof one, "%s --batch 24", common);
    snprintf(two, sizeof two, "%s --batch 12 --accum 2", common);
    cr_assert_eq(tu_run(one, &a, err), DDP_OK, "%s", err);
    cr_assert_eq(tu_run(two, &b, err), DDP_OK, "%s", err);
    tu_assert_params_close(&a, &b, 1e-5, "accum 2 x 12 vs batch 24");
    cr_assert(fabs(a.final_loss - b.final_loss) < 1e-5 * fabs(a.final_loss));
    result_free(&a);
    result_free(&b);
}

Test(train, steps_and_warmup_are_accounted)
{
    char err[ERR_LEN];
    run_result_t r;
    cr_assert_eq(tu_run("--model seed-linear --steps 7 --warmup-steps 3 --backend cpu --quiet",
                        &r, err),
                 DDP_OK, "%s", err);
    cr_assert_eq(r.steps, 7);
    cr_assert_eq(r.times.n, 4);
    cr_assert_eq(r.times.timed_samples, 4 * 20);
    cr_assert(r.samples_per_s > 0.0);
    result_free(&r);
}
