/* tests/unit/test_predict_gpu.c: the GPU model (app/predict/) held against
 * every published case from the shipped profiles, each to its tolerance and
 * its declared result; docs/predict-cases.md's table is the one the cases
 * make today; every shipped number cites its source; bad profiles are one
 * line naming the file and the key; the model's terms behave as the
 * physics says (DP on one GPU is single, a slower link slows DDP). */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/predict/gpu_model.h"
#include "app/predict/profile.h"
#include "common/base/status.h"

Test(predict_gpu, every_published_case_meets_its_declared_result)
{
    char err[ERR_LEN] = "";
    cJSON *all = cases_load(err);
    cr_assert(all, "%s", err);
    const cJSON *c;
    int n = 0, pass = 0;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(all, "cases"))
    {
        case_result_t r;
        cr_assert_eq(cases_eval(c, &r, err), DDP_OK, "%s", err);
        printf("%-36s predicted %-8.4g published %-8.4g %s\n", r.id, r.predicted, r.published,
               r.pass ? "pass" : "miss");
        cr_expect_eq(r.pass, r.declared_pass,
                     "case %s: predicted %.4g against %.4g (tolerance %.0f%%): %s, declared %s", r.id,
                     r.predicted, r.published, 100 * r.tolerance, r.pass ? "pass" : "miss",
                     r.declared_pass ? "pass" : "miss");
        const cJSON *miss = cJSON_GetObjectItemCaseSensitive(c, "missing");
        cr_expect(r.declared_pass || cJSON_GetStringValue(miss),
                  "case %s: a miss names the term believed missing", r.id);
        cr_expect(strstr(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "source")),
                         "https://"), "case %s: no source URL", r.id);
        n++;
        pass += r.pass;
    }
    cr_expect_geq(n, 20, "only %d cases", n);
    printf("%d of %d published cases within their tolerance\n", pass, n);
    cJSON_Delete(all);
}

/* The markdown table of every case, one row each (docs/predict-cases.md). */
static int cases_markdown(FILE *f, char *err)
{
    cJSON *all = cases_load(err);
    if (!all)
        return DDP_ERR_INPUT;
    fputs("| case | source | setup | published | figure | predicted | tolerance | result |\n"
          "|---|---|---|---|---|---|---|---|\n", f);
    const cJSON *c;
    int rc = DDP_OK;
    cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(all, "cases"))
    {
        case_result_t r;
        if ((rc = cases_eval(c, &r, err)) != DDP_OK)
            break;
        char pred[32], pub[32], tol[32];
        if (r.flag) {
            snprintf(pred, sizeof pred, "%s", r.predicted == 1.0 ? "yes" : "no");
            snprintf(pub, sizeof pub, "yes");
            snprintf(tol, sizeof tol, "direction");
        } else {
            snprintf(pred, sizeof pred, "%.4g", r.predicted);
            snprintf(pub, sizeof pub, "%.4g", r.published);
            snprintf(tol, sizeof tol, "%.0f%% (off %+.1f%%)", 100 * r.tolerance,
                     100 * (r.predicted / r.published - 1.0));
        }
        const char *miss = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "missing"));
#define STR(k) cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, k))
        fprintf(f, "| %s | %s | %s | %s | %s: %s | %s | %s | %s%s%s |\n", r.id, STR("source"),
                STR("setup"), STR("as_published"), r.what, pub, pred, tol,
                r.pass ? "pass" : "miss", r.pass ? "" : ": ", r.pass ? "" : miss ? miss : "");
#undef STR
    }
    cJSON_Delete(all);
    return rc;
}

Test(predict_gpu, docs_table_is_the_cases_table)
{
    char err[ERR_LEN], *table = NULL, *doc = NULL;
    size_t tn = 0, dn = 0;
    FILE *f = open_memstream(&table, &tn);
    cr_assert_eq(cases_markdown(f, err), DDP_OK, "%s", err);
    fclose(f);
    const char *out = getenv("DDPBENCH_CASES_TABLE"); /* write the table there, to paste */
    FILE *o = out ? fopen(out, "w") : NULL;
    if (o) {
        fputs(table, o);
        fclose(o);
    }
    FILE *d = fopen("docs/predict-cases.md", "r");
    cr_assert(d, "docs/predict-cases.md: cannot open");
    char buf[4096];
    FILE *m = open_memstream(&doc, &dn);
    for (size_t k; (k = fread(buf, 1, sizeof buf, d)) > 0;)
        fwrite(buf, 1, k, m);
    fclose(m);
    fclose(d);
    cr_expect(strstr(doc, table),
              "docs/predict-cases.md does not hold today's table; it is:\n%s", table);
    free(table);
    free(doc);
}

