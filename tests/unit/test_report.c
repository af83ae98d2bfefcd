/* tests/unit/test_report.c: the reports: --json carries every documented key and
 * parses, --csv has a header and one row per run, the --baseline gate
 * (pass, regression, another configuration, hostile files), the trace parses
 * and holds an event for every phase of every device, the compare view on
 * crafted results (agree and DIFFER, the sentences), --explain, the trace
 * recorder's bounds and the progress line's rules. */
#include <cJSON.h>
#include <unistd.h>

#include "dp/dp.h"
#include "common/measure/progress.h"
#include "common/measure/step_meter.h"
#include "ddp/reducer.h"
#include "common/config/fields.h"
#include "app/report/report.h"
#include "gate/gate.h"
#include "testutil.h"
#include "tu_flip.h"
#include "common/measure/trace.h"

// ---------------------------------------------------------------------------
// helpers

/* A scratch file name in /tmp, unique per test process. */
static void tmp_path(char *buf, size_t n, const char *tag)
{
    snprintf(buf, n, "/tmp/ddpbench-test-%s-%d", tag, (int)getpid());
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f, "%s", path);
    fputs(text, f);
    fclose(f);
}

/* Everything f (a memstream) received, as a string the caller frees. */
typedef struct {
    char *buf;
    size_t len;
    FILE *f;
} mem_t;
static void mem_open(mem_t *m) { m->f = open_memstream(&m->buf, &m->len); }
static char *mem_close(mem_t *m)
{
    fclose(m->f);
    return m->buf;
}

/* A real run of the mode args name, with its config and data kept for the report. */
typedef struct {
    config_t cfg;
    model_spec_t spec;
    dataset_t data;
    run_result_t res;
    report_ctx_t ctx;
} real_run_t;

static void real_run(real_run_t *rr, const char *args)
{
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&rr->cfg, args, err), DDP_OK, "%s: %s", args, err);
    cr_assert_eq(config_model_spec(&rr->cfg, &rr->spec, err), DDP_OK);
    cr_assert_eq(data_load(&rr->cfg, &rr->spec, &rr->data, err), DDP_OK, "%s", err);
    int rc = strategy_of(rr->cfg.mode)->run(&rr->cfg, &rr->data, &rr->res, err);
    cr_assert_eq(rc, DDP_OK, "%s: %s", args, err);
    rr->ctx = (report_ctx_t){.cfg = &rr->cfg, .spec = &rr->spec, .data = &rr->data};
}

static void real_free(real_run_t *rr)
{
    result_free(&rr->res);
    data_free(&rr->data);
}

/* Item at a dot path ("a.b.c") of a parsed object. */
static const cJSON *path_get(const cJSON *o, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *cur = o;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && cur; k = strtok_r(NULL, ".", &save))
        cur = cJSON_GetObjectItemCaseSensitive(cur, k);
    return cur;
}

/* The run's JSON, printed and parsed back (what a consumer of --json sees). */
static cJSON *json_roundtrip(const real_run_t *rr, const run_result_t *ref, bool in_compare)
{
    cJSON *o = report_json_run(&rr->ctx, &rr->cfg, &rr->res, ref, in_compare);
    cr_assert_not_null(o);
    mem_t m;
    mem_open(&m);
    cr_assert_eq(report_json_print(m.f, o), DDP_OK);
    char *txt = mem_close(&m);
    cJSON_Delete(o);
    cr_assert_eq(strchr(txt, '\n'), txt + strlen(txt) - 1, "one line: %s", txt);
    cJSON *back = cJSON_Parse(txt);
    cr_assert_not_null(back, "does not parse: %s", txt);
    free(txt);
    return back;
}

// ---------------------------------------------------------------------------
// --json

Test(report_json, carries_every_documented_key)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 6 --backend cpu --quiet");
    cJSON *o = json_roundtrip(&rr, NULL, false);
    for (const char *const *k = report_json_keys(); *k; k++)
        cr_expect_not_null(path_get(o, *k), "key %s is missing", *k);
    cr_assert_eq(path_get(o, "schema_version")->valueint, REPORT_SCHEMA_VERSION);
    cr_assert_str_eq(path_get(o, "config.mode")->valuestring, "single");
    cr_assert(cJSON_IsNull(path_get(o, "compare")), "compare is null outside compare mode");
    cr_assert_float_eq(path_get(o, "throughput_samples_per_s")->valuedouble, rr.res.samples_per_s,
                       1e-6 * rr.res.samples_per_s);
    cr_assert_float_eq(path_get(o, "config.optimizer.lr")->valuedouble, 0.001, 1e-12,
                       "floats as typed");
    /* every phase of every device, and the checksum bits as 16 hex digits */
    const cJSON *devs = path_get(o, "devices");
    cr_assert_eq(cJSON_GetArraySize(devs), 1);
    const cJSON *ph = path_get(cJSON_GetArrayItem(devs, 0), "phases_s_per_step");
    for (int p = 0; p < PH_COUNT; p++)
        cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ph, phase_key((phase_t)p))),
                  "phase %s", phase_key((phase_t)p));
    const char *bits = path_get(o, "checksum.bits")->valuestring;
    char want[24];
    snprintf(want, sizeof want, "%016llx", (unsigned long long)rr.res.checksum.bits);
    cr_assert_str_eq(bits, want);
    cJSON_Delete(o);
    real_free(&rr);
}

Test(report_json, dp_and_ddp_runs_carry_every_documented_key)
{
    const struct {
        const char *args, *mode;
        int ndev;
    } runs[] = {{"--mode dp --gpus 0,1,2 --model seed-linear --steps 6 --backend cpu --quiet", "dp", 3},
                {"--mode ddp --gpus 0,1 --model seed-linear --steps 6 --backend cpu --quiet", "ddp", 2}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        real_run_t rr;
        real_run(&rr, runs[r].args);
        cJSON *o = json_roundtrip(&rr, NULL, false);
        for (const char *const *k = report_json_keys(); *k; k++)
            cr_expect_not_null(path_get(o, *k), "%s: key %s is missing", runs[r].mode, *k);
        cr_assert_str_eq(path_get(o, "config.mode")->valuestring, runs[r].mode);
        const cJSON *devs = path_get(o, "devices");
        cr_assert_eq(cJSON_GetArraySize(devs), runs[r].ndev, "%s: one entry per device",
                     runs[r].mode);
        cr_assert_eq(cJSON_GetArraySize(path_get(o, "environment.devices")), runs[r].ndev);
        for (int d = 0; d < runs[r].ndev; d++) {
            const cJSON *ph = path_get(cJSON_GetArrayItem(devs, d), "phases_s_per_step");
            for (int p = 0; p < PH_COUNT; p++)
                cr_expect(cJSON_IsNumber(cJSON_GetObjectItemCaseSensitive(ph, phase_key((phase_t)p))),
                          "%s device %d: phase %s", runs[r].mode, d, phase_key((phase_t)p));
        }
        cr_assert_float_eq(path_get(o, "throughput_samples_per_s")->valuedouble,
                           rr.res.samples_per_s, 1e-6 * rr.res.samples_per_s);
        cJSON_Delete(o);
        real_free(&rr);
    }
}

Test(report_json, device_entries_and_compare_block)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 4 --backend cpu --quiet");
    /* a copy with other parameters stands in for a second mode */
    run_result_t other = rr.res;
    other.params = malloc(rr.res.nparams * sizeof(float));
    for (size_t i = 0; i < rr.res.nparams; i++)
        other.params[i] = rr.res.params[i] * 1.5f;
    other.samples_per_s = rr.res.samples_per_s * 1.5;
    other.mode = MODE_DP;
    real_run_t view = rr;
    view.res = other;
    cJSON *o = json_roundtrip(&view, &rr.res, true);
    const char *dev_keys[] = {"slot", "id", "name", "rows_per_step", "steps_run", "steps_shadowed", "mem_peak_bytes",
                              "phases_s_per_step"};
    const cJSON *d0 = cJSON_GetArrayItem(path_get(o, "devices"), 0);
    for (size_t i = 0; i < sizeof dev_keys / sizeof dev_keys[0]; i++)
        cr_expect_not_null(cJSON_GetObjectItemCaseSensitive(d0, dev_keys[i]), "devices[0].%s",
                           dev_keys[i]);
    cr_assert_float_eq(path_get(o, "compare.speedup_vs_single")->valuedouble, 1.5, 1e-9);
    cr_assert_float_eq(path_get(o, "compare.scaling_efficiency")->valuedouble, 1.5, 1e-9);
    cr_assert(cJSON_IsFalse(path_get(o, "compare.params_vs_single.agree")));
    cr_assert(path_get(o, "compare.params_vs_single.rel_l2")->valuedouble > 0.4);
    cr_assert(path_get(o, "compare.params_vs_single.max_rel_diff")->valuedouble > 0.3);
    cJSON_Delete(o);
    free(other.params);
    real_free(&rr);
}

// ---------------------------------------------------------------------------
// --csv

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

Test(report_csv, header_and_one_row_per_run)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 5 --backend cpu --quiet");
    mem_t m;
    mem_open(&m);
    report_csv_header(m.f);
    for (int i = 0; i < 3; i++)
        report_csv_row(m.f, &rr.ctx, &rr.cfg, &rr.res, i ? &rr.res : NULL, NULL);
    char *txt = mem_close(&m);
    cr_assert_eq(count_char(txt, '\n'), 4, "header + 3 rows: %s", txt);
    char *save = NULL;
    char *header = strtok_r(txt, "\n", &save);
    int cols = count_char(header, ',') + 1;
    cr_assert_eq(cols, 24 + 2 * PH_COUNT + 11, "columns in the header: %s", header);
    cr_assert(strncmp(header, "mode,backend,devices,", 21) == 0);
    for (char *row = strtok_r(NULL, "\n", &save); row; row = strtok_r(NULL, "\n", &save)) {
        cr_assert_eq(count_char(row, ',') + 1, cols, "row: %s", row);
        const char *lead = "single,cpu,1,seed-linear,10-10,20,1,5,2,60,";
        cr_assert(strncmp(row, lead, strlen(lead)) == 0, "row: %s", row);
    }
    free(txt);
    real_free(&rr);
}

// ---------------------------------------------------------------------------
// --baseline

/* Write the run's JSON to path, with throughput multiplied by factor and
 * without its work and step times: the gate judges the mean throughput. */
static void write_baseline(const real_run_t *rr, const char *path, double factor)
{
    cJSON *o = report_json_run(&rr->ctx, &rr->cfg, &rr->res, NULL, false);
    cJSON *tp = cJSON_GetObjectItemCaseSensitive(o, "throughput_samples_per_s");
    cJSON_SetNumberValue(tp, tp->valuedouble * factor);
    cJSON_DeleteItemFromObjectCaseSensitive(o, "work_cpu_s");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "step_time_s");
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    cr_assert_eq(report_json_print(f, o), DDP_OK);
    fclose(f);
    cJSON_Delete(o);
}

/* Load path and judge rr's run against it at tol %; returns the code. */
static int judge(const real_run_t *rr, const config_t *cfg, const char *path, double tol,
                 char *msg)
{
    static repeat_t rep; /* a run's summaries: off the stack */
    rep.n = 0;
    repeat_add(&rep, &rr->res);
    baseline_t b;
    int rc = baseline_load(&b, path, msg);
    if (rc != DDP_OK)
        return rc;
    cJSON *cj = report_json_config(&rr->ctx, cfg, NULL);
    const cJSON *match;
    rc = baseline_match(&b, cj, &match, msg);
    if (rc == DDP_OK)
        rc = baseline_judge(match, NULL, &rep, tol, msg, ERR_LEN);
    cJSON_Delete(cj);
    baseline_free(&b);
    return rc;
}

Test(report_baseline, same_run_passes_doctored_one_regresses)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 6 --backend cpu --quiet");
    char path[256], msg[ERR_LEN];
    tmp_path(path, sizeof path, "baseline");
    write_baseline(&rr, path, 1.0);
    cr_assert_eq(judge(&rr, &rr.cfg, path, 5.0, msg), DDP_OK, "%s", msg);
    cr_assert(strstr(msg, "verdict: no change"), "%s", msg);
    write_baseline(&rr, path, 1.5); /* the baseline was 50% faster */
    cr_assert_eq(judge(&rr, &rr.cfg, path, 5.0, msg), DDP_ERR_REGRESSED, "%s", msg);
    cr_assert(strstr(msg, "verdict: regressed: "), "%s", msg);
    cr_assert(strstr(msg, "33.3% below the baseline"), "%s", msg);
    cr_assert(strstr(msg, "(tolerance 5%)"), "%s", msg);
    cr_assert_eq(judge(&rr, &rr.cfg, path, 40.0, msg), DDP_OK, "a 33%% drop is within 40%%: %s",
                 msg);
    write_baseline(&rr, path, 0.5); /* faster than the baseline: fine */
    cr_assert_eq(judge(&rr, &rr.cfg, path, 0.0, msg), DDP_OK, "%s", msg);
    cr_assert(strstr(msg, "100.0% above"), "%s", msg);
    unlink(path);
    real_free(&rr);
}

