/* tests/unit/test_accounting.c: every microsecond accounted for.  In every mode
 * each device's phases (all but comm hidden, which overlaps backward) add up
 * to the run's step time: in the run record, the result table's "sum of
 * phases" row, compare's, --json's phases_sum_s, and in the trace, where each
 * step event is tiled by its phases.  DDP times the run by its slowest rank
 * (not each step's slowest, which counted a delay twice). */
#include <cJSON.h>
#include <unistd.h>

#include "common/measure/step_meter.h"
#include "app/report/report.h"
#include "testutil.h"

static const char *const runs[] = {
    "--mode single --model seed-linear --steps 40 --backend cpu --quiet",
    "--mode dp --gpus 0,1,2 --model seed-linear --steps 40 --backend cpu --quiet",
    "--mode ddp --gpus 0,1 --model seed-linear --steps 40 --backend cpu --quiet",
    "--mode ddp --gpus 0,1,2 --layers 10,24,24,2 --loss ce --batch 24 --steps 30 --backend cpu "
    "--quiet --bucket-mb 0.001 --first-bucket-mb 0.001",
};
#define NRUNS (sizeof runs / sizeof runs[0])

typedef struct {
    config_t cfg;
    model_spec_t spec;
    dataset_t data;
    run_result_t res;
    report_ctx_t ctx;
} acc_run_t;

static void acc_run(acc_run_t *a, const char *args, const char *trace)
{
    char err[ERR_LEN], line[1024];
    snprintf(line, sizeof line, "%s%s%s", args, trace ? " --trace " : "", trace ? trace : "");
    cr_assert_eq(tu_parse(&a->cfg, line, err), DDP_OK, "%s: %s", line, err);
    cr_assert_eq(config_model_spec(&a->cfg, &a->spec, err), DDP_OK);
    cr_assert_eq(data_load(&a->cfg, &a->spec, &a->data, err), DDP_OK, "%s", err);
    int rc = strategy_of(a->cfg.mode)->run(&a->cfg, &a->data, &a->res, err);
    cr_assert_eq(rc, DDP_OK, "%s: %s", line, err);
    a->ctx = (report_ctx_t){.cfg = &a->cfg, .spec = &a->spec, .data = &a->data};
}

static void acc_free(acc_run_t *a)
{
    result_free(&a->res);
    data_free(&a->data);
}

/* The numbers after `label` on the lines of text that start with it. */
static int row_values(const char *text, const char *label, double *v, int max)
{
    const char *p = strstr(text, label);
    cr_assert_not_null(p, "no '%s' row in:\n%s", label, text);
    p += strlen(label);
    int n = 0;
    char *end;
    for (;;) {
        while (*p == ' ' || *p == '*')
            p++;
        double x = strtod(p, &end);
        if (end == p || n == max)
            break;
        v[n++] = x;
        p = end;
    }
    return n;
}

static void assert_rows_equal(const char *text, int want_cols)
{
    double sum[16], step[16];
    int ns = row_values(text, "    sum of phases", sum, 16);
    int nw = row_values(text, "    step (wall)", step, 16);
    cr_assert_eq(ns, want_cols, "sum of phases: %d columns in:\n%s", ns, text);
    cr_assert_eq(nw, want_cols);
    for (int i = 0; i < ns; i++)
        cr_assert_float_eq(sum[i], step[i], 1.5e-3, "column %d: phases %.3f, step %.3f in:\n%s", i,
                           sum[i], step[i], text);
}

/* In the record: every device, exactly; DDP's slowest rank has no skew and
 * the others' is what its steps took beyond theirs (never negative). */
Test(accounting, phases_add_up_to_the_step_in_every_mode)
{
    for (size_t i = 0; i < NRUNS; i++) {
        acc_run_t a;
        acc_run(&a, runs[i], NULL);
        run_result_t *r = &a.res;
        cr_assert_gt(r->times.n, 20);
        double min_skew = INFINITY;
        for (int d = 0; d < r->ndev; d++) {
            double sum = 0.0;
            for (int p = 0; p < PH_COUNT; p++)
                if (p != PH_COMM_HIDDEN)
                    sum += r->dev[d].phase_s[p];
            cr_assert_float_eq(sum, r->times.timed_s, 1e-9 * r->times.timed_s,
                               "%s: device %d: phases %.9g s, steps %.9g s", runs[i], d, sum,
                               r->times.timed_s);
            min_skew = fmin(min_skew, r->dev[d].phase_s[PH_SKEW]);
            if (r->mode == MODE_DDP)
                cr_assert_geq(r->dev[d].phase_s[PH_SKEW], -1e-12, "%s: rank %d", runs[i], d);
        }
        if (r->mode == MODE_DDP)
            cr_assert_float_eq(min_skew, 0.0, 1e-12, "%s: the slowest rank times the run",
                               runs[i]);
        acc_free(&a);
    }
}