/* Every number of every shipped profile has its citation in "sources". */
Test(predict_gpu, shipped_numbers_cite_their_sources)
{
    static const char *const hw_keys[] = {"gpu.flops.fp32", "gpu.flops.tf32", "gpu.flops.fp16",
                                          "gpu.flops.bf16", "gpu.mem_bw",     "gpu.memory",
                                          "link.bw",        "link.latency",   "host.pcie_bw"};
    static const char *const wl_keys[] = {"params", "flops_per_sample", "batch_per_device",
                                          "input_bytes_per_sample", "output_bytes_per_sample",
                                          "ops_per_step"};
    int shipped[2] = {0, 0};
    for (const predict_file_t *p = predict_files; p->kind; p++) {
        int kind = !strcmp(p->kind, "workload");
        if (!kind && strcmp(p->kind, "hardware"))
            continue; /* the published cases */
        const char *n = p->name;
        shipped[kind]++;
        cJSON *o = cJSON_Parse(p->text);
        cr_assert(o, "%s: not JSON", n);
        const cJSON *src = cJSON_GetObjectItemCaseSensitive(o, "sources");
        const char *const *keys = kind ? wl_keys : hw_keys;
        int nk = kind ? 6 : 9;
        for (int i = 0; i < nk; i++)
            cr_expect(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(src, keys[i])),
                      "%s: %s has no source", n, keys[i]);
        for (const cJSON *x = o->child; x; x = x->next) /* optional keys too */
            if (cJSON_IsNumber(x) && strcmp(x->string, "global_batch"))
                cr_expect(cJSON_GetObjectItemCaseSensitive(src, x->string),
                          "%s: %s has no source", n, x->string);
        const cJSON *link = cJSON_GetObjectItemCaseSensitive(o, "link");
        if (cJSON_GetObjectItemCaseSensitive(link, "gpu_bw"))
            cr_expect(cJSON_GetObjectItemCaseSensitive(src, "link.gpu_bw"), "%s: link.gpu_bw", n);
        cJSON_Delete(o);
    }
    cr_expect(shipped[0] >= 6 && shipped[1] >= 3, "%d boxes, %d workloads", shipped[0], shipped[1]);
}

/* A profile made from a shipped one with one key changed. */
static int bad_hw(const char *path, const char *value, char *err)
{
    cJSON *o = cJSON_Parse(profile_shipped("hardware", "2x-titan-rtx-nvlink"));
    char buf[64];
    snprintf(buf, sizeof buf, "%s", path);
    char *dot = strrchr(buf, '.');
    cJSON *parent = o;
    if (dot) {
        *dot = 0;
        for (char *s = NULL, *k = strtok_r(buf, ".", &s); k; k = strtok_r(NULL, ".", &s))
            parent = cJSON_GetObjectItemCaseSensitive(parent, k);
    }
    const char *key = dot ? dot + 1 : buf;
    cJSON_DeleteItemFromObjectCaseSensitive(parent, key);
    if (value)
        cJSON_AddItemToObject(parent, key, cJSON_Parse(value));
    hw_profile_t hw;
    int rc = profile_hardware_json(o, "--hardware box.json", &hw, err);
    cJSON_Delete(o);
    return rc;
}

Test(predict_gpu, bad_profiles_name_the_file_and_the_key)
{
    static const struct {
        const char *key, *value;
    } cases[] = {{"link.bw", NULL},         {"link.bw", "0"},          {"link.bw", "-5e9"},
                 {"gpu.count", "0"},        {"gpu.count", "\"two\""},  {"gpu.mem_bw", "\"fast\""},
                 {"host.pcie_bw", "-1"},    {"gpu.flops.fp32", "0"},   {"gpu.count", "2.5"},
                 {"link.p2p", "\"yes\""},   {"name", NULL},            {"gpu.flops.bf16", "null"}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char err[ERR_LEN] = "";
        cr_expect_eq(bad_hw(cases[i].key, cases[i].value, err), DDP_ERR_INPUT, "%s=%s accepted",
                     cases[i].key, cases[i].value ? cases[i].value : "(missing)");
        cr_expect(strstr(err, "box.json") && strstr(err, cases[i].key) && !strchr(err, '\n'),
                  "%s: '%s'", cases[i].key, err);
    }
    char err[ERR_LEN] = "";
    hw_profile_t hw;
    cr_expect_eq(profile_hardware("no-such-box", &hw, err), DDP_ERR_INPUT);
    cr_expect(strstr(err, "no-such-box") && strstr(err, "2x-titan-rtx-nvlink"), "%s", err);
    workload_t wl;
    cJSON *o = cJSON_Parse(profile_shipped("workload", "gpt2-small"));
    cJSON_ReplaceItemInObjectCaseSensitive(o, "dtype", cJSON_CreateString("fp8"));
    cr_expect_eq(profile_workload_json(o, "--workload w.json", &wl, err), DDP_ERR_INPUT);
    cr_expect(strstr(err, "w.json: dtype"), "%s", err);
    cJSON_ReplaceItemInObjectCaseSensitive(o, "dtype", cJSON_CreateString("bf16"));
    cr_assert_eq(profile_workload_json(o, "--workload w.json", &wl, err), DDP_OK, "%s", err);
    cr_assert_eq(profile_hardware("2x-titan-rtx-nvlink", &hw, err), DDP_OK, "%s", err);
    cr_expect_eq(gpu_model_check(&hw, &wl, err), DDP_ERR_INPUT, "bf16 on a Turing GPU");
    cr_expect(strstr(err, "gpu.flops.bf16"), "%s", err);
    cJSON_Delete(o);
}