Test(report_baseline, dp_and_ddp_runs_pass_their_own_and_fail_a_doctored_one)
{
    const char *runs[] = {"--mode dp --gpus 0,1 --model seed-linear --steps 6 --backend cpu --quiet",
                          "--mode ddp --gpus 0,1 --model seed-linear --steps 6 --backend cpu --quiet"};
    for (size_t r = 0; r < 2; r++) {
        real_run_t rr;
        real_run(&rr, runs[r]);
        char path[256], msg[ERR_LEN];
        tmp_path(path, sizeof path, "baseline-modes");
        write_baseline(&rr, path, 1.0);
        cr_assert_eq(judge(&rr, &rr.cfg, path, 5.0, msg), DDP_OK, "%s: %s", runs[r], msg);
        write_baseline(&rr, path, 2.0);
        cr_assert_eq(judge(&rr, &rr.cfg, path, 5.0, msg), DDP_ERR_REGRESSED, "%s: %s", runs[r], msg);
        cr_assert(strstr(msg, "50.0% below the baseline"), "%s", msg);
        /* the same mode on another device count is another configuration */
        config_t c;
        char args[256];
        snprintf(args, sizeof args, "%s --gpus 0,1,2,3", runs[r]);
        cr_assert_eq(tu_parse(&c, args, msg), DDP_OK, "%s", msg);
        cr_assert_eq(judge(&rr, &c, path, 5.0, msg), DDP_ERR_INPUT, "%s", args);
        cr_assert(strstr(msg, "ndevices is 2 there, 4 here"), "%s", msg);
        unlink(path);
        real_free(&rr);
    }
}

Test(report_baseline, another_configuration_is_refused_naming_the_field)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 4 --backend cpu --quiet");
    char path[256], msg[ERR_LEN];
    tmp_path(path, sizeof path, "other");
    write_baseline(&rr, path, 1.0);
    const struct {
        const char *args, *field;
    } cases[] = {{"--mode single --model seed-linear --batch 10 --backend cpu", "batch is 20 there, 10 here"},
                 {"--mode single --model seed-linear --accum 2 --backend cpu", "accum"},
                 {"--mode single --model seed-linear --layers 10,16,10 --backend cpu", "layers"},
                 {"--mode single --model seed-linear --optim adam --backend cpu", "optimizer.name"},
                 {"--mode single --model seed-linear --loss bce --layers 10,1 --backend cpu", "layers"},
                 {"--mode dp --model seed-linear --backend cpu", "holds no dp run"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        config_t c;
        cr_assert_eq(tu_parse(&c, cases[i].args, msg), DDP_OK, "%s", msg);
        cr_assert_eq(judge(&rr, &c, path, 5.0, msg), DDP_ERR_INPUT, "%s", cases[i].args);
        cr_assert(strstr(msg, cases[i].field), "'%s' lacks '%s'", msg, cases[i].field);
        cr_assert_null(strchr(msg, '\n'));
    }
    /* the steps timed and the warm-up are part of the configuration */
    config_t c;
    cr_assert_eq(tu_parse(&c, "--mode single --model seed-linear --steps 9 --backend cpu", msg),
                 DDP_OK);
    cr_assert_eq(judge(&rr, &c, path, 100.0, msg), DDP_ERR_INPUT, "%s", msg);
    cr_assert(strstr(msg, "steps is 4 there, 9 here"), "%s", msg);
    cr_assert_eq(tu_parse(&c, "--mode single --model seed-linear --steps 4 --warmup-steps 1 "
                              "--backend cpu",
                          msg),
                 DDP_OK);
    cr_assert_eq(judge(&rr, &c, path, 100.0, msg), DDP_ERR_INPUT, "%s", msg);
    cr_assert(strstr(msg, "warmup_steps is 2 there, 1 here"), "%s", msg);
    /* same configuration, a harmless option (seed) still compares */
    cr_assert_eq(tu_parse(&c, "--mode single --model seed-linear --seed 5 --steps 4 --backend cpu",
                          msg),
                 DDP_OK);
    cr_assert_neq(judge(&rr, &c, path, 100.0, msg), DDP_ERR_INPUT, "%s", msg);
    unlink(path);
    real_free(&rr);
}

Test(report_baseline, hostile_files_are_one_line_input_errors)
{
    char path[256], msg[ERR_LEN];
    tmp_path(path, sizeof path, "hostile");
    const char *good_cfg = "\"config\":{\"mode\":\"single\",\"backend\":\"cpu\",\"ndevices\":1,"
                           "\"layers\":[10,10],\"batch\":20,\"accum\":1,\"loss\":\"mse\","
                           "\"optimizer\":{\"name\":\"sgd\"}}";
    char buf[1024];
    const struct {
        const char *text, *why;
    } cases[] = {
        {"", "empty file"},
        {"   \n", "empty file"},
        {"{\"schema_version\":1,", "not valid JSON"},
        {"not json at all", "not valid JSON"},
        {"[1,2,3]", "expected a JSON object"},
        {"42", "expected a JSON object"},
        {"{\"tool\":\"ddpbench\"}", "no schema_version"},
        {"{\"schema_version\":99}", "schema_version 99"},
        {"{\"schema_version\":1}", "config.mode is missing"},
        {NULL, "throughput_samples_per_s is missing"},
        {NULL, "throughput_samples_per_s has the wrong type"},
        {NULL, "throughput_samples_per_s is -3, not a rate"},
        {NULL, "config.batch has the wrong type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *text = cases[i].text;
        if (i == 9)
            snprintf(buf, sizeof buf, "{\"schema_version\":1,%s}", good_cfg);
        if (i == 10)
            snprintf(buf, sizeof buf, "{\"schema_version\":1,%s,\"throughput_samples_per_s\":\"fast\"}",
                     good_cfg);
        if (i == 11)
            snprintf(buf, sizeof buf, "{\"schema_version\":1,%s,\"throughput_samples_per_s\":-3}",
                     good_cfg);
        if (i == 12)
            snprintf(buf, sizeof buf,
                     "{\"schema_version\":1,\"config\":{\"mode\":\"single\",\"backend\":\"cpu\","
                     "\"ndevices\":1,\"layers\":[10,10],\"batch\":\"20\",\"accum\":1,\"loss\":"
                     "\"mse\",\"optimizer\":{\"name\":\"sgd\"}},\"throughput_samples_per_s\":5}");
        if (!text)
            text = buf;
        write_file(path, text);
        baseline_t b;
        cr_assert_eq(baseline_load(&b, path, msg), DDP_ERR_INPUT, "accepted: %s", text);
        cr_assert(strstr(msg, cases[i].why), "'%s': message '%s' lacks '%s'", text, msg,
                  cases[i].why);
        cr_assert(strstr(msg, path), "names the file: %s", msg);
        cr_assert_null(strchr(msg, '\n'));
    }
    /* too big: refused by size before it is read */
    FILE *f = fopen(path, "w");
    for (long i = 0; i < BASELINE_MAX_BYTES / 8 + 1; i++)
        fputs("        ", f);
    fclose(f);
    baseline_t b;
    cr_assert_eq(baseline_load(&b, path, msg), DDP_ERR_INPUT);
    cr_assert(strstr(msg, "bytes"), "%s", msg);
    unlink(path);
    cr_assert_eq(baseline_load(&b, path, msg), DDP_ERR_INPUT);
    cr_assert(strstr(msg, "cannot open"), "%s", msg);
    cr_assert_eq(baseline_load(&b, "/tmp", msg), DDP_ERR_INPUT);
    cr_assert(strstr(msg, "not a regular file"), "%s", msg);
}

Test(report_baseline, json_lines_of_compare_match_by_mode)
{
    char path[256], msg[ERR_LEN];
    tmp_path(path, sizeof path, "jsonl");
    const char *fmt = "{\"schema_version\":1,\"config\":{\"mode\":\"%s\",\"backend\":\"cpu\","
                      "\"ndevices\":%d,\"layers\":[10,10],\"batch\":20,\"accum\":1,\"loss\":"
                      "\"mse\",\"optimizer\":{\"name\":\"sgd\"},\"steps\":0,\"warmup_steps\":2,"
                      "\"epochs\":10},\"throughput_samples_per_s\":%d}\n";
    char text[2048];
    int n = snprintf(text, sizeof text, fmt, "single", 1, 100);
    n += snprintf(text + n, sizeof text - n, fmt, "dp", 2, 150);
    snprintf(text + n, sizeof text - n, fmt, "ddp", 2, 190);
    write_file(path, text);
    baseline_t b;
    cr_assert_eq(baseline_load(&b, path, msg), DDP_OK, "%s", msg);
    cr_assert_eq(b.nrun, 3);
    config_t c;
    cr_assert_eq(tu_parse(&c, "--model seed-linear --backend cpu --gpus 0,1", msg), DDP_OK, "%s", msg);
    const mode_t_ modes[] = {MODE_SINGLE, MODE_DP, MODE_DDP};
    const double want[] = {100, 150, 190};
    for (int i = 0; i < 3; i++) {
        config_t rc = c;
        rc.mode = modes[i];
        if (modes[i] == MODE_SINGLE)
            rc.ngpus = 1;
        cJSON *cj = report_json_config(NULL, &rc, NULL);
        const cJSON *match;
        cr_assert_eq(baseline_match(&b, cj, &match, msg), DDP_OK, "%s", msg);
        cr_assert_float_eq(
            cJSON_GetObjectItemCaseSensitive(match, "throughput_samples_per_s")->valuedouble,
            want[i], 1e-9);
        cJSON_Delete(cj);
    }
    /* a DDP baseline on 2 devices does not judge DDP on 3 */
    config_t c3 = c;
    c3.mode = MODE_DDP;
    c3.ngpus = 3;
    cJSON *cj = report_json_config(NULL, &c3, NULL);
    const cJSON *match;
    cr_assert_eq(baseline_match(&b, cj, &match, msg), DDP_ERR_INPUT);
    cr_assert(strstr(msg, "ndevices is 2 there, 3 here"), "%s", msg);
    cJSON_Delete(cj);
    baseline_free(&b);
    /* two runs of one mode: ambiguous */
    n = snprintf(text, sizeof text, fmt, "dp", 2, 150);
    snprintf(text + n, sizeof text - n, fmt, "dp", 2, 160);
    write_file(path, text);
    cr_assert_eq(baseline_load(&b, path, msg), DDP_OK, "%s", msg);
    c3.mode = MODE_DP;
    c3.ngpus = 2;
    cj = report_json_config(NULL, &c3, NULL);
    cr_assert_eq(baseline_match(&b, cj, &match, msg), DDP_ERR_INPUT);
    cr_assert(strstr(msg, "2 dp runs"), "%s", msg);
    cJSON_Delete(cj);
    baseline_free(&b);
    unlink(path);
}

// ---------------------------------------------------------------------------
// --trace

Test(report_trace, parses_and_holds_every_phase_of_every_device)
{
    char path[256], err[ERR_LEN], args[512];
    tmp_path(path, sizeof path, "trace.json");
    snprintf(args, sizeof args,
             "--mode single --model seed-linear --steps 8 --accum 2 --backend cpu --quiet "
             "--trace %s",
             path);
    real_run_t rr;
    real_run(&rr, args);
    cr_assert_not_null(rr.res.trace[0], "--trace gives the device a recorder");
    cr_assert_eq(report_trace_check(path, err), DDP_OK, "%s", err);
    cr_assert_eq(report_trace_write(path, &rr.res, 1, err), DDP_OK, "%s", err);

    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char txt[1 << 20];
    size_t n = fread(txt, 1, sizeof txt - 1, f);
    fclose(f);
    txt[n] = 0;
    cJSON *o = cJSON_Parse(txt);
    cr_assert_not_null(o, "the trace is not JSON");
    const cJSON *evs = cJSON_GetObjectItemCaseSensitive(o, "traceEvents");
    cr_assert(cJSON_IsArray(evs));
    int steps = 0, per_phase[PH_COUNT] = {0};
    bool named_process = false;
    const cJSON *e;
    cJSON_ArrayForEach(e, evs)
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        cr_assert(ph && name);
        int pid = cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint;
        cr_assert_eq(pid, 1, "one process: single's device 0");
        if (strcmp(ph, "M") == 0) {
            named_process |= strcmp(name, "process_name") == 0;
            continue;
        }
        cr_assert_str_eq(ph, "X");
        cr_assert(cJSON_GetObjectItemCaseSensitive(e, "dur")->valuedouble >= 0.0);
        cr_assert(cJSON_GetObjectItemCaseSensitive(e, "ts")->valuedouble >= 0.0);
        if (strncmp(name, "step ", 5) == 0)
            steps++;
        for (int p = 0; p < PH_COUNT; p++)
            if (strcmp(name, phase_name((phase_t)p)) == 0)
                per_phase[p]++;
    }
    cr_assert(named_process);
    cr_assert_eq(steps, (int)rr.res.times.n, "one event per timed step");
    for (int p = 0; p < PH_COUNT; p++) {
        if (p == PH_SKEW)
            continue; /* settled after the run (step_meter_skew), not a lap */
        if (p == PH_DESCHED) /* only in the laps that waited for a core */
            cr_expect(rr.res.dev[0].phase_s[p] > 0.0 ? per_phase[p] >= 1 : per_phase[p] == 0,
                      "descheduled %g s, %d events", rr.res.dev[0].phase_s[p], per_phase[p]);
        else if (rr.res.dev[0].phase_s[p] > 0.0)
            cr_expect_geq(per_phase[p], steps, "phase %s: %d events for %d steps",
                          phase_name((phase_t)p), per_phase[p], steps);
        else
            cr_expect_eq(per_phase[p], 0, "phase %s has no time but events", phase_name((phase_t)p));
    }
    /* accum 2: forward, loss and backward twice per step */
    cr_assert_eq(per_phase[PH_FORWARD], 2 * steps);
    cJSON_Delete(o);
    unlink(path);
    real_free(&rr);
}

