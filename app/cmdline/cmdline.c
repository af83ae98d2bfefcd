/* app/cmdline/cmdline.c: the program's own options (cmdline.h), the rules
 * that join them to the others', and the one rule over every part: no
 * output may be another output or an input. */
#include "app/cmdline/cmdline.h"

#include <string.h>
#include <unistd.h>

#include "common/base/atomic_file.h"
#include "common/base/status.h"

#define OPT_PART app_opts_t

static int set_scenario(void *p, const char *name, const char *v, char *err)
{
    app_opts_t *a = p;
    (void)name;
    if (!v[0])
        return err_set(err, DDP_ERR_INPUT, "--scenario: empty name (see --scenario list)");
    if (strlen(v) >= sizeof a->scenario)
        return err_set(err, DDP_ERR_INPUT, "--scenario: unknown scenario '%.40s' (see "
                       "--scenario list)", v);
    strcpy(a->scenario, v);
    return DDP_OK;
}

static int set_mem_limit(void *p, const char *name, const char *v, char *err)
{
    long b = 0;
    TRY(opt_parse_bytes(name, v, &b, err));
    if (b <= 0)
        return err_set(err, DDP_ERR_INPUT, "--%s: must be more than 0 bytes", name);
    ((app_opts_t *)p)->mem_limit = (double)b;
    return DDP_OK;
}

static const opt_t rows[] = {
    {"scenario", "NAME", NULL, "none",
     "reproduce a failure PyTorch users meet and explain it: uneven, straggler, dp-device0, "
     "mismatch, set-epoch, loss-scale, no-sync, unused, collective-at-runtime, bucket-view "
     "(list: each in a line); exit 0 when it behaved as described",
     NULL, SET(set_scenario, NULL, "uneven", "straggler"), .after = "threads",
     EFF(CF_META)},
    {"mem-limit", "BYTES", NULL, "none",
     "each device's memory (K, M, G suffixes): a run whose estimated peak exceeds it is refused",
     NULL, SET(set_mem_limit, NULL, "64M", "1G"), .after = "zero", EFF(CF_META)},
    {"hardware", "NAME|FILE", NULL, "none",
     "model single, dp and ddp on a GPU box one does not have, term by term, on 1..its GPUs: "
     "a shipped profile (2x-titan-rtx-nvlink, dgx1-v100, 8x-a100-sxm, ...: an unknown name "
     "lists them) or a JSON file (app/predict/README.md)",
     NULL, PATH(hardware), .after = "predict", EFF(CF_OUTPUT)},
    {"workload", "NAME|FILE", NULL, "the run's MLP",
     "with --hardware: the model to put on it instead of the run's (gpt2-small, resnet50, "
     "bert-base, ... or a JSON file); nothing is trained",
     NULL, PATH(workload), EFF(CF_META)},
    {"emit-pytorch", "FILE.py", NULL, "none",
     "write a PyTorch script that runs the same job (its initial weights and data beside it) "
     "and prints the same checksum",
     NULL, PATH(emit_pytorch), EFF(CF_OUTPUT)},
};

/* No output may be another output or an input: one would overwrite the other.
 * The same file is the same device and inode where both exist, else the same
 * name in the same folder (afile_same_file).  Two pairs are a feature: --resume and --checkpoint
 * (a run that continues its own checkpoint) and --init and --save (weights
 * trained further in place); both read the file before anything is written. */