/* The table, compare and --json say so too. */
Test(accounting, reports_show_the_sum)
{
    acc_run_t a[3];
    for (int i = 0; i < 3; i++)
        acc_run(&a[i], runs[i], NULL);
    for (int i = 0; i < 3; i++) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        report_result(f, &a[i].ctx, &a[i].res, NULL);
        fclose(f);
        assert_rows_equal(buf, a[i].res.ndev);
        free(buf);

        cJSON *o = report_json_run(&a[i].ctx, &a[i].cfg, &a[i].res, NULL, false);
        const cJSON *st = cJSON_GetObjectItem(o, "step_time_s");
        double mean = cJSON_GetObjectItem(st, "mean")->valuedouble;
        const cJSON *d;
        int n = 0;
        cJSON_ArrayForEach(d, cJSON_GetObjectItem(o, "devices"))
        {
            const cJSON *s = cJSON_GetObjectItem(d, "phases_sum_s");
            cr_assert(cJSON_IsNumber(s), "devices[].phases_sum_s");
            cr_assert_float_eq(s->valuedouble, mean, 1e-9 * mean, "json device %d", n);
            double sum = 0.0;
            const cJSON *ph;
            cJSON_ArrayForEach(ph, cJSON_GetObjectItem(d, "phases_s_per_step"))
                if (strcmp(ph->string, "comm_hidden_s") != 0)
                    sum += ph->valuedouble;
            cr_assert_float_eq(sum, mean, 1e-9 * mean, "json device %d: the listed phases", n);
            n++;
        }
        cr_assert_eq(n, a[i].res.ndev);
        cJSON_Delete(o);
    }
    run_result_t three[3] = {a[0].res, a[1].res, a[2].res};
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    report_compare(f, &a[2].ctx, three, 3);
    fclose(f);
    assert_rows_equal(buf, 5); /* single, dp dev0, dp others, ddp dev0, ddp others */
    free(buf);
    for (int i = 0; i < 3; i++)
        acc_free(&a[i]);
}

/* The trace: every step event of every device is tiled by its phases. */
Test(accounting, trace_steps_are_tiled_by_their_phases)
{
    char path[64], err[ERR_LEN];
    snprintf(path, sizeof path, "/tmp/ddpbench-test-acc-%d.json", (int)getpid());
    for (int i = 1; i < 3; i++) {
        acc_run_t a;
        acc_run(&a, runs[i], path);
        cr_assert_eq(report_trace_write(path, &a.res, 1, err), DDP_OK, "%s", err);
        FILE *f = fopen(path, "r");
        static char txt[1 << 22];
        size_t n = fread(txt, 1, sizeof txt - 1, f);
        fclose(f);
        txt[n] = 0;
        cJSON *o = cJSON_Parse(txt);
        cr_assert_not_null(o);
        /* per (pid, step): the step event's duration and its phases' sum */
        enum { MAXK = 8 * 64 };
        double step_dur[MAXK] = {0}, phase_sum[MAXK] = {0};
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItem(o, "traceEvents"))
        {
            const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
            if (!cat)
                continue;
            int pid = cJSON_GetObjectItem(e, "pid")->valueint;
            int step = cJSON_GetObjectItem(cJSON_GetObjectItem(e, "args"), "step")->valueint;
            int k = (pid - 1) * 64 + step % 64;
            cr_assert(k >= 0 && k < MAXK);
            double dur = cJSON_GetObjectItem(e, "dur")->valuedouble;
            if (strcmp(cat, "step") == 0)
                step_dur[k] += dur;
            else if (strcmp(cat, "phase") == 0)
                phase_sum[k] += dur;
        }
        int steps = 0;
        for (int k = 0; k < MAXK; k++) {
            if (step_dur[k] == 0.0)
                continue;
            steps++;
            /* the file rounds to 1 ns per event: allow 2 ns per phase */
            cr_assert_float_eq(phase_sum[k], step_dur[k], 0.03, "%s: device %d step %d: phases "
                               "%.3f us, step %.3f us", runs[i], k / 64, k % 64, phase_sum[k],
                               step_dur[k]);
        }
        cr_assert_geq(steps, 20 * a.res.ndev, "%s: %d step events", runs[i], steps);
        cJSON_Delete(o);
        unlink(path);
        acc_free(&a);
    }
}