/* A trace file's events, counted per device (pid - 1 of run 0) and lane. */
#define TC_MAX_DEV 8
#define TC_MAX_BUCKETS 16
typedef struct {
    int steps[TC_MAX_DEV];
    int phase[TC_MAX_DEV][PH_COUNT];       /* compute lane, by the mode's label */
    int copy[TC_MAX_DEV][TR_KIND_COUNT][TC_MAX_DEV + 1]; /* comm lane: [kind][peer + 1] */
    int bucket[TC_MAX_DEV][TC_MAX_BUCKETS];  /* comm lane: all-reduce per bucket */
    double bucket_bytes[TC_MAX_DEV][TC_MAX_BUCKETS];
    int comm_without_bytes;
} trace_count_t;

static void trace_count(const char *path, mode_t_ mode, trace_count_t *tc)
{
    memset(tc, 0, sizeof *tc);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f);
    static char txt[1 << 22];
    size_t n = fread(txt, 1, sizeof txt - 1, f);
    fclose(f);
    txt[n] = 0;
    cJSON *o = cJSON_Parse(txt);
    cr_assert_not_null(o, "the trace is not JSON");
    cr_assert_eq(path_get(o, "otherData.dropped_events")->valuedouble, 0.0,
                 "the recorders were big enough");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(o, "traceEvents"))
    {
        const char *ph = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "ph"));
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "name"));
        cr_assert(ph && name);
        if (strcmp(ph, "X") != 0)
            continue;
        int d = cJSON_GetObjectItemCaseSensitive(e, "pid")->valueint - 1;
        int tid = cJSON_GetObjectItemCaseSensitive(e, "tid")->valueint;
        cr_assert(d >= 0 && d < TC_MAX_DEV, "pid %d", d + 1);
        cr_assert(cJSON_GetObjectItemCaseSensitive(e, "dur")->valuedouble >= 0.0);
        const char *cat = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(e, "cat"));
        const cJSON *args = cJSON_GetObjectItemCaseSensitive(e, "args");
        if (tid == LANE_COMPUTE) {
            if (strncmp(name, "step ", 5) == 0)
                tc->steps[d]++;
            for (int p = 0; p < PH_COUNT; p++)
                if (strcmp(name, report_phase_label(mode, (phase_t)p)) == 0)
                    tc->phase[d][p]++;
            continue;
        }
        cr_assert_eq(tid, LANE_COMM, "%s on lane %d", name, tid);
        cr_assert_str_eq(cat, "comm");
        const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(args, "bytes");
        tc->comm_without_bytes += !cJSON_IsNumber(bytes);
        const cJSON *bucket = cJSON_GetObjectItemCaseSensitive(args, "bucket");
        if (bucket) {
            cr_assert(strncmp(name, "all-reduce bucket ", 18) == 0, "%s", name);
            cr_assert(bucket->valueint >= 0 && bucket->valueint < TC_MAX_BUCKETS);
            tc->bucket[d][bucket->valueint]++;
            tc->bucket_bytes[d][bucket->valueint] = cJSON_IsNumber(bytes) ? bytes->valuedouble : 0;
            continue;
        }
        const cJSON *peer = cJSON_GetObjectItemCaseSensitive(args, "peer");
        int pi = peer ? peer->valueint + 1 : 0;
        cr_assert(pi >= 0 && pi <= TC_MAX_DEV);
        for (int k = TR_STEP; k < TR_KIND_COUNT; k++)
            if (strncmp(name, trace_kind_name((trace_kind_t)k), strlen(trace_kind_name((trace_kind_t)k))) == 0)
                tc->copy[d][k][pi]++;
    }
    cJSON_Delete(o);
}

Test(report_trace, dp_run_holds_every_phase_of_every_device_and_its_copies)
{
    char path[256], err[ERR_LEN], args[512];
    tmp_path(path, sizeof path, "trace-dp.json");
    const int k = 3, accum = 2;
    snprintf(args, sizeof args,
             "--mode dp --gpus 0,1,2 --model seed-linear --steps 8 --accum %d --backend cpu "
             "--quiet --trace %s",
             accum, path);
    real_run_t rr;
    real_run(&rr, args);
    for (int d = 0; d < k; d++)
        cr_assert_not_null(rr.res.trace[d], "device %d has a recorder", d);
    cr_assert_eq(report_trace_write(path, &rr.res, 1, err), DDP_OK, "%s", err);
    trace_count_t tc;
    trace_count(path, MODE_DP, &tc);
    int steps = (int)rr.res.times.n;
    cr_assert_eq(tc.comm_without_bytes, 0, "every copy says how many bytes");
    for (int d = 0; d < k; d++) {
        cr_assert_eq(tc.steps[d], steps, "device %d: one step event per timed step", d);
        for (int p = 0; p < PH_COUNT; p++) {
            if (p == PH_SKEW)
                continue; /* settled after the run (step_meter_skew), not a lap */
            if (p == PH_DESCHED) /* only in the laps that waited for a core */
                cr_expect(rr.res.dev[d].phase_s[p] > 0.0 ? tc.phase[d][p] >= 1
                                                         : tc.phase[d][p] == 0,
                          "device %d descheduled %g s, %d events", d, rr.res.dev[d].phase_s[p],
                          tc.phase[d][p]);
            else if (rr.res.dev[d].phase_s[p] > 0.0)
                cr_expect_geq(tc.phase[d][p], steps, "device %d phase %s: %d events for %d steps",
                              d, phase_name((phase_t)p), tc.phase[d][p], steps);
            else
                cr_expect_eq(tc.phase[d][p], 0, "device %d phase %s: events but no time", d,
                             phase_name((phase_t)p));
        }
        /* a large arena: every thread copies its slice of the parameters into
         * replicas 1..k-1 and adds its slice of the gradients (the CPU splits
         * both by slices); a small one (seed-linear's) moves whole: each
         * replica's thread copies its own, device 0 adds every gradient */
        bool sliced = comm_local_sliced(rr.spec.nparams);
        for (int r = 1; r < k; r++)
            cr_expect_eq(tc.copy[d][TR_REPLICATE][r + 1], sliced || d == r ? steps : 0,
                         "device %d: replicate to %d", d, r);
        cr_expect_eq(tc.copy[d][TR_REDUCE][0], sliced || d == 0 ? steps : 0,
                     "device %d: reduce events", d);
        if (d == 0) {
            for (int r = 1; r < k; r++)
                cr_expect_eq(tc.copy[0][TR_GATHER][r + 1], steps * accum, "gather from %d", r);
        } else {
            /* the inputs and the output gradients of every micro-batch */
            cr_expect_eq(tc.copy[d][TR_SCATTER][d + 1], 2 * steps * accum, "scatter to %d", d);
        }
    }
    cr_expect_eq(tc.copy[0][TR_SCATTER][1] + tc.copy[1][TR_GATHER][1], 0,
                 "device 0 scatters to nobody, device 1 gathers nothing");
    unlink(path);
    real_free(&rr);
}

Test(report_trace, ddp_run_holds_every_phase_and_every_bucket)
{
    char path[256], err[ERR_LEN], args[512];
    tmp_path(path, sizeof path, "trace-ddp.json");
    const char *model = "--layers 8,64,64,3 --loss ce --samples 120 --batch 12 --bucket-mb 0.01 "
                        "--first-bucket-mb 0.005";
    snprintf(args, sizeof args, "%s --mode ddp --gpus 0,1 --steps 8 --backend cpu --quiet --trace %s",
             model, path);
    real_run_t rr;
    real_run(&rr, args);
    reducer_t red;
    cr_assert_eq(reducer_init(&red, NULL, NULL, &rr.spec, NULL, rr.cfg.first_bucket_mb,
                              rr.cfg.bucket_mb, true, BUCKETS_CAPPED, err),
                 DDP_OK);
    cr_assert(red.nb >= 3 && red.nb <= TC_MAX_BUCKETS, "%d buckets", red.nb);
    cr_assert_eq(report_trace_write(path, &rr.res, 1, err), DDP_OK, "%s", err);
    trace_count_t tc;
    trace_count(path, MODE_DDP, &tc);
    int steps = (int)rr.res.times.n;
    for (int r = 0; r < 2; r++) {
        cr_assert_eq(tc.steps[r], steps, "rank %d: one step event per timed step", r);
        for (int p = 0; p < PH_COUNT; p++) {
            if (p == PH_COMM_HIDDEN || p == PH_SKEW)
                continue; /* drawn as the all-reduces on the comm lane / settled after the run */
            if (p == PH_DESCHED) /* only in the laps that waited for a core */
                cr_expect(rr.res.dev[r].phase_s[p] > 0.0 ? tc.phase[r][p] >= 1 : tc.phase[r][p] == 0,
                          "rank %d descheduled %g s, %d events", r, rr.res.dev[r].phase_s[p],
                          tc.phase[r][p]);
            else if (rr.res.dev[r].phase_s[p] > 0.0)
                cr_expect_geq(tc.phase[r][p], steps, "rank %d phase %s: %d events for %d steps",
                              r, phase_name((phase_t)p), tc.phase[r][p], steps);
            else
                cr_expect_eq(tc.phase[r][p], 0, "rank %d phase %s: events but no time", r,
                             phase_name((phase_t)p));
        }
        for (int b = 0; b < red.nb; b++) {
            cr_expect_eq(tc.bucket[r][b], steps, "rank %d bucket %d: %d all-reduce events", r, b,
                         tc.bucket[r][b]);
            cr_expect_eq(tc.bucket_bytes[r][b], (double)red.b[b].count * sizeof(float),
                         "rank %d bucket %d bytes", r, b);
        }
        cr_expect_eq(tc.bucket[r][red.nb], 0, "no bucket past the last");
    }
    reducer_free(&red);
    unlink(path);
    real_free(&rr);
}

Test(report_trace, no_recorder_without_the_option_and_bad_folders_refused)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 3 --backend cpu --quiet");
    cr_assert_null(rr.res.trace[0]);
    real_free(&rr);
    char err[ERR_LEN];
    cr_assert_eq(report_trace_check("/no/such/folder/t.json", err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--trace /no/such/folder/t.json: cannot create a file in directory "
                          "'/no/such/folder': No such file or directory"),
              "%s", err);
    cr_assert_eq(report_trace_check("/tmp", err), DDP_ERR_INPUT);
    cr_assert(strstr(err, "--trace /tmp: is a directory"), "%s", err);
}

Test(trace, recorder_bounds)
{
    trace_step_begin(NULL, 0, true); /* tracing off: no-ops */
    trace_event(NULL, TR_ALLREDUCE, LANE_COMM, 0, 1, 8, 0, -1);
    trace_rec_t *t = trace_rec_create(4, 0);
    cr_assert_not_null(t);
    trace_step_begin(t, 0, false); /* warm-up: not recorded */
    trace_phase(t, PH_FORWARD, 0.0, 1.0);
    cr_assert_eq(t->n, 0);
    trace_step_begin(t, 1, true);
    trace_phase(t, PH_FORWARD, 1.0, 2.0);
    trace_event(t, TR_ALLREDUCE, LANE_COMM, 1.5, 2.5, 4096, 3, -1);
    cr_assert_eq(t->n, 2);
    cr_assert_eq(t->ev[1].step, 2);
    cr_assert_eq(t->ev[1].bucket, 3);
    cr_assert_eq(t->ev[1].lane, LANE_COMM);
    for (int i = 0; i < 5; i++)
        trace_phase(t, PH_BACKWARD, 2.0, 3.0);
    cr_assert_eq(t->n, 4, "capacity holds");
    cr_assert_eq(t->dropped, 3);
    trace_rec_t *c = trace_rec_clone(t);
    cr_assert_eq(c->n, 4);
    cr_assert_eq(memcmp(c->ev, t->ev, 4 * sizeof *t->ev), 0);
    trace_rec_free(c);
    /* only the first TRACE_MAX_STEPS timed steps */
    trace_rec_t *big = trace_rec_create(trace_capacity(1, 0), 0);
    for (long g = 0; g < TRACE_MAX_STEPS + 10; g++) {
        trace_step_begin(big, g, true);
        trace_step_end(big, (double)g, g + 0.5);
    }
    cr_assert_eq(big->n, TRACE_MAX_STEPS);
    cr_assert_eq(big->dropped, 0);
    cr_assert_eq(trace_capacity(1 << 16, 1 << 20), TRACE_MAX_EVENTS, "bounded");
    /* a step meter with a recorder stamps its laps, and the step, once the
     * step's times are known (at its end, on the host clock) */
    device_stats_t st = {0};
    step_meter_t m;
    char err[ERR_LEN];
    cr_assert_eq(step_meter_init(&m, &(step_meter_sinks_t){.dev = &st, .trace = t}, err), DDP_OK);
    t->n = 0;
    t->steps = 0;
    step_meter_begin(&m, 0, true, false);
    step_meter_lap(&m, PH_OPTIM);
    cr_assert_eq(t->n, 0, "nothing is stamped before the step's times are known");
    cr_assert_eq(step_meter_end(&m, &(step_end_t){.samples = 1}, err), DDP_OK, "%s", err);
    /* (a busy machine may add the lap's descheduled time after it: a
     * sampled step reads the run queue) */
    int k = t->n == 3 && t->ev[1].kind == PH_DESCHED ? 1 : 0;
    cr_assert_eq(t->n, 2 + k);
    cr_assert_eq(t->ev[0].kind, PH_OPTIM);
    cr_assert_eq(t->ev[1 + k].kind, TR_STEP);
    step_meter_free(&m);
    trace_rec_free(big);
    trace_rec_free(t);
}