static int check_paths(const config_t *c, const gate_opts_t *g, const app_opts_t *a, char *err)
{
    /* --emit-pytorch FILE.py writes FILE.py and four files beside it (app/twin.c) */
    char twin[4][CONFIG_PATH_LEN + 32] = {"", "", "", ""};
    static const char *const beside[4] = {".init.safetensors", ".x.npy", ".y.npy", ".order.npy"};
    size_t tn = strlen(a->emit_pytorch);
    for (int k = 0; k < 4 && tn > 3 && strcmp(a->emit_pytorch + tn - 3, ".py") == 0; k++)
        snprintf(twin[k], sizeof twin[k], "%.*s%s", (int)(tn - 3), a->emit_pytorch, beside[k]);
    /* --hardware and --workload read a file where the name has a folder or
     * is a file here; otherwise it is a shipped profile's name (cmdline/ may
     * not ask predict/ which) or fails as no such file */
    const char *hw = strchr(a->hardware, '/') || access(a->hardware, F_OK) == 0 ? a->hardware : "";
    const char *wl = strchr(a->workload, '/') || access(a->workload, F_OK) == 0 ? a->workload : "";
    const struct {
        const char *opt, *path;
        bool output;
    } f[] = {{"--save", c->save_path, true},       {"--checkpoint", c->checkpoint_path, true},
             {"--trace", c->trace_path, true},     {"--report", c->report_path, true},
             {"--emit-pytorch", a->emit_pytorch, true},
             {"--emit-pytorch", twin[0], true},    {"--emit-pytorch", twin[1], true},
             {"--emit-pytorch", twin[2], true},    {"--emit-pytorch", twin[3], true},
             {"--data", c->data_path, false},
             {"--targets", c->targets_path, false}, {"--init", c->init_path, false},
             {"--resume", c->resume_path, false},  {"--baseline", g->baseline, false},
             {"--hardware", hw, false},             {"--workload", wl, false}};
    const int n = (int)(sizeof f / sizeof f[0]);
    for (int i = 0; i < n; i++) {
        if (!f[i].output || !f[i].path[0])
            continue;
        for (int j = 0; j < n; j++) {
            if (j == i || !f[j].path[0] || (f[j].output && j < i) ||
                strcmp(f[i].opt, f[j].opt) == 0)
                continue;
            bool allowed = (strcmp(f[i].opt, "--checkpoint") == 0 && strcmp(f[j].opt, "--resume") == 0) ||
                           (strcmp(f[i].opt, "--save") == 0 && strcmp(f[j].opt, "--init") == 0);
            if (allowed || !afile_same_file(f[i].path, f[j].path))
                continue;
            return err_set(err, DDP_ERR_INPUT,
                           "%s %s and %s %s are the same file: the %s would overwrite %s",
                           f[i].opt, f[i].path, f[j].opt, f[j].path, f[i].opt + 2,
                           f[j].output ? "the other output" : "an input");
        }
    }
    return DDP_OK;
}

/* --workload models a box alone: it needs the box, and nothing is trained,
 * so no output of a run and no gate */
static int check_workload(const config_t *c, const gate_opts_t *g, const app_opts_t *a, char *err)
{
    if (!a->hardware[0])
        return err_set(err, DDP_ERR_INPUT, "--workload %s: needs --hardware NAME|FILE, the box "
                       "to model it on", a->workload);
    const char *out = c->report_path[0] ? "--report" : c->trace_path[0] ? "--trace"
                    : c->save_path[0] ? "--save" : c->checkpoint_path[0] ? "--checkpoint"
                    : g->baseline[0] ? "--baseline" : g->against[0] ? "--against"
                    : a->emit_pytorch[0] ? "--emit-pytorch" : NULL;
    if (out)
        return err_set(err, DDP_ERR_INPUT, "--workload %s: nothing is trained, so %s has no run "
                       "(without --workload the run's own MLP is trained and modelled)",
                       a->workload, out);
    return DDP_OK;
}

static int finish(void *part, const config_t *c, const config_line_t *l, char *err)
{
    const app_opts_t *a = part;
    const gate_opts_t *g = config_line_part(l, &gate_options);
    if (a->emit_pytorch[0] && c->mode != MODE_SINGLE && c->mode != MODE_DP && c->mode != MODE_DDP)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: the script runs one mode: give "
                       "--mode single, dp or ddp");
    if (a->workload[0])
        TRY(check_workload(c, g, a, err));
    return check_paths(c, g, a, err);
}

const opt_table_t app_options = {rows, (int)(sizeof rows / sizeof rows[0]), sizeof(app_opts_t),
                                 NULL, finish};

void cmdline_init(config_line_t *l, config_t *run, gate_opts_t *gate, app_opts_t *app)
{
    config_line_init(l, run);
    config_line_add(l, &gate_options, gate);
    config_line_add(l, &app_options, app);
}
