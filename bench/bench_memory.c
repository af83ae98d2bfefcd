/* bench/bench_memory.c: the memory story of mlp-medium, and ZeRO-1's (docs/benchmarks.md):
 * each device's peak split by purpose for DP, DDP and DDP --zero1 on 2 and 4 workers, and
 * ZeRO-1's parameters against DDP's.  usage: bench_memory [MODEL [STEPS]] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench/bench_util.h"

static void split_line(const char *who, const run_result_t *r, int d)
{
    printf("  %-18s %9.1f MiB =", who, r->dev[d].mem_peak / 1048576.0);
    for (int k = 0; k < MEM_KINDS; k++)
        if (r->dev[d].mem_split[k] > 0)
            printf("  %s %.1f", mem_kind_name((mem_kind_t)k), r->dev[d].mem_split[k] / 1048576.0);
    printf("\n");
}

int main(int argc, char **argv)
{
    const char *model = argc > 1 ? argv[1] : "mlp-medium";
    int steps = argc > 2 ? atoi(argv[2]) : 3;
    static const char *gpus[] = {"0", "0,1", "0,1,2", "0,1,2,3"};
    int ok = 1;
    printf("bench_memory: %s, %d steps, peak memory per device by purpose (MiB)\n", model, steps);
    for (int w = 2; w <= 4; w += 2) {
        char line[512];
        run_result_t dp, ddp, z;
        snprintf(line, sizeof line, "--backend cpu --quiet --model %s --steps %d --mode dp --gpus %s",
                 model, steps, gpus[w - 1]);
        bench_run(line, &dp);
        snprintf(line, sizeof line, "--backend cpu --quiet --model %s --steps %d --mode ddp --gpus %s",
                 model, steps, gpus[w - 1]);
        bench_run(line, &ddp);
        snprintf(line, sizeof line,
                 "--backend cpu --quiet --model %s --steps %d --mode ddp --gpus %s --zero1", model,
                 steps, gpus[w - 1]);
        bench_run(line, &z);
        printf(" %d devices\n", w);
        split_line("dp device 0", &dp, 0);
        split_line("dp device 1", &dp, 1);
        split_line("ddp rank 0", &ddp, 0);
        split_line("ddp --zero1 rank 0", &z, 0);
        double want = (double)ddp.dev[0].mem_split[MEM_OPTIM] / w;
        double worst = 0.0;
        for (int d = 0; d < w; d++)
            worst = fmax(worst, fabs((double)z.dev[d].mem_split[MEM_OPTIM] - want) / want);
        char what[96];
        snprintf(what, sizeof what, "ZeRO-1's state off 1/%d of DDP's (%%)", w);
        ok &= bench_goal(what, 100.0 * worst, 1.0, 0);
        result_free(&dp);
        result_free(&ddp);
        result_free(&z);
    }
    /* ZeRO-1 against DDP: the same parameters */
    static const char *optims[] = {"--optim sgd --lr 0.05 --momentum 0.9",
                                   "--optim sgd --lr 0.05 --momentum 0.9 --nesterov --weight-decay 0.01",
                                   "--optim adam --lr 0.001", "--optim adamw --lr 0.001"};
    double worst = 0.0;
    int same_bits = 0, runs = 0;
    for (int o = 0; o < 4; o++)
        for (int w = 1; w <= 4; w++) {
            char line[512];
            run_result_t a, b;
            snprintf(line, sizeof line, "--backend cpu --quiet --layers 8,24,16,3 --loss mse "
                     "--samples 240 --batch 24 --steps 20 %s --mode ddp --gpus %s", optims[o],
                     gpus[w - 1]);
            bench_run(line, &a);
            snprintf(line + strlen(line), sizeof line - strlen(line), " --zero1");
            bench_run(line, &b);
            worst = fmax(worst, max_rel_diff(a.params, b.params, a.nparams, 1e-3));
            same_bits += a.checksum.bits == b.checksum.bits;
            runs++;
            result_free(&a);
            result_free(&b);
        }
    printf("  ZeRO-1 against DDP, 4 optimizers x 1..4 ranks: worst relative difference %.2g, "
           "%d of %d runs bit-identical\n", worst, same_bits, runs);
    ok &= bench_goal("ZeRO-1's parameters against DDP's (x1e-5)", worst / 1e-5, 1.0, 0);
    return ok ? 0 : 1;
}