// ---------------------------------------------------------------------------
// compare mode on crafted results

/* A run with the given mode, devices, throughput, step time and params. */
static void craft(run_result_t *r, mode_t_ mode, int ndev, double sps, double step_s,
                  const float *params, size_t n)
{
    result_init(r);
    r->mode = mode;
    r->backend = BACKEND_CPU;
    r->ndev = ndev;
    r->steps = 12;
    r->warmup_steps = 2;
    for (int i = 0; i < 10; i++)
        step_times_add(&r->times, step_s, 0);
    r->times.timed_samples = (long)(sps * r->times.timed_s + 0.5);
    r->samples_per_s = sps;
    for (int d = 0; d < ndev; d++) {
        r->dev[d].device_id = d;
        r->dev[d].rows = 10 * 256 / ndev;
        r->dev[d].mem_peak = (size_t)(d + 1) << 20;
    }
    r->params = malloc(n * sizeof(float));
    memcpy(r->params, params, n * sizeof(float));
    r->nparams = n;
    r->final_loss = 0.25;
    result_finish(r);
}

/* per-step milliseconds into a device's summed phase times (10 timed steps) */
static void ms(run_result_t *r, int d, phase_t p, double per_step_ms)
{
    r->dev[d].phase_s[p] = 10 * per_step_ms * 1e-3;
}

static void crafted_three(run_result_t runs[3], double ddp_noise)
{
    enum { N = 1000 };
    float base[N], near[N], far[N];
    for (int i = 0; i < N; i++) {
        base[i] = 0.01f * (float)((i % 17) - 8);
        near[i] = base[i] * (1.0f + 1e-7f);
        far[i] = base[i] * (1.0f + (float)ddp_noise);
    }
    /* single 20 ms; DP 2 devices 16 ms; DDP 2 devices 11 ms */
    craft(&runs[0], MODE_SINGLE, 1, 12800.0, 0.020, base, N);
    ms(&runs[0], 0, PH_FORWARD, 6.0);
    ms(&runs[0], 0, PH_LOSS, 1.0);
    ms(&runs[0], 0, PH_BACKWARD, 12.0);
    ms(&runs[0], 0, PH_OPTIM, 1.0);
    craft(&runs[1], MODE_DP, 2, 15360.0, 0.016, near, N);
    ms(&runs[1], 0, PH_REPLICATE, 4.1);
    ms(&runs[1], 0, PH_FORWARD, 3.0);
    ms(&runs[1], 0, PH_LOSS, 1.2);
    ms(&runs[1], 0, PH_BACKWARD, 6.0);
    ms(&runs[1], 0, PH_COMM_EXPOSED, 0.7);
    ms(&runs[1], 0, PH_OPTIM, 1.0);
    ms(&runs[1], 1, PH_FORWARD, 3.0);
    ms(&runs[1], 1, PH_BACKWARD, 6.0);
    ms(&runs[1], 1, PH_IDLE, 7.0);
    craft(&runs[2], MODE_DDP, 2, 23272.7, 0.011, far, N);
    for (int d = 0; d < 2; d++) {
        ms(&runs[2], d, PH_FORWARD, 3.0);
        ms(&runs[2], d, PH_LOSS, 0.5);
        ms(&runs[2], d, PH_BACKWARD, 6.0);
        ms(&runs[2], d, PH_COMM_HIDDEN, 3.2);
        ms(&runs[2], d, PH_COMM_EXPOSED, 0.8);
        ms(&runs[2], d, PH_OPTIM, 0.7);
    }
}

/* A wait is the machine's as far as a peer's descheduled time explains it
 * (docs/results.md): DP's device 0 off its core 5 ms a step, its peer's 7 ms
 * idle is 2 ms the strategy's; DDP's and DP's steps then differ by the
 * machine's time alone, and the verdict says so first. */
Test(report_compare, waits_give_the_machine_its_share)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    ms(&runs[1], 0, PH_DESCHED, 5.0);
    ms(&runs[1], 0, PH_BACKWARD, 1.0); /* the step stays 16 ms */
    char why[2048], verdict[2048];
    report_compare_why(why, sizeof why, NULL, runs, 3);
    cr_assert(strstr(why, "the other devices sit idle 2.00 ms per step"), "%s", why);
    cr_assert(strstr(why, "and 5.00 ms more waiting for a device that was descheduled (the "
                          "machine's)"), "%s", why);
    report_compare_verdict(verdict, sizeof verdict, NULL, runs, 3);
    cr_assert(strstr(verdict, "This run measured the machine, not the strategies: the machine "
                              "took 0 us of single's 20.00 ms step, 5.00 ms of DP's 16.00 ms "
                              "step, 0 us of DDP's 11.00 ms step"), "%s", verdict);
    cr_assert_null(strstr(verdict, "is faster by"), "%s", verdict);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

static char *compare_text(run_result_t runs[3])
{
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--model mlp-small --backend cpu --gpus 0,1", err), DDP_OK, "%s", err);
    report_ctx_t ctx = {.cfg = &c};
    mem_t m;
    mem_open(&m);
    report_compare(m.f, &ctx, runs, 3);
    return mem_close(&m);
}

/* compare --zero 1,3: a column per stage beside plain ddp, named zero-N, the
 * heading says which, and the memory rows show what each stage shards
 * (parameters and gradients as well as the state). */
Test(report_compare, a_column_per_zero_stage)
{
    run_result_t runs[5];
    crafted_three(runs, 0.0);
    for (int k = 0; k < 2; k++) {
        result_init(&runs[3 + k]);
        runs[3 + k] = runs[2];
        runs[3 + k].zero = k == 0 ? 1 : 3;
        runs[3 + k].params = NULL; /* not owned twice */
        runs[3 + k].dev[0].mem_split[MEM_PARAMS] = 1000 + k;
        runs[3 + k].dev[0].mem_split[MEM_GRADS] = 500;
    }
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--model mlp-small --backend cpu --gpus 0,1 --zero 1,3", err),
                 DDP_OK, "%s", err);
    report_ctx_t ctx = {.cfg = &c};
    mem_t m;
    mem_open(&m);
    report_compare(m.f, &ctx, runs, 5);
    char *txt = mem_close(&m);
    const char *nl = strchr(txt, '\n');
    cr_assert(nl && strstr(txt, ", ZeRO stage 1, 3 beside ddp") &&
                  strstr(txt, ", ZeRO stage 1, 3 beside ddp") < nl, "%s", txt);
    cr_assert(strstr(txt, "zero-1") && strstr(txt, "zero-3"), "%s", txt);
    cr_assert(strstr(txt, "\n    parameters ") && strstr(txt, "\n    gradients "), "%s", txt);
    free(txt);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

