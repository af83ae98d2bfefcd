/* bench/bench_floor.c: the seed-size step against its floor (the forward, MSE, backward
 * and SGD of a 10x10 layer on 20 rows, called straight on the CPU backend), in turns with
 * single mode's p50 step on the same job; goal: single within 2x (docs/benchmarks.md).
 *   bench_floor [ROUNDS]   (default 7) */
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"
#include "common/measure/timing.h"
#include "common/nn/optim.h"

#define JOB "--layers 10,10 --loss mse --optim sgd --batch 20 --backend cpu --threads 1"
#define FLOOR_STEPS 20000
#define BLOCK 100

/* The floor's step in seconds: the median over blocks of BLOCK steps. */
static double floor_step_s(const config_t *c, char *err)
{
    backend_t *be = NULL;
    model_spec_t spec;
    replica_t rep;
    optim_t opt;
    static double block[FLOOR_STEPS / BLOCK];
    if (backend_cpu_create(&be, 0, 1, err) != DDP_OK || config_model_spec(c, &spec, err) ||
        replica_init(&rep, be, &spec, 20, 10, err) || optim_init(&opt, be, &c->optim, spec.nparams, err))
        return -1.0;
    model_init_params(&spec, 1, rep.params);
    for (int i = 0; i < 20 * 10; i++) {
        rep.x[i] = (float)((i * 37) % 23) / 23.0f - 0.5f;
        rep.y[i] = (float)((i * 11) % 17) / 17.0f - 0.5f;
    }
    for (int b = 0; b < FLOOR_STEPS / BLOCK; b++) {
        double t = now_s();
        for (int s = 0; s < BLOCK; s++)
            if (model_forward(&rep, rep.x, 20) || model_loss(&rep, LOSS_MSE, rep.y, 20, 0.05f) ||
                model_backward(&rep, rep.x, 20, rep.dout, false, NULL, NULL) ||
                optim_step(&opt, rep.params, rep.grads))
                return -1.0;
        block[b] = (now_s() - t) / BLOCK;
    }
    optim_free(&opt);
    replica_free(&rep);
    backend_destroy(be);
    return paired_median(block, FLOOR_STEPS / BLOCK);
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 7;
    if (rounds < 1 || rounds > 64) {
        fprintf(stderr, "usage: bench_floor [ROUNDS (1..64)]\n");
        return 2;
    }
    char err[ERR_LEN] = "";
    config_t c;
    if (bench_config(&c, "--mode single " JOB, err) != DDP_OK) {
        fprintf(stderr, "bench_floor: %s\n", err);
        return 2;
    }
    backend_cpu_set_threads(1);
    double fl[64], p50[64], ratio[64];
    double load[2] = {0.0, 0.0};
    getloadavg(&load[0], 1);
    for (int r = 0; r < rounds; r++) {
        run_result_t res;
        if ((fl[r] = floor_step_s(&c, err)) <= 0.0) {
            fprintf(stderr, "bench_floor: %s\n", err);
            return 1;
        }
        bench_run("--mode single " JOB " --samples 2000 --steps 30000 --warmup-steps 3000 --quiet",
                  &res);
        p50[r] = step_times_quantile(&res.times, 50);
        ratio[r] = p50[r] / fl[r];
        result_free(&res);
        printf("  round %d: floor %.3f us, single p50 %.3f us, %.2fx\n", r + 1, 1e6 * fl[r],
               1e6 * p50[r], ratio[r]);
    }
    double rmin = ratio[0], rmax = ratio[0];
    for (int r = 1; r < rounds; r++)
        rmin = ratio[r] < rmin ? ratio[r] : rmin, rmax = ratio[r] > rmax ? ratio[r] : rmax;
    printf("seed-size step (10x10, 20 rows, MSE, SGD), %d rounds: floor %.3f us, single p50 %.3f us "
           "(medians); single / floor %.2fx [%.2f..%.2f]; load average %.2f -> %.2f\n",
           rounds, 1e6 * paired_median(fl, rounds), 1e6 * paired_median(p50, rounds),
           paired_median(ratio, rounds), rmin, rmax, load[0], (getloadavg(&load[1], 1), load[1]));
    bench_goal("single p50 / floor", paired_median(ratio, rounds), 2.0, 0);
    return 0;
}
