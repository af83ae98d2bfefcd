/* bench/bench_dp.c: DataParallel on the CPU against single mode, in one run:
 * mlp-medium, batch 256, single with one OpenBLAS thread against dp with two
 * workers (one BLAS thread each), alternating rounds so both sides see the
 * same machine load.  Prints both throughputs, their ratio (issue 3 asks for
 * >= 1.5x) and the per-device phase breakdown that explains it.
 *
 * usage: bench_dp [ROUNDS [STEPS [WORKERS]]]   defaults: 3 rounds, 12 timed
 * steps after 2 warm-up, 2 workers. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/bench_util.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "app/load/load.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

static void print_phases(const char *who, const run_result_t *r)
{
    for (int d = 0; d < r->ndev; d++) {
        double total = 0.0;
        printf("  %-6s device %d:", who, d);
        for (int p = 0; p < PH_COUNT; p++) {
            double ms = 1e3 * r->dev[d].phase_s[p] / (double)r->times.n;
            total += ms;
            if (ms > 0.0)
                printf("  %s %.2f", phase_name((phase_t)p), ms);
        }
        printf("  | sum %.2f ms/step\n", total);
    }
}

static void loadavg(char *out, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = '\0';
    if (f) {
        if (!fgets(out, (int)n, f))
            out[0] = '\0';
        fclose(f);
    }
    out[strcspn(out, "\n")] = '\0';
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 3;
    int steps = argc > 2 ? atoi(argv[2]) : 12;
    int workers = argc > 3 ? atoi(argv[3]) : 2;
    if (rounds < 1 || rounds > 64 || steps < 1 || workers < 1 || workers > 8) {
        fprintf(stderr, "usage: bench_dp [ROUNDS(1..64) [STEPS [WORKERS(1..8)]]]\n");
        return 2;
    }
    char err[ERR_LEN], gpus[64] = "0", la[128];
    for (int w = 1; w < workers; w++)
        snprintf(gpus + strlen(gpus), sizeof gpus - strlen(gpus), ",%d", w);
    char common[256], line[512];
    snprintf(common, sizeof common,
             "--backend cpu --model mlp-medium --batch 256 --steps %d --warmup-steps 2 --quiet",
             steps + 2);

    config_t cs, cd;
    snprintf(line, sizeof line, "--mode single --threads 1 %s", common);
    if (bench_config(&cs, line, err) != DDP_OK) {
        fprintf(stderr, "bench_dp: %s\n", err);
        return 2;
    }
    snprintf(line, sizeof line, "--mode dp --gpus %s %s", gpus, common);
    if (bench_config(&cd, line, err) != DDP_OK) {
        fprintf(stderr, "bench_dp: %s\n", err);
        return 2;
    }
    model_spec_t spec;
    dataset_t data;
    if (config_model_spec(&cs, &spec, err) != DDP_OK ||
        data_load(&cs, &spec, &data, err) != DDP_OK) {
        fprintf(stderr, "bench_dp: %s\n", err);
        return 1;
    }
    loadavg(la, sizeof la);
    printf("bench_dp: mlp-medium (%zu params), batch 256, CPU: single (1 BLAS thread) vs dp "
           "(%d workers), %d timed steps after 2 warm-up, %d round(s)\n",
           spec.nparams, workers, steps, rounds);
    printf("  load average before: %s\n", la);

    double ratios[64];
    run_result_t rs, rd, keep_s, keep_d;
    result_init(&keep_s);
    result_init(&keep_d);
    for (int r = 0; r < rounds; r++) {
        if (single_strategy.run(&cs, &data, &rs, err) != DDP_OK ||
            dp_strategy.run(&cd, &data, &rd, err) != DDP_OK) {
            fprintf(stderr, "bench_dp: %s\n", err);
            data_free(&data);
            return 1;
        }
        double diff = max_rel_diff(rs.params, rd.params, rs.nparams, 1e-3);
        ratios[r] = rd.samples_per_s / rs.samples_per_s;
        printf("  round %d: single %8.1f samples/s  dp %8.1f samples/s  ratio %.2fx  (params "
               "agree to %.1e)\n",
               r + 1, rs.samples_per_s, rd.samples_per_s, ratios[r], diff);
        bench_keep_best(&keep_s, &rs);
        bench_keep_best(&keep_d, &rd);
    }
    loadavg(la, sizeof la);
    printf("  load average after:  %s\n", la);
    /* Two summaries: each side's best round, and the median of the
     * back-to-back round ratios (steadier when the load drifts). */
    double median = bench_median(ratios, rounds);
    printf("median round ratio %.2fx (best rounds: single %.1f, dp %.1f samples/s)\n", median,
           keep_s.samples_per_s, keep_d.samples_per_s);
    bench_goal("dp / single (median round)", median, 1.5, 1);
    printf("phases, ms per step (best rounds):\n");
    print_phases("single", &keep_s);
    print_phases("dp", &keep_d);
    printf("note: a shared machine gives noisy figures; both sides ran in this process, "
           "alternating.\n");
    result_free(&keep_s);
    result_free(&keep_d);
    data_free(&data);
    return 0;
}