Test(report_compare, side_by_side_agree_and_differ)
{
    run_result_t runs[3];
    crafted_three(runs, 1e-2);
    char *txt = compare_text(runs);
    const char *must[] = {
        "compare: mlp-small on cpu, 2 devices, global batch 256",
        "single", "dp", "ddp",
        "1.00x", "1.20x", "1.82x",           /* speed-ups */
        "100%", "60%", "91%",                /* scaling efficiency */
        "parameters: dp vs single agree",
        "parameters: ddp vs single DIFFER by 1.0e-02",
        "dp dev0", "dp others", "ddp dev0",
        /* the three sentences */
        "On 2 devices DP runs 1.20x single and DDP 1.82x: DDP is faster by 51%, beyond one run's "
        "noise (10%).",
        "DP's device 0 works alone 7.00 ms of its 16.00 ms step (44%: replicate, gather+loss, "
        "optimizer); the others idle 7.00 ms.",
        "DDP ran 80% of its all-reduce (3.20 ms) during backward and waited 800 us for the rest; "
        "what overlap saved is not measured (--no-overlap).",
    };
    char flat[8192];
    /* the sentences are wrapped: compare on a copy with the line breaks and indents undone */
    size_t k = 0;
    for (const char *p = txt; *p && k < sizeof flat - 1; p++) {
        if (*p == '\n') {
            while (p[1] == ' ' && p[2] == ' ')
                p++;
            flat[k++] = ' ';
            if (p[1] == ' ')
                p++;
            continue;
        }
        flat[k++] = *p;
    }
    flat[k] = 0;
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_expect(strstr(txt, must[i]) || strstr(flat, must[i]), "'%s' not in:\n%s", must[i], txt);
    /* the long narrative is --explain's */
    cr_assert_null(strstr(flat, "shorter than"), "%s", txt);
    free(txt);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

Test(report_compare, agreement_rules)
{
    run_result_t runs[3];
    crafted_three(runs, 3e-6); /* every parameter off by 3e-6: summation-order noise */
    report_stats_t s;
    report_stats(&runs[2], &runs[0], &s);
    cr_assert(s.params_compared);
    cr_assert(s.agree, "rel L2 %.2g max %.2g", s.rel_l2, s.max_rel);
    /* one parameter far off (a bug confined to one tensor) is caught by the max */
    runs[2].params[7] += 0.5f;
    report_stats(&runs[2], &runs[0], &s);
    cr_assert_not(s.agree);
    cr_assert(s.max_rel > REPORT_AGREE_MAX);
    /* different parameter counts: not compared, never "agree" */
    runs[2].nparams--;
    report_stats(&runs[2], &runs[0], &s);
    cr_assert_not(s.params_compared);
    cr_assert_not(s.agree);
    runs[2].nparams++;
    char *txt = compare_text(runs);
    cr_assert(strstr(txt, "ddp vs single DIFFER"), "%s", txt);
    free(txt);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* The verdict's measure follows the optimizer, and catches a true difference
 * both ways. */
Test(report_compare, verdict_measure_follows_the_optimizer)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    report_stats_t s;
    /* 12 steps at lr 0.003: a parameter can move at most ~0.036 */
    for (int i = 0; i < 3; i++) {
        runs[i].optim = OPTIM_ADAM;
        runs[i].lr = 0.003;
    }
    /* Adam's noise: a few near-zero parameters (0.01 * (i%17 - 8) is 0 at
     * i = 8) off by 1e-5 absolute, 1e-2 relative to the 1e-3 floor: the old
     * worst-parameter rule called that DIFFER; it is 3e-4 of lr x steps */
    runs[2].params[8] += 1e-5f;
    runs[2].params[25] -= 1e-5f;
    report_stats(&runs[2], &runs[0], &s);
    cr_assert(s.adam);
    cr_assert_gt(s.max_rel, 5e-3);
    cr_assert_lt(s.max_step, 1e-3);
    cr_assert(s.agree, "rel L2 %.2g, max_step %.2g", s.rel_l2, s.max_step);
    char *txt = compare_text(runs);
    cr_assert(strstr(txt, "ddp vs single agree (relative L2 distance"), "%s", txt);
    cr_assert(strstr(txt, "of lr x steps)"), "%s", txt);
    free(txt);
    /* a true difference confined to one parameter, too small for the L2:
     * at lr 1e-6 no parameter can move more than 1.2e-5 in 12 steps, so one
     * off by 1e-5 did not get there by rounding */
    runs[0].lr = 1e-6;
    runs[2].params[25] = runs[0].params[25];
    report_stats(&runs[2], &runs[0], &s);
    cr_assert_lt(s.rel_l2, REPORT_AGREE_L2);
    cr_assert_gt(s.max_step, REPORT_AGREE_STEP);
    cr_assert_not(s.agree, "a parameter 0.8 of lr x steps off must DIFFER (L2 %.2g)", s.rel_l2);
    /* and a difference of the whole vector is caught by the L2 whatever the optimizer */
    runs[0].lr = 0.003;
    for (size_t i = 0; i < runs[2].nparams; i++)
        runs[2].params[i] = runs[0].params[i] * (1.0f + 1e-4f);
    report_stats(&runs[2], &runs[0], &s);
    cr_assert_lt(s.max_step, REPORT_AGREE_STEP);
    cr_assert_not(s.agree, "a vector 1e-4 off must DIFFER");
    /* SGD: the same noise is far beyond rounding of a linear update */
    for (size_t i = 0; i < runs[2].nparams; i++)
        runs[2].params[i] = runs[0].params[i];
    runs[2].params[8] = runs[0].params[8] + 1e-5f;
    runs[2].optim = runs[0].optim = OPTIM_SGD;
    report_stats(&runs[2], &runs[0], &s);
    cr_assert_not(s.adam);
    cr_assert_not(s.agree, "SGD: worst parameter %.2g must DIFFER", s.max_rel);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* Why parameters differ: another stream, ReLU's kink, or neither. */
Test(report_compare, differ_names_the_cause)
{
    run_result_t runs[3];
    crafted_three(runs, 1e-2);
    config_t c;
    char err[ERR_LEN], why[1024];
    cr_assert_eq(tu_parse(&c, "--model seed-logreg --backend cpu --gpus 0,1,2 --batch 12", err),
                 DDP_OK, "%s", err);
    dataset_t d = {.n = 100};
    model_spec_t spec;
    cr_assert_eq(config_model_spec(&c, &spec, err), DDP_OK);
    report_ctx_t ctx = {.cfg = &c, .spec = &spec, .data = &d};
    runs[0].stream_replicas = 1, runs[0].epoch_samples = 100;
    runs[2].stream_replicas = 3, runs[2].epoch_samples = 102;
    report_differ_cause(why, sizeof why, &ctx, &runs[2], &runs[0], false);
    cr_assert(strstr(why, "not the same samples: ddp trained on 102 samples an epoch: "
                          "DistributedSampler over 3 ranks pads 100 samples to 102, repeating "
                          "the first 2 each epoch; single trained on 100 samples an epoch"),
              "%s", why);
    cr_assert(strstr(why, "--drop-last would make the streams equal here"), "%s", why);
    cr_assert_null(strstr(why, "ReLU"), "seed-logreg has no hidden layer: %s", why);
    /* the same stream: a hidden ReLU layer is the known cause, else a real difference */
    runs[2].stream_replicas = 1, runs[2].epoch_samples = 100;
    report_differ_cause(why, sizeof why, &ctx, &runs[2], &runs[0], false);
    cr_assert(strstr(why, "the modes trained differently"), "%s", why);
    cr_assert_eq(tu_parse(&c, "--model seed-logreg --layers 10,8,1 --act relu --backend cpu "
                              "--gpus 0,1,2 --batch 12",
                          err),
                 DDP_OK, "%s", err);
    cr_assert_eq(config_model_spec(&c, &spec, err), DDP_OK);
    report_differ_cause(why, sizeof why, &ctx, &runs[2], &runs[0], false);
    cr_assert(strstr(why, "ReLU's kink"), "%s", why);
    /* the note on the stream every mode read */
    runs[0].stream_replicas = 3, runs[0].epoch_samples = 102;
    report_stream_note(why, sizeof why, &ctx, &runs[0]);
    cr_assert(strstr(why, "samples: DistributedSampler over 3 ranks pads 100 samples to 102"),
              "%s", why);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* What every device copies at once is not device 0's serial work, and the
 * others' idle beyond device 0's serial work is time device 0 waits too: the
 * sentences are checked against the numbers they come from. */
Test(report_compare, dp_attributes_shared_copies_and_waits)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    /* device 1 replicates and reduces its part at the same time as device 0 */
    ms(&runs[1], 1, PH_REPLICATE, 4.1);
    ms(&runs[1], 1, PH_COMM_EXPOSED, 0.7);
    ms(&runs[1], 1, PH_IDLE, 3.0);
    ms(&runs[1], 0, PH_IDLE, 2.0);
    char why[2048];
    report_compare_why(why, sizeof why, NULL, runs, 3);
    /* alone: gather+loss 1.2 + optimizer 1.0 = 2.2 of 16 ms */
    cr_assert(strstr(why, "DP's device 0 works alone 2.20 ms of its 16.00 ms step (14%: "
                          "gather+loss 1.20 ms, optimizer 1.00 ms) while the other devices wait"),
              "%s", why);
    cr_assert(strstr(why, "every device spends 4.80 ms at the same time on what DP copies each "
                          "step (replicate 4.10 ms, reduce 700 us)"),
              "%s", why);
    cr_assert(strstr(why, "the other devices sit idle 3.00 ms per step, 2.20 ms of it while "
                          "device 0 works alone and 800 us at hand-offs where device 0 waits too "
                          "(its idle 2.00 ms"),
              "%s", why);
    cr_assert_null(strstr(why, "replicate 4.10 ms, gather"), "%s", why);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* The reason for the verdict: what splitting saved against what each mode
 * adds, a tiny model named as such, and the memory story. */
Test(report_compare, reason_weighs_compute_against_synchronisation_and_memory)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    for (int d = 0; d < 2; d++) { /* DP's device 0 holds the optimizer and the batch */
        runs[1].dev[d].mem_split[MEM_PARAMS] = runs[1].dev[d].mem_split[MEM_GRADS] = 1 << 20;
        runs[1].dev[d].mem_split[MEM_ACTS] = 1 << 19;
        runs[2].dev[d].mem_split[MEM_PARAMS] = runs[2].dev[d].mem_split[MEM_GRADS] = 1 << 20;
        runs[2].dev[d].mem_split[MEM_OPTIM] = 2 << 20;
        runs[2].dev[d].mem_peak = 4 << 20;
    }
    runs[1].dev[0].mem_split[MEM_OPTIM] = 2 << 20;
    runs[1].dev[0].mem_split[MEM_ACTS] = 1 << 20;
    runs[1].dev[0].mem_peak = 5 << 20;
    runs[1].dev[1].mem_peak = (5 << 19);
    config_t c;
    char err[ERR_LEN], why[4096];
    cr_assert_eq(tu_parse(&c, "--model mlp-small --backend cpu --gpus 0,1", err), DDP_OK, "%s", err);
    report_ctx_t ctx = {.cfg = &c};
    report_compare_reason(why, sizeof why, &ctx, runs, 3);
    /* single 18 ms of forward and backward; DDP 9 ms + 0.5 loss each */
    cr_assert(strstr(why, "Why DDP is 1.82x single: splitting the batch over 2 devices took "
                          "forward and backward from 19.00 ms to 9.50 ms per step (saving "
                          "9.50 ms), while what DDP adds costs 500 us per step on device 0 "
                          "(800 us more comm exposed, 300 us less optimizer)"),
              "%s", why);
    /* the parts add up to the whole: DP's 5 ms are 4.1 + 0.7 and the 200 us
     * of smaller parts, named as the rest (never a part above its whole) */
    cr_assert(strstr(why, "while what DP adds costs 5.00 ms per step on device 0 (4.10 ms more "
                          "replicate and 700 us more reduce, 200 us more in the rest)"),
              "%s", why);
    /* the memory is the table's, not a sentence's */
    cr_assert_null(strstr(why, "Memory:"), "%s", why);
    cr_assert_null(strstr(why, "tiny model"), "%s", why);
    /* compare's memory rows: DP's device 0 against the others, DDP's alike */
    char *txt = compare_text(runs);
    cr_assert(strstr(txt, "peak memory (MiB)"), "%s", txt);
    const char *row = strstr(txt, "    optimizer state");
    cr_assert_not_null(row, "%s", txt);
    double v[5];
    cr_assert_eq(sscanf(row + strlen("    optimizer state"), "%lf %lf %lf %lf", &v[0], &v[1], &v[2],
                        &v[3]), 4, "%s", row);
    /* single (none crafted), dp dev0, dp others, ddp dev0 */
    cr_assert_float_eq(v[1], 2.0, 1e-9, "%s", row);
    cr_assert_float_eq(v[2], 0.0, 1e-9, "%s", row);
    cr_assert_float_eq(v[3], 2.0, 1e-9, "%s", row);
    free(txt);
    /* a tiny model's peaks, under 1 MiB, in KiB: not a table of 0.00 */
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < runs[i].ndev; d++) {
            runs[i].dev[d].mem_peak >>= 10;
            for (int m = 0; m < MEM_KINDS; m++)
                runs[i].dev[d].mem_split[m] >>= 10;
        }
    txt = compare_text(runs);
    cr_assert(strstr(txt, "peak memory (KiB)"), "%s", txt);
    row = strstr(txt, "    optimizer state");
    cr_assert_not_null(row, "%s", txt);
    cr_assert_eq(sscanf(row + strlen("    optimizer state"), "%lf %lf %lf %lf", &v[0], &v[1], &v[2],
                        &v[3]), 4, "%s", row);
    cr_assert_float_eq(v[1], 2.0, 1e-9, "%s", row);
    cr_assert_float_eq(v[3], 2.0, 1e-9, "%s", row);
    free(txt);
    /* a tiny model: DDP's exposed all-reduce alone outweighs single's whole step */
    for (int d = 0; d < 2; d++)
        ms(&runs[2], d, PH_COMM_EXPOSED, 30.0);
    long samples = runs[2].times.timed_samples;
    memset(&runs[2].times, 0, sizeof runs[2].times);
    for (int i = 0; i < 10; i++)
        step_times_add(&runs[2].times, 0.040, 0);
    runs[2].times.timed_samples = samples;
    report_compare_reason(why, sizeof why, &ctx, runs, 3);
    cr_assert(strstr(why, "a tiny model, whose whole step computes in 20.00 ms on one device"),
              "%s", why);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* The crossover moves with what the all-reduce costs: free communication
 * wins at once, a latency that no growth amortises never does. */
Test(report_compare, crossover_follows_the_measured_costs)
{
    predict_in_t in;
    memset(&in, 0, sizeof in);
    collperf_coll_t ar;
    memset(&ar, 0, sizeof ar);
    ar.kind = 1; /* all-reduce */
    ar.npoints = 2;
    ar.pt[0].bytes = 1024, ar.pt[1].bytes = 1 << 20;
    /* 10 us + bytes / 1 GB/s */
    ar.pt[0].time_s[0] = 10e-6 + 1024 / 1e9, ar.pt[1].time_s[0] = 10e-6 + (1 << 20) / 1e9;
    in.all_reduce = &ar;
    in.k0 = 2;
    in.batch = 256;
    in.accum = 1;
    in.nbuckets = 1;
    in.param_bytes = in.bucket_bytes[0] = 4e6;
    in.phase_s[PH_BACKWARD] = 1e-3;
    double scale;
    /* single 10 ms of which 9 ms grow; DDP 6 ms of which 4.5 ms grow: wins now */
    double p = predict_crossover(&in, 2, 10e-3, 9e-3, 6e-3, 4.5e-3, &scale);
    cr_assert_gt(p, 0);
    cr_assert_leq(scale, 1.0);
    /* DDP 12 ms of which 4.5 ms grow, and its all-reduce of 4 MB grows by 4 ms per
     * model: 10 + 9 (s-1) = 12 + 8.5 (s-1) at s = 5; the grid's next point is 2^(10/4) */
    p = predict_crossover(&in, 2, 10e-3, 9e-3, 12e-3, 4.5e-3, &scale);
    cr_assert(scale > 5.0 && scale < 5.7, "scale %g", scale);
    cr_assert_float_eq(p, scale * 1e6, 1.0);
    /* DDP saves nothing: never */
    p = predict_crossover(&in, 2, 10e-3, 9e-3, 12e-3, 9e-3, &scale);
    cr_assert_lt(p, 0);
}

Test(report_compare, why_handles_ddp_slower_and_no_overlap)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    /* DDP without overlap and slower than DP */
    for (int d = 0; d < 2; d++) {
        runs[2].dev[d].phase_s[PH_COMM_HIDDEN] = 0.0;
        ms(&runs[2], d, PH_COMM_EXPOSED, 9.0);
    }
    long samples = runs[2].times.timed_samples;
    memset(&runs[2].times, 0, sizeof runs[2].times);
    for (int i = 0; i < 10; i++)
        step_times_add(&runs[2].times, 0.020, 0);
    runs[2].times.timed_samples = samples;
    runs[2].samples_per_s = 256.0 / 0.020;
    char why[2048];
    report_compare_why(why, sizeof why, NULL, runs, 3);
    cr_assert(strstr(why, "DDP overlaps none of its all-reduce with backward: every step waits "
                          "9.00 ms"), "%s", why);
    /* 20% apart: beyond one run's 10% */
    cr_assert(strstr(why, "DP's step is 4.00 ms shorter than DDP's: DP is faster by 20%, beyond "
                          "one run's noise (10%); on device 0 DDP spends 8.30 ms more in comm "
                          "exposed"),
              "%s", why);
    /* 5% apart: within it, so no "shorter" */
    memset(&runs[2].times, 0, sizeof runs[2].times);
    for (int i = 0; i < 10; i++)
        step_times_add(&runs[2].times, 0.0168, 0);
    runs[2].times.timed_samples = samples;
    runs[2].samples_per_s = 256.0 / 0.0168;
    runs[1].samples_per_s = 256.0 / 0.016;
    report_compare_why(why, sizeof why, NULL, runs, 3);
    cr_assert_null(strstr(why, "shorter than"), "%s", why);
    cr_assert(strstr(why, "DP's and DDP's steps differ by 800 us; DP and DDP differ by 5%, "
                          "within one run's noise (10%; --repeat 5 gives intervals)"),
              "%s", why);
    /* the buffer bound holds */
    char tiny[16];
    report_compare_why(tiny, sizeof tiny, NULL, runs, 3);
    cr_assert_eq(strlen(tiny), 15);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* A default compare fits one screen: the table, three sentences, the notes;
 * the long narrative and the memory by purpose only under --explain. */
Test(report_compare, fits_one_screen_and_explain_adds_the_narrative)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    for (int i = 0; i < 3; i++)
        for (int d = 0; d < runs[i].ndev; d++) {
            runs[i].dev[d].mem_split[MEM_PARAMS] = runs[i].dev[d].mem_split[MEM_GRADS] = 1 << 20;
            runs[i].dev[d].mem_split[MEM_ACTS] = runs[i].dev[d].mem_split[MEM_COMM] = 1 << 18;
            runs[i].dev[d].mem_split[MEM_OPTIM] = i == 1 && d > 0 ? 0 : 2 << 20;
        }
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--model mlp-small --backend cpu --gpus 0,1", err), DDP_OK, "%s", err);
    report_ctx_t ctx = {.cfg = &c};
    mem_t m;
    mem_open(&m);
    report_compare(m.f, &ctx, runs, 3);
    char *txt = mem_close(&m);
    int lines = 0;
    for (const char *p = txt; *p; p++)
        lines += *p == '\n';
    cr_assert_leq(lines, 40, "%d lines:\n%s", lines, txt);
    cr_assert(strstr(txt, "note: a CPU has no GIL, per-replica Python or NVLink"), "%s", txt);
    cr_assert_null(strstr(txt, "Why DDP is"), "%s", txt);
    cr_assert_null(strstr(txt, "    activations"), "%s", txt);
    free(txt);
    c.explain = true;
    mem_open(&m);
    report_compare(m.f, &ctx, runs, 3);
    txt = mem_close(&m);
    cr_assert(strstr(txt, "Why DDP is"), "%s", txt);
    cr_assert(strstr(txt, "    activations"), "%s", txt);
    free(txt);
    /* a run the machine disturbed: one note, from its record, for one run only */
    char notes[4][256];
    cr_assert_eq(report_compare_notes(&ctx, runs, 3, notes, 4), 1);
    disturb_t *d = &runs[2].machine;
    d->known = d->disturbed = true;
    d->load_start = d->load_end = NAN;
    snprintf(d->why, sizeof d->why, "others took 0.62 of the run's 2 cores");
    cr_assert_eq(report_compare_notes(&ctx, runs, 3, notes, 4), 2);
    cr_assert_str_eq(notes[1], "busy machine (others took 0.62 of the run's 2 cores): one run "
                               "may not repeat; use --repeat 5");
    static repeat_t rep[3];
    const repeat_t *rp[3] = {&rep[0], &rep[1], &rep[2]};
    for (int i = 0; i < 3; i++)
        rep[i].n = 2;
    ctx.reps = rp;
    cr_assert_eq(report_compare_notes(&ctx, runs, 3, notes, 4), 1, "--repeat: %s", notes[1]);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* With --repeat, DP and DDP are told apart by their intervals, not by one run's noise. */
Test(report_compare, repeat_intervals_decide_which_is_faster)
{
    run_result_t runs[3];
    crafted_three(runs, 0.0);
    static repeat_t rep[3];
    memset(rep, 0, sizeof rep);
    const double mid[3] = {12800.0, 15360.0, 16000.0};
    for (int i = 0; i < 3; i++) {
        rep[i].n = 5;
        for (int j = 0; j < 5; j++) /* +-1% around the median */
            rep[i].run[j].samples_per_s = mid[i] * (1.0 + 0.005 * (j - 2));
    }
    const repeat_t *rp[3] = {&rep[0], &rep[1], &rep[2]};
    config_t c;
    char err[ERR_LEN], why[4096];
    cr_assert_eq(tu_parse(&c, "--model mlp-small --backend cpu --gpus 0,1", err), DDP_OK, "%s", err);
    report_ctx_t ctx = {.cfg = &c, .reps = rp};
    /* 4% apart, within one run's 10%, but the intervals (+-1%) do not overlap;
     * the speed-ups are the medians', not the last run's (which --repeat
     * quoted: 0.73x above a median of 0.81x) */
    runs[1].samples_per_s = 9000.0, runs[2].samples_per_s = 11000.0;
    report_compare_verdict(why, sizeof why, &ctx, runs, 3);
    cr_assert(strstr(why, "DP runs 1.20x single and DDP 1.25x (the medians over 5 runs)"), "%s",
              why);
    cr_assert(strstr(why, "DDP is faster by 4% (their 95% intervals over 5 runs do not overlap)"),
              "%s", why);
    runs[1].samples_per_s = mid[1], runs[2].samples_per_s = mid[2];
    /* overlapping intervals: neither, whatever the medians */
    for (int j = 0; j < 5; j++)
        rep[2].run[j].samples_per_s = mid[1] * (1.0 + 0.01 * (j - 2));
    report_compare_verdict(why, sizeof why, &ctx, runs, 3);
    cr_assert(strstr(why, "their 95% intervals over 5 runs overlap: neither is faster here"), "%s",
              why);
    cr_assert_null(strstr(why, "is faster by"), "%s", why);
    /* one run: 4% is within its noise, and it says how to tell */
    ctx.reps = NULL;
    report_compare_verdict(why, sizeof why, &ctx, runs, 3);
    cr_assert(strstr(why, "DP and DDP differ by 4%, within one run's noise (10%; --repeat 5 gives "
                          "intervals)"), "%s", why);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

/* --repeat's table: a phase whose median is about 0 (skew) gives its
 * interval's ends, not +-10000% glued to the next column; the runs a busy
 * machine disturbed are said under it, on the same stream. */
Test(report_text, repeat_table_keeps_its_columns_and_says_the_busy_runs)
{
    static repeat_t rep[2];
    memset(rep, 0, sizeof rep);
    for (int i = 0; i < 2; i++) {
        rep[i].n = 3;
        for (int j = 0; j < 3; j++) {
            run_summary_t *s = &rep[i].run[j];
            s->samples_per_s = 1000.0 + j;
            s->step_mean_s = 0.01;
            s->mem_peak_bytes = 1048576.0;
            s->phase_s[PH_FORWARD] = 0.004;
            s->phase_s[PH_SKEW] = 2e-5 * (j - 1) + 2e-6; /* about 0, either sign */
        }
    }
    rep[1].run[0].machine = (disturb_t){.disturbed = true, .contention = 0.6};
    const repeat_t *rp[2] = {&rep[0], &rep[1]};
    const mode_t_ modes[2] = {MODE_SINGLE, MODE_DDP};
    mem_t m;
    mem_open(&m);
    report_repeat(m.f, rp, modes, 2);
    char *txt = mem_close(&m);
    const char *skew = strstr(txt, "skew (ms)");
    cr_assert_not_null(skew, "%s", txt);
    char line[256];
    snprintf(line, sizeof line, "%.*s", (int)strcspn(skew, "\n"), skew);
    cr_assert_null(strchr(line, '%'), "a relative interval of a figure about 0: %s", line);
    cr_assert(strstr(line, "0.002 -0.048..0.052     "), "%s", line);
    cr_assert(strstr(txt, "note: 1 of the 3 ddp runs were disturbed (other processes took 60% of "
                          "their cores, the median), kept"), "%s", txt);
    cr_assert_null(strstr(txt, "single runs were disturbed"), "%s", txt);
    free(txt);
}

// ---------------------------------------------------------------------------
// the table and --explain

Test(report_text, table_and_explain_of_a_real_run)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 6 --accum 2 --backend cpu --quiet");
    mem_t m;
    mem_open(&m);
    report_result(m.f, &rr.ctx, &rr.res, NULL);
    report_explain(m.f, &rr.ctx, &rr.res);
    char *txt = mem_close(&m);
    const char *must[] = {"result: single on cpu, 1 device, global batch 20 (accumulated), sgd, "
                          "1 BLAS thread, 6 steps",
                          "throughput", "samples/s", "p50", "p95", "device 0", "forward",
                          "backward", "optimizer", "step (wall)", "peak memory", "final loss",
                          "checksum",
                          "explain: step 4 of single on cpu, 1 device (the middle timed step: ",
                          "the timed steps' median ",
                          "The global batch of 40 rows went whole to device 0",
                          "3.1 KiB of sample rows", /* 40 rows x (10 + 10) floats */
                          "2 operations", "Nothing to synchronise", "110 parameters"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_expect(strstr(txt, must[i]), "'%s' not in:\n%s", must[i], txt);
    cr_assert(rr.res.story.filled);
    cr_assert_eq(rr.res.dev[0].first_rows, 40);
    cr_assert_eq(rr.res.story.move[MOVE_BATCH].bytes, 40u * 20 * sizeof(float));
    double sum = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        sum += rr.res.dev[0].first_phase_s[p];
    cr_assert(sum > 0.0 && sum <= rr.res.story.step_s * 1.0001, "phases %g of a %g step", sum,
              rr.res.story.step_s);
    free(txt);
    real_free(&rr);
}

static char *explain_text(const real_run_t *rr);

/* --explain tells the middle timed step, not step 1 (which pays one-time
 * costs): 2 warm-up steps of 9, timed steps 2..8, told step 5 (0-based); its
 * time is one of the timed steps', and its phases are that step's alone. */
Test(report_text, explain_tells_the_middle_timed_step)
{
    real_run_t rr;
    real_run(&rr, "--mode single --model seed-linear --steps 9 --backend cpu --quiet");
    const step_story_t *st = &rr.res.story;
    cr_assert(st->filled);
    cr_assert_eq(st->step, 5, "told step %ld", st->step);
    cr_assert(st->step_s >= rr.res.times.min_s && st->step_s <= rr.res.times.max_s,
              "told step %g s outside the timed steps' %g..%g", st->step_s, rr.res.times.min_s,
              rr.res.times.max_s);
    double sum = 0.0;
    for (int p = 0; p < PH_COUNT; p++)
        sum += rr.res.dev[0].first_phase_s[p];
    cr_assert_float_eq(sum, st->step_s, 1e-3 * st->step_s, "its phases %g, the step %g", sum,
                       st->step_s);
    char *txt = explain_text(&rr);
    cr_assert(strstr(txt, "explain: step 6 of single on cpu, 1 device (the middle timed step"),
              "%s", txt);
    cr_assert_null(strstr(txt, "step 1 "), "%s", txt);
    free(txt);
    real_free(&rr);
    /* without warm-up steps, still not the first step */
    real_run(&rr, "--mode dp --gpus 0,1 --model seed-linear --steps 4 --warmup-steps 0 "
                  "--backend cpu --quiet");
    cr_assert(rr.res.story.filled);
    cr_assert_eq(rr.res.story.step, 1);
    real_free(&rr);
}

static char *explain_text(const real_run_t *rr)
{
    mem_t m;
    mem_open(&m);
    report_explain(m.f, &rr->ctx, &rr->res);
    return mem_close(&m);
}

Test(report_text, explain_of_a_dp_run_names_rows_and_bytes_per_device)
{
    /* batch 20 over 3 devices, 2 micro-batches: chunks 7, 7, 6 rows each time */
    real_run_t rr;
    real_run(&rr, "--mode dp --gpus 0,1,2 --model seed-linear --steps 4 --accum 2 --backend cpu "
                  "--quiet");
    const step_story_t *st = &rr.res.story;
    cr_assert(st->filled);
    const int k = 3, accum = 2, batch = 20;
    size_t pbytes = rr.spec.nparams * sizeof(float);
    int in = model_in_dim(&rr.spec), out = model_out_dim(&rr.spec);
    long peers_rows = 0;
    for (int d = 0; d < k; d++) {
        dp_chunk_t ch = dp_chunk(batch, k, d);
        cr_assert_eq(rr.res.dev[d].first_rows, (long)ch.rows * accum, "device %d rows", d);
        if (d > 0)
            peers_rows += ch.rows * accum;
    }
    cr_assert_eq(st->move[MOVE_REPLICATE].bytes, (k - 1) * pbytes, "a replica per other device");
    cr_assert_eq(st->move[MOVE_REDUCE].bytes, (k - 1) * pbytes, "a gradient per other device");
    cr_assert_eq(st->move[MOVE_SCATTER].bytes, (uint64_t)peers_rows * in * sizeof(float));
    cr_assert_eq(st->move[MOVE_GATHER].bytes, (uint64_t)peers_rows * out * sizeof(float));
    cr_assert_eq(st->move[MOVE_GRAD_OUT].bytes, (uint64_t)peers_rows * out * sizeof(float));
    cr_assert_eq(st->move[MOVE_BATCH].bytes,
                 (uint64_t)batch * accum * (in + rr.data.tgt_cols) * sizeof(float));
    for (int m = MOVE_SCATTER; m <= MOVE_REDUCE; m++)
        cr_expect(st->move[m].seconds > 0.0 && st->move[m].ops > 0, "%s timed and counted",
                  move_name((move_kind_t)m));
    cr_assert(st->step_s > 0.0 && st->backward_s > 0.0 && st->backward_s < st->step_s);
    char *txt = explain_text(&rr);
    char a[32], b[32], c[32], line[256];
    report_fmt_bytes(a, sizeof a, (double)((k - 1) * pbytes));
    report_fmt_bytes(b, sizeof b, (double)st->move[MOVE_GATHER].bytes);
    report_fmt_bytes(c, sizeof c, (double)st->move[MOVE_SCATTER].bytes);
    snprintf(line, sizeof line, "The %d rows were split like torch.chunk: device 0 14, device 1 "
                                "14, device 2 12.", batch * accum);
    const char *must[] = {"explain: step 3 of dp on cpu, 3 devices", line, "replicate: ", a,
                          "from device 0 to the other 2 devices", "gather: ", b,
                          "reduce: ", "summed onto device 0", "scatter: ", c,
                          "of output gradients sent from device 0", "Device 2:", "idle"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_expect(strstr(txt, must[i]), "'%s' not in:\n%s", must[i], txt);
    free(txt);
    real_free(&rr);
}

Test(report_text, explain_of_a_ddp_run_names_every_bucket)
{
    real_run_t rr;
    real_run(&rr, "--layers 8,64,64,3 --loss ce --samples 120 --batch 12 --bucket-mb 0.01 "
                  "--first-bucket-mb 0.005 --mode ddp --gpus 0,1 --steps 3 --backend cpu --quiet");
    const step_story_t *st = &rr.res.story;
    cr_assert(st->filled);
    char err[ERR_LEN];
    reducer_t red;
    cr_assert_eq(reducer_init(&red, NULL, NULL, &rr.spec, NULL, rr.cfg.first_bucket_mb,
                              rr.cfg.bucket_mb, true, BUCKETS_CAPPED, err),
                 DDP_OK);
    cr_assert_eq(st->nbuckets, red.nb);
    cr_assert(red.nb >= 3);
    size_t pbytes = rr.spec.nparams * sizeof(float);
    cr_assert_eq(st->move[MOVE_ALLREDUCE].bytes, pbytes, "every gradient once");
    cr_assert_eq(st->move[MOVE_ALLREDUCE].ops, red.nb);
    cr_assert_eq(st->move[MOVE_BROADCAST].bytes, pbytes);
    cr_assert(st->backward_s > 0.0);
    char *txt = explain_text(&rr);
    cr_assert(strstr(txt, "Backward on rank 0 took"), "%s", txt);
    for (int i = 0; i < red.nb; i++) {
        const bucket_story_t *bk = &st->bucket[i];
        cr_expect_eq(bk->bytes, red.b[i].count * sizeof(float), "bucket %d bytes", i);
        cr_expect_eq(bk->first_layer, red.b[i].last_param / 2, "bucket %d: the last layer first", i);
        cr_expect_eq(bk->last_layer, red.b[i].first_param / 2);
        /* offsets from rank 0's backward: launched during it (overlap is on),
         * started after it was launched, ended after it started */
        cr_expect(bk->ready_s >= 0.0 && bk->ready_s <= st->backward_s, "bucket %d ready %g of %g", i,
                  bk->ready_s, st->backward_s);
        cr_expect(bk->start_s >= bk->ready_s && bk->end_s >= bk->start_s,
                  "bucket %d: ready %g start %g end %g", i, bk->ready_s, bk->start_s, bk->end_s);
        char want[64], t[32];
        snprintf(want, sizeof want, "bucket %d (layers %d-%d", i, bk->first_layer, bk->last_layer);
        cr_expect(strstr(txt, want), "'%s' not in:\n%s", want, txt);
        snprintf(want, sizeof want, "all-reduce %s to ", report_fmt_time(t, sizeof t, bk->start_s));
        cr_expect(strstr(txt, want), "'%s' not in:\n%s", want, txt);
    }
    char line[128];
    snprintf(line, sizeof line, "summed across the ranks in %d buckets", red.nb);
    cr_expect(strstr(txt, line), "'%s' not in:\n%s", line, txt);
    cr_expect(strstr(txt, "The global batch of 12 rows was dealt to the ranks"), "%s", txt);
    cr_expect(strstr(txt, "broadcast: "), "%s", txt);
    reducer_free(&red);
    free(txt);
    real_free(&rr);
}


/* --explain's story, every field of it, in each mode: who records what is
 * the step meter's and the reducer's business (and a field they stop
 * filling fails here).  120 samples, micro-batches of 12, 2 per step: every
 * step has 24 rows; dp deals 4 rows of each micro-batch to each of 3
 * devices, ddp 6 to each of 2 ranks. */
static void check_story_common(const real_run_t *rr, const char *mode)
{
    const step_story_t *st = &rr->res.story;
    cr_assert(st->filled, "%s: no story", mode);
    schedule_t sch;
    char err[ERR_LEN];
    cr_assert_eq(schedule_init(&sch, &rr->cfg, &rr->data, 1, 0, err), DDP_OK, "%s", err);
    cr_assert_eq(st->step, schedule_told_step(&sch), "%s: told step %ld", mode, st->step);
    schedule_free(&sch);
    /* The story tells device 0's (rank 0's) own step.  single's and dp's
     * step times are that device's too; ddp's are the slowest rank's, which
     * need not be rank 0, so its told step may fall outside their range. */
    if (strcmp(mode, "ddp") != 0)
        cr_assert(st->step_s >= rr->res.times.min_s && st->step_s <= rr->res.times.max_s,
                  "%s: told step %g s outside the timed steps' %g..%g", mode, st->step_s,
                  rr->res.times.min_s, rr->res.times.max_s);
    else
        cr_assert(st->step_s > 0.0 && isfinite(st->step_s), "%s: told step %g s", mode,
                  st->step_s);
    cr_assert(st->backward_s > 0.0 && st->backward_s < st->step_s, "%s: backward %g of %g", mode,
              st->backward_s, st->step_s);
    const move_stat_t *b = &st->move[MOVE_BATCH];
    cr_assert_eq(b->bytes, 24u * (8 + 1) * sizeof(float), "%s: batch bytes %llu", mode,
                 (unsigned long long)b->bytes);
    const device_stats_t *d0 = &rr->res.dev[0];
    cr_assert_float_eq(b->seconds, d0->first_phase_s[PH_DATA] + d0->first_phase_s[PH_H2D], 1e-12,
                       "%s: batch seconds", mode);
    cr_assert_gt(b->seconds, 0.0, "%s", mode);
}

static void check_move(const step_story_t *st, move_kind_t k, uint64_t bytes, int ops)
{
    cr_assert_eq(st->move[k].bytes, bytes, "%s bytes %llu, want %llu", move_name(k),
                 (unsigned long long)st->move[k].bytes, (unsigned long long)bytes);
    cr_assert_eq(st->move[k].ops, ops, "%s ops %d, want %d", move_name(k), st->move[k].ops, ops);
    if (ops > 0)
        cr_assert_gt(st->move[k].seconds, 0.0, "%s timed", move_name(k));
    else
        cr_assert_eq(st->move[k].seconds, 0.0, "%s: not moved, not timed", move_name(k));
}

Test(report_text, the_story_keeps_every_field_in_every_mode, .timeout = 120)
{
    const char *common = "--layers 8,24,16,5 --loss ce --samples 120 --batch 12 --accum 2 "
                         "--steps 5 --backend cpu --quiet";
    char args[512];
    real_run_t rr;

    snprintf(args, sizeof args, "--mode single %s", common);
    real_run(&rr, args);
    check_story_common(&rr, "single");
    const step_story_t *st = &rr.res.story;
    check_move(st, MOVE_BATCH, st->move[MOVE_BATCH].bytes, 2);
    for (int k = MOVE_SCATTER; k < MOVE_COUNT; k++)
        check_move(st, (move_kind_t)k, 0, 0);
    cr_assert_eq(st->nbuckets, 0);
    real_free(&rr);

    snprintf(args, sizeof args, "--mode dp --gpus 0,1,2 %s", common);
    real_run(&rr, args);
    check_story_common(&rr, "dp");
    st = &rr.res.story;
    uint64_t pbytes = rr.spec.nparams * sizeof(float), peer_rows = 2 * 4 * 2;
    check_move(st, MOVE_BATCH, st->move[MOVE_BATCH].bytes, 2);
    check_move(st, MOVE_SCATTER, peer_rows * 8 * sizeof(float), 4);
    /* host memory: an arena of COMM_LOCAL_SLICED floats or more is split, each
     * of the 3 threads copying (summing) its slice of 2 arenas: 6 moves; a
     * smaller one (this model's) moves whole, each replica's thread copying
     * its own and device 0 summing both: 2 moves each way */
    int host_ops = comm_local_sliced(rr.spec.nparams) ? 6 : 2;
    check_move(st, MOVE_REPLICATE, 2 * pbytes, host_ops);
    check_move(st, MOVE_GATHER, peer_rows * 5 * sizeof(float), 4);
    check_move(st, MOVE_GRAD_OUT, peer_rows * 5 * sizeof(float), 4);
    check_move(st, MOVE_REDUCE, 2 * pbytes, host_ops);
    check_move(st, MOVE_BROADCAST, 0, 0);
    check_move(st, MOVE_ALLREDUCE, 0, 0);
    cr_assert_eq(st->nbuckets, 0);
    for (int d = 0; d < 3; d++)
        cr_assert_eq(rr.res.dev[d].first_rows, 8, "device %d rows", d);
    real_free(&rr);

    snprintf(args, sizeof args, "--mode ddp --gpus 0,1 --bucket-mb 0.002 --first-bucket-mb 0.001 %s",
             common);
    real_run(&rr, args);
    check_story_common(&rr, "ddp");
    st = &rr.res.story;
    pbytes = rr.spec.nparams * sizeof(float);
    char err[ERR_LEN];
    reducer_t red;
    cr_assert_eq(reducer_init(&red, NULL, NULL, &rr.spec, NULL, rr.cfg.first_bucket_mb,
                              rr.cfg.bucket_mb, true, BUCKETS_CAPPED, err),
                 DDP_OK);
    cr_assert(red.nb >= 2);
    /* every rank gathers its own rows: 2 micro-batches on each of 2 ranks */
    check_move(st, MOVE_BATCH, st->move[MOVE_BATCH].bytes, 4);
    for (int k = MOVE_SCATTER; k <= MOVE_REDUCE; k++)
        check_move(st, (move_kind_t)k, 0, 0);
    check_move(st, MOVE_BROADCAST, pbytes, 1);
    check_move(st, MOVE_ALLREDUCE, pbytes, red.nb);
    cr_assert_eq(st->nbuckets, red.nb);
    for (int i = 0; i < red.nb; i++) {
        const bucket_story_t *bk = &st->bucket[i];
        cr_assert_eq(bk->first_layer, red.b[i].last_param / 2, "bucket %d", i);
        cr_assert_eq(bk->last_layer, red.b[i].first_param / 2, "bucket %d", i);
        cr_assert_eq(bk->bytes, red.b[i].count * sizeof(float), "bucket %d", i);
        cr_assert(bk->ready_s >= 0.0 && bk->start_s >= bk->ready_s && bk->end_s > bk->start_s,
                  "bucket %d: ready %g start %g end %g", i, bk->ready_s, bk->start_s, bk->end_s);
    }
    for (int d = 0; d < 2; d++)
        cr_assert_eq(rr.res.dev[d].first_rows, 12, "rank %d rows", d);
    reducer_free(&red);
    real_free(&rr);
}
Test(report_text, sum_of_phases_leaves_out_hidden_comm_and_says_so)
{
    run_result_t runs[3];
    crafted_three(runs, 1e-7);
    /* DDP: 3 + 0.5 + 6 + 0.8 + 0.7 = 11 ms of phases; the 3.2 ms hidden
     * all-reduce ran inside backward's 6 */
    mem_t m;
    mem_open(&m);
    report_result(m.f, NULL, &runs[2], NULL);
    char *txt = mem_close(&m);
    const char *sum = strstr(txt, "sum of phases *");
    cr_assert(sum, "%s", txt);
    double a = 0, b = 0;
    cr_assert_eq(sscanf(sum + strlen("sum of phases *"), "%lf %lf", &a, &b), 2, "%s", txt);
    cr_assert_float_eq(a, 11.0, 1e-9, "device 0's sum %g counts hidden comm:\n%s", a, txt);
    cr_assert_float_eq(b, 11.0, 1e-9);
    cr_assert(strstr(txt, "comm hidden *"), "%s", txt);
    cr_assert(strstr(txt, "* comm hidden ran while backward computed: it overlaps backward's time"),
              "%s", txt);
    free(txt);
    /* without hidden time (DP): no mark, no note */
    mem_open(&m);
    report_result(m.f, NULL, &runs[1], NULL);
    txt = mem_close(&m);
    cr_assert_null(strstr(txt, " *"), "%s", txt);
    free(txt);
    /* compare says it in the label */
    txt = compare_text(runs);
    cr_assert(strstr(txt, "comm hidden (in bwd)"), "%s", txt);
    free(txt);
    for (int i = 0; i < 3; i++)
        result_free(&runs[i]);
}

Test(report_text, explain_tells_buckets_and_moves)
{
    float p[4] = {1, 2, 3, 4};
    run_result_t r;
    craft(&r, MODE_DDP, 2, 1000.0, 0.01, p, 4);
    step_story_t *st = &r.story;
    st->filled = true;
    st->step_s = 0.012;
    st->backward_s = 0.006;
    st->move[MOVE_BROADCAST] = (move_stat_t){1 << 20, 0.0004, 1};
    st->move[MOVE_ALLREDUCE] = (move_stat_t){1 << 21, 0.003, 2};
    st->nbuckets = 2;
    st->bucket[0] = (bucket_story_t){2, 2, 20480, 0.001, 0.0011, 0.0015};
    st->bucket[1] = (bucket_story_t){1, 0, (1 << 21) - 20480, 0.0058, 0.0059, 0.0080};
    for (int d = 0; d < 2; d++) {
        r.dev[d].first_rows = 128;
        r.dev[d].first_phase_s[PH_BACKWARD] = 0.006;
    }
    mem_t m;
    mem_open(&m);
    report_explain(m.f, NULL, &r);
    char *txt = mem_close(&m);
    const char *must[] = {"The global batch of 256 rows was dealt to the ranks",
                          "device 0 128, device 1 128",
                          "broadcast: 1.0 MiB of initial parameters",
                          "all-reduce: 2.0 MiB of gradients summed across the ranks in 2 buckets: "
                          "2.500 ms in rank 0's buckets added up, over 3.000 ms from the first "
                          "one's start to the last one's end",
                          "Backward on rank 0 took 6.000 ms",
                          "bucket 0 (layers 2-2, 20.0 KiB): ready at 1.000 ms, all-reduce 1.100 ms "
                          "to 1.500 ms (inside backward: hidden)",
                          "bucket 1 (layers 1-0", "(partly after backward)"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        cr_expect(strstr(txt, must[i]), "'%s' not in:\n%s", must[i], txt);
    /* the timeline, to scale over 8 ms: backward's '=' end at 6 ms, bucket 0's
     * all-reduce lies inside them, bucket 1's runs past them to the end */
    const char *bw = strstr(txt, "backward  |"), *b0 = strstr(txt, "bucket 0  |"),
               *b1 = strstr(txt, "bucket 1  |");
    cr_assert(bw && b0 && b1, "no timeline:\n%s", txt);
    bw += strlen("backward  |"), b0 += strlen("bucket 0  |"), b1 += strlen("bucket 1  |");
    int bend = -1, first0 = -1, last0 = -1, last1 = -1, width = (int)(strchr(bw, '|') - bw);
    for (int c = 0; c < width; c++) {
        if (bw[c] == '=')
            bend = c;
        if (b0[c] == '#')
            last0 = c, first0 = first0 < 0 ? c : first0;
        if (b1[c] == '#')
            last1 = c;
    }
    cr_assert_eq(width, 60, "%s", txt);
    cr_assert_eq(bend, 44, "backward ends at 6 of 8 ms: column 44 of 0..59\n%s", txt);
    cr_assert(first0 >= 7 && last0 <= 11, "bucket 0 runs 1.1..1.5 ms: columns 8..11\n%s", txt);
    cr_assert_eq(last1, 59, "bucket 1 ends the picture (8 ms)\n%s", txt);
    cr_assert(strchr(b0, '.') < b0 + first0, "bucket 0 waited from 1.0 ms\n%s", txt);
    free(txt);
    /* a span the comm reports from before backward began (seen on a GPU's
     * later steps) is drawn from the picture's start, not before it */
    st->bucket[0].start_s = -0.036;
    mem_open(&m);
    report_explain(m.f, NULL, &r);
    txt = mem_close(&m);
    b0 = strstr(txt, "bucket 0  |");
    cr_assert(b0 && b0[strlen("bucket 0  |")] == '#', "%s", txt);
    free(txt);
    st->bucket[0].start_s = 0.0011;
    r.story.filled = false;
    mem_open(&m);
    report_explain(m.f, NULL, &r);
    txt = mem_close(&m);
    cr_assert(strstr(txt, "the strategy recorded no step"), "%s", txt);
    free(txt);
    /* --zero1: the buckets were reduce-scattered, and the story says so */
    r.story.filled = true;
    config_t c;
    char err[ERR_LEN];
    cr_assert_eq(tu_parse(&c, "--backend cpu --mode ddp --gpus 0,1 --zero1", err), DDP_OK, "%s",
                 err);
    report_ctx_t ctx = {.cfg = &c};
    mem_open(&m);
    report_explain(m.f, &ctx, &r);
    txt = mem_close(&m);
    cr_assert(strstr(txt, "reduce-scatter (ZeRO): 2.0 MiB of gradients summed across the ranks "
                          "in 2 buckets"), "%s", txt);
    cr_assert(strstr(txt, "ready at 1.000 ms, reduce-scatter 1.100 ms to 1.500 ms"), "%s", txt);
    cr_assert_null(strstr(txt, "averaged across the ranks"), "%s", txt);
    free(txt);
    result_free(&r);
}

// ---------------------------------------------------------------------------
// the progress line

/* An epoch's tail: a step of 1 row after steps of 10, its loss a mean over
 * that row alone (a 3-rank run showed 0.000004 so, without saying). */
Test(progress, an_epochs_tail_is_named)
{
    mem_t m;
    mem_open(&m);
    progress_t p;
    progress_init_on(&p, true, m.f, "ddp", 100);
    for (int i = 1; i <= 3; i++)
        progress_update(&p, i, 0, NAN, i * 10L);
    usleep((useconds_t)(PROGRESS_PERIOD_S * 1.2e6));
    progress_update(&p, 4, 0, 0.000004, 31);
    progress_end(&p);
    char *txt = mem_close(&m);
    cr_assert(strstr(txt, "loss 0.0000 (step 4: a tail of 1 row)"), "%s", txt);
    free(txt);
}

Test(progress, silent_when_off_rate_limited_when_on)
{
    mem_t m;
    mem_open(&m);
    progress_t p;
    progress_init_on(&p, false, m.f, "single", 100);
    for (int i = 1; i <= 100; i++)
        progress_update(&p, i, 0, 0.5, i * 10L);
    progress_end(&p);
    fflush(m.f);
    cr_assert_eq(m.len, 0, "off: nothing written");

    /* "Nothing within a period" holds only if each window below took less
     * than one: a machine that kept this process off the CPU for a period
     * (load, a sanitizer) leaves an attempt that proves nothing, and it is
     * taken again; a line drawn within a short window fails. */
    size_t one = 0;
    char *txt = NULL;
    for (int attempt = 0; attempt < 10 && !txt; attempt++) {
        free(mem_close(&m));
        mem_open(&m);
        double t0 = now_s();
        progress_init_on(&p, true, m.f, "dp", 100);
        progress_update(&p, 1, 0, 0.5, 10); /* before the first period: nothing */
        fflush(m.f);
        if (now_s() - t0 >= PROGRESS_PERIOD_S)
            continue;
        cr_assert_eq(m.len, 0);
        usleep((useconds_t)(PROGRESS_PERIOD_S * 1.2e6));
        double t1 = now_s();
        progress_update(&p, 2, 0, 0.25, 20);
        for (int i = 3; i < 50; i++) /* within the period: no more lines */
            progress_update(&p, i, 0, NAN, i * 10L);
        fflush(m.f);
        if (now_s() - t1 >= PROGRESS_PERIOD_S)
            continue;
        one = m.len;
        txt = strdup(m.buf);
    }
    cr_assert_not_null(txt, "ten attempts each held up for a whole period");
    cr_assert_eq(count_char(txt, '\r'), 1, "one update: %s", txt);
    cr_assert(strstr(txt, "dp  step 2/100  epoch 1  loss 0.2500 (step 2)"), "%s", txt);
    cr_assert(strstr(txt, "samples/s  ETA "), "%s", txt);

    progress_end(&p);
    fflush(m.f);
    cr_assert(m.len > one, "end erases the line");
    cr_assert_eq(strcmp(m.buf + one, "\r\033[K"), 0);
    free(txt);
    free(mem_close(&m));
}

/* The line's loss is the last one the loss log took, named by its step, and
 * none before the first: the meter hands it the logged steps' losses only,
 * though a step may fetch its loss for another reason (a CUDA graph fetches
 * every step's). */
Test(progress, shows_the_last_logged_loss_and_its_step)
{
    mem_t m;
    mem_open(&m);
    config_t cfg = {.loss_lines_off = true};
    device_stats_t dev = {0};
    loss_log_t log = {0};
    step_meter_t sm;
    char err[ERR_LEN] = "";
    cr_assert_eq(step_meter_init(&sm, &(step_meter_sinks_t){.cfg = &cfg, .dev = &dev, .log = &log,
                                                            .progress = "single", .total_steps = 10},
                                 err),
                 0);
    cr_assert_eq(sm.prog, &sm.progress, "the meter draws the line");
    progress_init_on(&sm.progress, true, m.f, "single", 10); /* on, into m */
    float loss[4] = {2.0f, 1.0f, 0.5f, 0.25f};
    size_t seen = 0;
    for (long g = 0; g < 4; g++) {
        usleep((useconds_t)(PROGRESS_PERIOD_S * 1.2e6)); /* every step draws the line */
        step_meter_begin(&sm, g, true, false);
        step_meter_fetch(&sm, &loss[g], 1); /* fetched every step, logged at step 2 only */
        step_meter_lap(&sm, PH_LOSS);
        cr_assert_eq(step_meter_end(&sm, &(step_end_t){.samples = 1, .global_samples = 1,
                                                       .total = 10, .logs = g == 1, .denom = 1.0},
                                    err),
                     0, "%s", err);
        fflush(m.f);
        char *line = strndup(m.buf + seen, m.len - seen);
        seen = m.len;
        char want[64];
        snprintf(want, sizeof want, "single  step %ld/10  epoch 1  ", g + 1);
        cr_assert(strstr(line, want), "step %ld: %s", g + 1, line);
        if (g == 0)
            cr_assert_null(strstr(line, "loss"), "nothing logged yet: %s", line);
        else
            cr_assert(strstr(line, "loss 1.0000 (step 2)  "), "step %ld: %s", g + 1, line);
        free(line);
    }
    cr_assert_eq(log.n, 1);
    step_meter_free(&sm);
    fflush(m.f);
    cr_assert(m.len > seen && strcmp(m.buf + seen, "\r\033[K") == 0, "freeing the meter erases the line");
    free(log.pt);
    free(mem_close(&m));
}

// ---------------------------------------------------------------------------
// compare's devices

Test(report_compare, any_device_count_takes_the_batch)
{
    config_t c;
    char err[ERR_LEN];
    /* auto: every worker (<= cores, <= 8), whatever the batch: ddp deals an
     * uneven batch out like dp */
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    int want = cores < 1 ? 1 : cores > 8 ? 8 : (int)cores;
    cr_assert_eq(tu_parse(&c, "--backend cpu --batch 7", err), DDP_OK, "%s", err);
    cr_assert_eq(c.mode, MODE_COMPARE, "compare is the default");
    cr_assert_eq(c.ngpus, want, "%ld cores", cores);
    /* an explicit list that does not divide it is taken too */
    cr_assert_eq(tu_parse(&c, "--backend cpu --gpus 0,1,2 --batch 256", err), DDP_OK, "%s", err);
    cr_assert_eq(c.ngpus, 3);
}

/* The per-bucket table names the collective that ran: under --zero1 a
 * reduce-scatter, whose bus bandwidth is bytes / time x (n-1)/n (half the
 * all-reduce's factor), and which --mode comm's all-reduce is no yardstick for. */
Test(report_buckets, zero1_reports_a_reduce_scatter)
{
    run_result_t r;
    result_init(&r);
    r.mode = MODE_DDP;
    r.ndev = 2;
    r.nbuckets = 1;
    r.bucket_bytes[0] = 1e6;
    r.bucket_s[0] = 1e-3; /* 1 GB/s algbw */
    for (int z = 0; z < 2; z++) {
        mem_t m;
        mem_open(&m);
        report_buckets(m.f, &r, NULL, z);
        char *txt = mem_close(&m);
        cr_assert(strstr(txt, z ? "reduce-scatter per bucket" : "all-reduce per bucket"), "%s", txt);
        cr_assert(strstr(txt, z ? "busbw    0.50 GB/s" : "busbw    1.00 GB/s"), "%s", txt);
        free(txt);
        cJSON *a = report_json_buckets(&r, NULL, z);
        cJSON *b = cJSON_GetArrayItem(a, 0);
        cr_assert_str_eq(cJSON_GetObjectItem(b, "collective")->valuestring,
                         z ? "reduce-scatter" : "all-reduce");
        cr_assert_float_eq(cJSON_GetObjectItem(b, "busbw_gbs")->valuedouble, z ? 0.5 : 1.0, 1e-9);
        cJSON_Delete(a);
    }
    result_free(&r);
}

/* Every echoed option (config/fields.h) is under "config" at its key, in
 * report_json_keys() (derived from the table), and a row echoed as its
 * value shows a flip of that option alone. */
Test(report_json, every_echoed_option_is_in_the_echo_and_documented)
{
    config_t base;
    config_defaults(&base);
    cJSON *a = report_json_config(NULL, &base, NULL);
    char err[ERR_LEN] = "";
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *r = config_field_derive(i);
        const char *n = config_field_name(i);
        if (!r->json)
            continue;
        char doc[128];
        snprintf(doc, sizeof doc, "config.%s", r->json);
        bool documented = false;
        for (const char *const *k = report_json_keys(); *k; k++)
            documented = documented || strcmp(*k, doc) == 0;
        cr_expect(documented, "--%s: %s is not in report_json_keys()", n,
                  doc);
        cr_expect_not_null(path_get(a, r->json), "--%s: %s is not echoed", n, r->json);
        if (r->jsonv != J_VALUE)
            continue;
        config_t c = base;
        cr_assert_eq(tu_field_flip(&c, i, err), DDP_OK, "%s", err);
        cJSON *b = report_json_config(NULL, &c, NULL);
        cr_expect_not(cJSON_Compare(path_get(a, r->json), path_get(b, r->json), true),
                      "--%s changed and %s did not", n, r->json);
        cJSON_Delete(b);
    }
    cJSON_Delete(a);
}
