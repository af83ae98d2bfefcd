/* bench/bench_ddp.c: DDP against single mode in one run, on the same data:
 * throughput of `--mode ddp` on N CPU ranks (one BLAS thread each) against
 * `--mode single` with one BLAS thread, with each mode's phase breakdown and
 * DDP's hidden vs exposed communication.  The two modes alternate for a few
 * rounds, so a shared machine's noise hits both; the median of the rounds'
 * ratios is the figure, against the goal (>= 1.8x on 2 ranks).
 *
 *   bench_ddp [-r ROUNDS] [-s STEPS] [-g GPUS] [-- ddpbench options]
 *
 * Defaults: 3 rounds of 20 timed steps (after 3 warm-up steps) of
 * --model mlp-medium (batch 256) on --gpus 0,1; options after -- are passed
 * to both modes (e.g. -- --bucket-mb 4 or -- --no-overlap). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "app/load/load.h"
#include "app/report/report.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

static void print_phases(const char *label, const run_result_t *r)
{
    char a[32];
    for (int d = 0; d < r->ndev; d++) {
        printf("  %-8s dev %d:", label, r->dev[d].device_id);
        for (int p = 0; p < PH_COUNT; p++)
            if (r->dev[d].phase_s[p] > 0.0)
                printf("  %s %s", phase_name((phase_t)p),
                       report_fmt_time(a, sizeof a, r->dev[d].phase_s[p] / (double)r->times.n));
        printf("\n");
    }
}

int main(int argc, char **argv)
{
    int rounds = 3;
    long steps = 20;
    const char *gpus = "0,1";
    int opt;
    while ((opt = getopt(argc, argv, "r:s:g:h")) != -1) {
        switch (opt) {
        case 'r':
            rounds = atoi(optarg);
            break;
        case 's':
            steps = atol(optarg);
            break;
        case 'g':
            gpus = optarg;
            break;
        default:
            fprintf(stderr, "usage: bench_ddp [-r rounds (3)] [-s timed steps (20)] "
                            "[-g gpus (0,1)] [-- ddpbench options]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (rounds < 1 || steps < 1) {
        fprintf(stderr, "bench_ddp: bad arguments\n");
        return 2;
    }
    char extra[2048] = "";
    for (int i = optind; i < argc; i++) {
        strncat(extra, " ", sizeof extra - strlen(extra) - 1);
        strncat(extra, argv[i], sizeof extra - strlen(extra) - 1);
    }
    const long warmup = 3;
    char base[2600], line_s[2800], line_d[2800], err[ERR_LEN];
    snprintf(base, sizeof base, "--backend cpu --model mlp-medium --quiet --steps %ld "
                                "--warmup-steps %ld%s",
             steps + warmup, warmup, extra);
    snprintf(line_s, sizeof line_s, "%s --mode single --threads 1", base);
    snprintf(line_d, sizeof line_d, "%s --mode ddp --gpus %s", base, gpus);
    config_t cs, cd;
    if (bench_config(&cs, line_s, err) != DDP_OK || bench_config(&cd, line_d, err) != DDP_OK) {
        fprintf(stderr, "bench_ddp: %s\n", err);
        return 2;
    }
    model_spec_t spec;
    dataset_t data;
    if (config_model_spec(&cs, &spec, err) != DDP_OK ||
        data_load(&cs, &spec, &data, err) != DDP_OK) {
        fprintf(stderr, "bench_ddp: %s\n", err);
        return 1;
    }
    printf("# bench_ddp: %s, batch %d, %zu parameters; ddp on --gpus %s (%d ranks, 1 BLAS "
           "thread each) vs single (1 BLAS thread)\n",
           cs.model_name, cs.batch, spec.nparams, gpus, cd.ngpus);
    printf("# %d rounds of %ld timed steps, modes alternating, the median round; %ld CPUs "
           "online (shared machine: figures are noisy)\n",
           rounds, steps, sysconf(_SC_NPROCESSORS_ONLN));
    printf("# options:%s\n", base);

    run_result_t best_s, best_d;
    result_init(&best_s);
    result_init(&best_d);
    int rc = 0;
    double ratios[256];
    for (int k = 0; k < rounds && k < 256 && rc == 0; k++) {
        run_result_t rs, rd;
        if (single_strategy.run(&cs, &data, &rs, err) != DDP_OK ||
            ddp_strategy.run(&cd, &data, &rd, err) != DDP_OK) {
            fprintf(stderr, "bench_ddp: %s\n", err);
            rc = 1;
            break;
        }
        ratios[k] = rd.samples_per_s / rs.samples_per_s;
        printf("round %d: single %8.1f samples/s   ddp %8.1f samples/s   ratio %.2fx\n", k + 1,
               rs.samples_per_s, rd.samples_per_s, ratios[k]);
        fflush(stdout);
        bench_keep_best(&best_s, &rs);
        bench_keep_best(&best_d, &rd);
    }
    if (rc == 0) {
        int nr = rounds < 256 ? rounds : 256;
        double median = bench_median(ratios, nr);
        printf("median round speedup %.2fx (best rounds: single %.1f, ddp %.1f samples/s)\n",
               median, best_s.samples_per_s, best_d.samples_per_s);
        bench_goal("ddp / single on 2 ranks (median round)", median, 1.8, 1);
        printf("per step (best rounds):\n");
        print_phases("single", &best_s);
        print_phases("ddp", &best_d);
        double hid = 0.0, exp = 0.0;
        for (int d = 0; d < best_d.ndev; d++) {
            hid += best_d.dev[d].phase_s[PH_COMM_HIDDEN];
            exp += best_d.dev[d].phase_s[PH_COMM_EXPOSED];
        }
        printf("ddp communication: %.1f%% hidden behind backward (%.2f ms hidden, %.2f ms exposed "
               "per rank per step)\n",
               hid + exp > 0 ? 100.0 * hid / (hid + exp) : 0.0,
               1e3 * hid / best_d.ndev / (double)best_d.times.n,
               1e3 * exp / best_d.ndev / (double)best_d.times.n);
        double d = max_rel_diff(best_s.params, best_d.params, best_s.nparams, 1e-3);
        printf("final parameters: ddp vs single max relative difference %.2g\n", d);
    }
    result_free(&best_s);
    result_free(&best_d);
    data_free(&data);
    return rc;
}