/* The rule itself, on a crafted record: skew is the run's step time less
 * each device's phases, hidden communication left out. */
Test(accounting, skew_is_the_difference)
{
    run_result_t r;
    result_init(&r);
    r.ndev = 2;
    r.times.timed_s = 10.0;
    r.times.n = 5;
    r.dev[0].phase_s[PH_FORWARD] = 4.0;
    r.dev[0].phase_s[PH_BACKWARD] = 6.0;
    r.dev[0].phase_s[PH_COMM_HIDDEN] = 3.0;
    r.dev[1].phase_s[PH_FORWARD] = 4.0;
    r.dev[1].phase_s[PH_COMM_EXPOSED] = 5.5;
    r.dev[1].phase_s[PH_SKEW] = 99.0; /* recomputed, not added to */
    step_meter_skew(&r);
    cr_assert_float_eq(r.dev[0].phase_s[PH_SKEW], 0.0, 1e-12);
    cr_assert_float_eq(r.dev[1].phase_s[PH_SKEW], 0.5, 1e-12);
}

/* Every byte accounted for: each device's peak memory splits by purpose into
 * parts that add up to it, taken where the memory is allocated.  DP's device
 * 0 alone holds the optimizer state; every DDP rank holds the same split. */
Test(accounting, memory_split_adds_up_to_the_peak)
{
    static acc_run_t a[3];
    const char *args[] = {
        "--mode single --model mlp-small --steps 3 --backend cpu --quiet",
        "--mode dp --gpus 0,1 --model mlp-small --steps 3 --backend cpu --quiet",
        "--mode ddp --gpus 0,1 --model mlp-small --steps 3 --backend cpu --quiet",
    };
    for (int i = 0; i < 3; i++) {
        acc_run(&a[i], args[i], NULL);
        const run_result_t *r = &a[i].res;
        for (int d = 0; d < r->ndev; d++) {
            size_t sum = 0;
            for (int k = 0; k < MEM_KINDS; k++)
                sum += r->dev[d].mem_split[k];
            cr_assert_eq(sum, r->dev[d].mem_peak, "%s: device %d: split %zu, peak %zu", args[i], d,
                         sum, r->dev[d].mem_peak);
            size_t arena = a[i].spec.nparams * sizeof(float);
            cr_assert_eq(r->dev[d].mem_split[MEM_PARAMS], arena, "%s: device %d", args[i], d);
            cr_assert_eq(r->dev[d].mem_split[MEM_GRADS], arena, "%s: device %d", args[i], d);
            cr_assert_gt(r->dev[d].mem_split[MEM_ACTS], 0);
            /* Adam: two moments, on the devices that step */
            bool steps = r->mode != MODE_DP || d == 0;
            cr_assert_eq(r->dev[d].mem_split[MEM_OPTIM], steps ? 2 * arena : 0, "%s: device %d",
                         args[i], d);
        }
    }
    cr_assert_gt(a[1].res.dev[0].mem_peak, a[1].res.dev[1].mem_peak);
    cr_assert_eq(a[2].res.dev[0].mem_peak, a[2].res.dev[1].mem_peak);
    /* the JSON carries the split */
    cJSON *o = report_json_run(&a[1].ctx, &a[1].cfg, &a[1].res, NULL, false);
    cJSON *d0 = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "devices"), 0);
    cJSON *ms = cJSON_GetObjectItem(d0, "mem_peak_split");
    cr_assert_not_null(ms);
    cr_assert_float_eq(cJSON_GetObjectItem(ms, "optimizer")->valuedouble,
                       (double)a[1].res.dev[0].mem_split[MEM_OPTIM], 0.5);
    cJSON_Delete(o);
    for (int i = 0; i < 3; i++)
        acc_free(&a[i]);
}