Test(predict_gpu, the_terms_follow_the_hardware)
{
    char err[ERR_LEN];
    hw_profile_t nv, host;
    workload_t wl;
    cr_assert_eq(profile_hardware("2x-titan-rtx-nvlink", &nv, err), DDP_OK, "%s", err);
    cr_assert_eq(profile_hardware("2x-titan-rtx-pcie", &host, err), DDP_OK, "%s", err);
    cr_assert_eq(profile_workload("gpt2-small", &wl, err), DDP_OK, "%s", err);
    gpu_row_t one, a, b;
    gpu_model_row(&nv, &wl, 1, &one);
    cr_expect_float_eq(one.m[MODE_DP].step, one.m[MODE_SINGLE].step, 1e-12, "DP on one GPU is the module itself");
    cr_expect_gt(one.m[MODE_DDP].step, one.m[MODE_SINGLE].step, "DDP on one GPU pays its bucket copies");
    gpu_model_row(&nv, &wl, 2, &a);
    gpu_model_row(&host, &wl, 2, &b);
    cr_expect_gt(b.m[MODE_DDP].term[GT_ALLREDUCE], a.m[MODE_DDP].term[GT_ALLREDUCE], "a slower link hides less");
    cr_expect_gt(a.m[MODE_DP].term[GT_GATHER], 0, "DP gathers the logits");
    cr_expect_eq(a.m[MODE_DP].term[GT_GRAD_OUT], 0, "the loss inside the model: no gradient back");
    cr_expect_eq(a.dp_culprit, GT_GATHER, "GPT-2's logits make DP slower");
    wl.global_batch = 64; /* a global batch split: rows shrink with the GPUs */
    gpu_model_row(&nv, &wl, 2, &a);
    cr_expect_eq(a.batch, 32);
}

/* Through host memory the ring keeps 0.378 of the one-way rate and runs
 * after backward; a measured bus bandwidth replaces the derived one. */
Test(predict_gpu, without_peer_access_nothing_hides)
{
    char err[ERR_LEN];
    hw_profile_t host;
    workload_t wl;
    cr_assert_eq(profile_hardware("2x-titan-rtx-pcie", &host, err), DDP_OK, "%s", err);
    cr_assert_eq(profile_workload("gpt2-small", &wl, err), DDP_OK, "%s", err);
    gpu_row_t r, fast;
    gpu_model_row(&host, &wl, 2, &r);
    cr_expect_float_eq(r.ddp_hidden, 0.0, 1e-12, "through host memory nothing hides");
    double ring = 4.0 * wl.params / (host.link_bw * GPU_SHM_DUPLEX); /* 2 GPUs: (k-1)/k x 2 = 1 */
    cr_expect(r.m[MODE_DDP].term[GT_ALLREDUCE] > ring && r.m[MODE_DDP].term[GT_ALLREDUCE] < 1.01 * ring,
              "all-reduce %g s, the ring at 0.378 of link.bw %g s", r.m[MODE_DDP].term[GT_ALLREDUCE], ring);
    host.allreduce_bw = 2.0 * host.link_bw * GPU_SHM_DUPLEX; /* a measured bus bandwidth */
    gpu_model_row(&host, &wl, 2, &fast);
    cr_expect_lt(fast.m[MODE_DDP].term[GT_ALLREDUCE], 0.51 * r.m[MODE_DDP].term[GT_ALLREDUCE]);
}

/* One process's loader workers feed every DP replica; each DDP process has
 * its own: a slow loader makes DP input-bound and leaves DDP alone. */
Test(predict_gpu, one_loader_feeds_dp)
{
    char err[ERR_LEN];
    hw_profile_t hw;
    workload_t wl;
    cr_assert_eq(profile_hardware("8x-a100-pcie", &hw, err), DDP_OK, "%s", err);
    cr_assert_eq(profile_workload("resnet50", &wl, err), DDP_OK, "%s", err);
    gpu_row_t r;
    gpu_model_row(&hw, &wl, 8, &r);
    cr_expect(!r.dp_input_bound, "no loader rate: not input-bound");
    gpu_step_t before = r.m[MODE_DDP];
    wl.load_rate = 100.0; /* samples/s a worker */
    wl.load_workers = 4;
    gpu_model_row(&hw, &wl, 8, &r);
    cr_expect(r.dp_input_bound, "8 x 32 rows from 400 samples/s");
    cr_expect_float_eq(r.m[MODE_DP].step, 8 * 32 / 400.0, 1e-9, "DP waits for its one loader");
    cr_expect_float_eq(r.m[MODE_DDP].step, fmax(before.step, 32 / 400.0), 1e-9, "each DDP process loads its own");
    workload_t slow = wl;
    slow.load_rate = 0;
    slow.op_s = 100 * wl.op_s; /* an older framework's host cost */
    gpu_model_row(&hw, &slow, 8, &r);
    cr_expect_gt(r.m[MODE_DP].term[GT_LAUNCH], 0, "launches outrun compute at 100x the cost");
}
