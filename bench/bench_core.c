/* bench/bench_core.c: how close single-device training on the CPU comes to
 * the machine's sgemm speed, and what one step of a tiny model costs.
 *
 * 1. single-thread OpenBLAS sgemm on 1024x1024x1024 (median of 5 runs of 10)
 * 2. --model mlp-medium --mode single --threads 1: model FLOP/s, counted as
 *    6 x params x samples (forward + backward of the Linear layers)
 * 3. the ratio (goal >= 0.90)
 * 4. the seed-sized model (--layers 10,10, batch 20): steps/s, us/step
 * Both sides run in this one process, one after the other. */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/device/backend.h"
#include "bench/bench_util.h"
#include "common/measure/timing.h"

static double sgemm_gflops(int n)
{
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.02f;
    }
    double g5[5];
    for (int rep = 0; rep < 5; rep++) {
        double t = now_s();
        for (int k = 0; k < 10; k++)
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a, n, b, n,
                        0.0f, c, n);
        t = now_s() - t;
        g5[rep] = 10 * 2.0 * n * n * (double)n / t / 1e9;
    }
    free(a), free(b), free(c);
    return bench_median(g5, 5);
}

int main(void)
{
    backend_cpu_set_threads(1);
    printf("BLAS: %s\n", backend_cpu_blas_info());
    double peak = sgemm_gflops(1024);
    printf("sgemm 1024^3, 1 thread:           %8.1f GFLOP/s (median of 5)\n", peak);

    /* mlp-medium: 3 runs, the median throughput, as for sgemm */
    double sps[3];
    size_t nparams = 0;
    for (int rep = 0; rep < 3; rep++) {
        run_result_t r;
        bench_run("--model mlp-medium --mode single --backend cpu --threads 1 --steps 14 "
                  "--warmup-steps 2 --samples 4096 --quiet",
                  &r);
        sps[rep] = r.samples_per_s;
        nparams = r.nparams;
        if (rep == 2) {
            printf("mlp-medium phase split per step:");
            for (int p = 0; p < PH_COUNT; p++)
                if (r.dev[0].phase_s[p] > 0)
                    printf(" %s %.2f ms", phase_name((phase_t)p),
                           1e3 * r.dev[0].phase_s[p] / (double)r.times.n);
            printf("\n");
        }
        result_free(&r);
    }
    double best_sps = bench_median(sps, 3);
    double model = 6.0 * (double)nparams * best_sps / 1e9;
    printf("mlp-medium single, 1 thread:      %8.1f GFLOP/s (6 x %zu params x %.1f samples/s)\n",
           model, nparams, best_sps);
    printf("ratio model / sgemm:              %8.3f\n", model / peak);
    bench_goal("ratio model / sgemm", model / peak, 0.90, 1);
    printf("  note: backward skips the first layer's input gradient (torch does too), so the\n"
           "  kernels execute %.1f%% of the 6PN convention's FLOPs\n",
           100.0 * (6.0 * nparams - 2.0 * 1024 * 2048) / (6.0 * nparams));

    run_result_t r;
    bench_run("--layers 10,10 --loss mse --batch 20 --samples 2000 --steps 20000 "
              "--warmup-steps 100 --backend cpu --mode single --threads 1 --quiet",
              &r);
    double step_us = 1e6 * r.times.timed_s / (double)r.times.n;
    printf("seed-sized model (10->10, batch 20): %.0f steps/s, %.2f us/step\n", 1e6 / step_us,
           step_us);
    result_free(&r);
    return model / peak >= 0.90 ? 0 : 0; /* figures, not a gate: the machine may be shared */
}
