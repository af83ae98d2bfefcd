/* app/twin.c: --emit-pytorch, the script and the files it reads (see app.h). */
#include "app/app.h"

#include <stdlib.h>
#include <string.h>

#include "common/base/atomic_file.h"
#include "common/config/fields.h"
#include "common/data/sampler.h"
#include "common/data/schedule.h"
#include "common/io/checkpoint.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

/* The fixed body of the script, app/twin_body.py as a C string (the
 * Makefile makes twin_body.h from it). */
static const char body[] =
#include "app/twin_body.h" /* generated from app/twin_body.py (Makefile) */
    ;

/* The set: the four files the script reads, then the script, FILE.py.  The
 * script is last in the order they are committed (afile_commit_set): it is
 * what makes the set usable. */
#define TWIN_DATA_FILES 4
#define TWIN_SET_FILES 5
static const char *const twin_suffix[TWIN_SET_FILES] = {".init.safetensors", ".x.npy", ".y.npy",
                                                    ".order.npy", ".py"};

/* A .npy file (format 1.0) into a's temporary: its header dict padded to 64
 * bytes, then the data. */
static void write_npy(afile_t *a, const char *descr, const char *shape, const void *data,
                      size_t bytes)
{
    char dict[256];
    int n = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': %s, }",
                     descr, shape);
    int total = 10 + n + 1, pad = (64 - total % 64) % 64;
    unsigned short len = (unsigned short)(n + pad + 1);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len & 0xff),
                             (unsigned char)(len >> 8)};
    afile_write(a, pre, sizeof pre);
    afile_write(a, dict, (size_t)n);
    for (int i = 0; i < pad; i++)
        afile_write(a, " ", 1);
    afile_write(a, "\n", 1);
    afile_write(a, data, bytes);
}

/* s inside a Python string literal ("..." or a docstring): backslash, quote
 * and control characters escaped, UTF-8 sequences as \u / \U escapes and
 * any other byte as the surrogate Python's file system decoding gives it
 * (\udcXX), so os.fsencode() of the value is s's bytes exactly and nothing
 * in a file name can end the literal (a name is data, never code). */
static void py_escaped(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, cp = 0;
        int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len > 1) { /* a well-formed, shortest UTF-8 sequence only */
            cp = c & (0x7f >> len);
            for (int i = 1; i < len && len; i++)
                if ((p[i] & 0xc0) == 0x80)
                    cp = (cp << 6) | (p[i] & 0x3f);
                else
                    len = 0;
            if (len && ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
                        (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
                        (cp >= 0xd800 && cp <= 0xdfff)))
                len = 0;
        }
        if (len == 1) {
            if (c == '"' || c == '\\')
                fprintf(f, "\\%c", c);
            else if (c < 0x20 || c == 0x7f)
                fprintf(f, "\\x%02x", c);
            else
                fputc((int)c, f);
            p++;
        } else if (len == 0) {
            fprintf(f, "\\udc%02x", c); /* surrogateescape's byte */
            p++;
        } else {
            fprintf(f, cp > 0xffff ? "\\U%08x" : "\\u%04x", cp);
            p += len;
        }
    }
}

/* s as one word for a POSIX shell: as it is when every byte is plain
 * (letters, digits, _@%+=:,./-), else in single quotes, each ' as '\''.
 * Pasted into sh, the word is s exactly, and nothing in it runs ($(...),
 * `...`, ;, a glob). */
static void sh_word(FILE *f, const char *s)
{
    bool plain = *s != 0;
    for (const char *p = s; *p && plain; p++)
        plain = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
                strchr("_@%+=:,./-", *p);
    if (plain) {
        fputs(s, f);
        return;
    }
    fputc('\'', f);
    for (const char *p = s; *p; p++)
        if (*p == '\'')
            fputs("'\\''", f);
        else
            fputc(*p, f);
    fputc('\'', f);
}

/* A command line: first, then argv[1..argc) as words for the shell
 * (sh_word), malloc'd; NULL when out of memory. */
static char *sh_command(const char *first, int argc, char *const *argv)
{
    char *line = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&line, &len);
    if (!m)
        return NULL;
    fputs(first, m);
    for (int i = 1; i < argc; i++) {
        if (i > 1 || first[0])
            fputc(' ', m);
        sh_word(m, argv[i]);
    }
    if (fclose(m) != 0) {
        free(line);
        return NULL;
    }
    return line;
}

static void doc_as_is(FILE *f, const char *s)
{
    fputs(s, f);
}

/* Can s stand in a raw docstring (r"""...""") as it is: UTF-8 without
 * control characters, no """ to end it and no backslash at its end? */
static bool doc_raw_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t n = strlen(s);
    if (strstr(s, "\"\"\"") || (n && s[n - 1] == '\\'))
        return false;
    while (*p) {
        unsigned c = *p;
        int len = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (len == 0 || c < 0x20 || c == 0x7f)
            return false;
        for (int i = 1; i < len; i++)
            if ((p[i] & 0xc0) != 0x80)
                return false;
        p += len;
    }
    return true;
}

/* What has no twin: one line naming the option (another mode: the parse's,
 * app/cmdline/cmdline.c). */
static int unsupported(const config_t *c, char *err)
{
    if (c->nrank_samples)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: not with --rank-samples (the twin "
                       "reads DistributedSampler's stream)");
    if (c->resume_path[0])
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: not with --resume (use --init with "
                       "the checkpoint: the twin starts from weights)");
    if (c->zero)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: not with --zero (the twin steps a "
                       "whole optimizer on every rank: drop --zero, the result is the same)");
    if (c->comm_hook != HOOK_NONE)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: not with --comm-hook (the twin's DDP "
                       "registers no hook)");
    if (strategy_words(c->mode)->ranks && c->batch % c->ngpus)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: ddp's twin needs a global batch "
                       "its %d ranks divide (a PyTorch DataLoader has one batch_size per rank); "
                       "%d does not: use --batch-per-device N",
                       c->ngpus, c->batch);
    return DDP_OK;
}

/* A value as Python writes it: True/False, "name", [a, b], %.7g for a
 * float, %g for a double. */
static void twin_value(const config_value_t *v, char *out, size_t n)
{
    size_t used = 0;
    switch (v->type) {
    case CV_BOOL:
        snprintf(out, n, "%s", v->b ? "True" : "False");
        return;
    case CV_FLOAT:
        snprintf(out, n, "%.7g", (double)v->f);
        return;
    case CV_DOUBLE:
        snprintf(out, n, "%g", v->d);
        return;
    case CV_STR:
        snprintf(out, n, "\"%s\"", v->s ? v->s : "");
        return;
    case CV_LIST:
        used = (size_t)snprintf(out, n, "[");
        for (int i = 0; i < v->n && used < n; i++)
            used += (size_t)snprintf(out + used, n - used, "%s%ld", i ? ", " : "", v->list[i]);
        if (used < n)
            snprintf(out + used, n - used, "]");
        return;
    default:
        config_value_text(v, "True", "False", out, n);
        return;
    }
}

/* The constants built from several fields (a row's T_DERIVED names them). */
static void derived_const(FILE *f, const char *name, const config_t *c, long steps)
{
    int world = strategy_words(c->mode)->reference ? 1 : c->ngpus;
    if (strcmp(name, "WORLD") == 0) {
        fprintf(f, "WORLD         = %d  # devices; DDP spawns a rank on each  [--gpus]\n", world);
        char ids[256] = "";
        for (int i = 0; i < world; i++) {
            size_t u = strlen(ids);
            snprintf(ids + u, sizeof ids - u, "%s%d", i ? ", " : "", c->gpus[i]);
        }
        fprintf(f, "GPUS          = [%s]  # the device ids, one per rank (on cuda)  [--gpus]\n",
                ids);
    } else if (strcmp(name, "DEVICE") == 0) {
        fprintf(f, "DEVICE        = \"%s\"  # cpu (DDP over gloo) | cuda (over nccl)  [--backend]\n",
                c->backend == BACKEND_CUDA ? "cuda" : "cpu");
    } else if (strcmp(name, "STEPS") == 0) {
        fprintf(f, "%-13s = %ld  # optimizer steps in all  [--steps, --epochs]\n", "STEPS", steps);
    }
}

/* The script: its docstring, imports and the job's constants, then the body. */
static int write_script(afile_t *a, const char *stem_base, const config_t *c, long steps,
                        int argc, char **argv, char *err)
{
    FILE *f = afile_stream(a);
    if (!f)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    const char *mode = mode_name(c->mode);
    /* The docstring shows the commands as the shell takes them: the words as
     * given, quotes and backslashes and all, quoted where they need it, so a
     * line pasted into sh runs that command and nothing else.  As a raw
     * string where they can stand in one as they are; else escaped for
     * Python (a control character, bytes that are not UTF-8, a \"\"\"), the
     * docstring's value still the command exactly. */
    char script[CONFIG_PATH_LEN + 4];
    snprintf(script, sizeof script, "%s.py", stem_base);
    char *const one[2] = {NULL, script};
    char *run = sh_command("ddpbench", argc, argv), *py = sh_command("", 2, one);
    if (!run || !py) {
        free(run);
        free(py);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory");
    }
    bool raw = doc_raw_ok(run) && doc_raw_ok(py);
    void (*doc)(FILE *, const char *) = raw ? doc_as_is : py_escaped;
    fprintf(f, "#!/usr/bin/env python3\n%s\"\"\"The PyTorch twin of a ddpbench run (%s):\n   ",
            raw ? "r" : "", mode);
    doc(f, run);
    fprintf(f, "\n\nWritten by ddpbench --emit-pytorch: the same layers, activation, loss,\n"
               "optimizer and hyper-parameters (below), the same initial weights, data and\n"
               "sample order (the files beside this one), the same global batch, as %s.\n"
               "It prints the final loss and the checksum line ddpbench prints:\n"
               "    python3 ",
            strategy_words(c->mode)->pytorch);
    doc(f, py);
    fputs("\n    python3 ", f);
    doc(f, py);
    fputs(" --save final.safetensors   # and keep the final weights\n\"\"\"\n", f);
    free(run);
    free(py);
    fprintf(f, "import argparse\nimport contextlib\nimport json\nimport math\nimport os\n"
               "import socket\nimport struct\n\nimport numpy as np\nimport torch\n"
               "import torch.distributed as dist\nimport torch.multiprocessing as mp\n"
               "import torch.nn as nn\n\nHERE = os.path.dirname(os.path.abspath(__file__))\n\n");
    fprintf(f, "# ---- the job, as ddpbench ran it (its option in brackets)\n");
    /* each option row's constant (config/fields.h), in the table's order;
     * the constants that join several fields where their first row stands */
    const char *done[8];
    int ndone = 0;
    for (int i = 0; i < config_fields(); i++) {
        const config_derive_t *d = config_field_derive(i);
        const char *opt = config_field_name(i);
        if (d->twinv == T_DERIVED) {
            bool seen = false;
            for (int k = 0; k < ndone; k++)
                seen = seen || strcmp(done[k], d->twin) == 0;
            if (!seen && ndone < 8)
                derived_const(f, done[ndone++] = d->twin, c, steps);
            continue;
        }
        if (d->twinv != T_CONST)
            continue;
        config_value_t v;
        config_field_value(c, i, &v);
        char val[512];
        twin_value(&v, val, sizeof val);
        fprintf(f, "%-13s = %s  # %s%s[--%s]\n", d->twin, val, d->twin_note ? d->twin_note : "",
                d->twin_note ? "  " : "", opt);
    }
    /* the files' names as Python literals (py_escaped): a name is data */
    static const char *const file_keys[TWIN_DATA_FILES][2] = {
        {"INIT_FILE", "the initial weights  [--seed, --init]"},
        {"X_FILE", "the features  [--data, or the synthetic set]"},
        {"Y_FILE", "the targets (class ids for ce)"},
        {"ORDER_FILE", "each epoch's permutation of the samples"}};
    for (int i = 0; i < TWIN_DATA_FILES; i++) {
        char name[CONFIG_PATH_LEN + 32];
        snprintf(name, sizeof name, "%s%s", stem_base, twin_suffix[i]);
        fprintf(f, "%-13s = \"", file_keys[i][0]);
        py_escaped(f, name);
        fprintf(f, "\"  # %s\n", file_keys[i][1]);
    }
    fputs("\n", f);
    fputs(body, f);
    return DDP_OK;
}

int twin_emit(const config_t *c, const char *path, const model_spec_t *spec, const dataset_t *d,
              int argc, char **argv, FILE *info, char *err)
{
    TRY(unsupported(c, err));
    size_t n = strlen(path);
    if (n < 4 || strcmp(path + n - 3, ".py") != 0)
        return err_set(err, DDP_ERR_INPUT, "--emit-pytorch: '%s' must end in .py", path);
    char stem[CONFIG_PATH_LEN];
    snprintf(stem, sizeof stem, "%.*s", (int)(n - 3), path);
    const char *slash = strrchr(stem, '/');
    const char *base = slash ? slash + 1 : stem;

    schedule_t sch;
    TRY(schedule_init(&sch, c, d, 1, 0, err));
    long steps = sch.total_steps, epochs = sch.epochs;
    schedule_free(&sch);
    sampler_t smp;
    TRY(sampler_init(&smp, d->n, 1, 0, c->shuffle, c->drop_last, c->seed, err));

    /* Every file of the set is checked before any is written (a directory,
     * a link or a file that cannot be replaced, by name), then all are
     * written to temporaries and committed as one: a failure leaves the old
     * set or the whole new one (afile_commit_set, base/atomic_file.h). */
    char paths[TWIN_SET_FILES][CONFIG_PATH_LEN + 32];
    afile_t *files = calloc(TWIN_SET_FILES, sizeof *files); /* 8 KiB each: not on the stack */
    if (!files)
        return err_set(err, DDP_ERR_RUNTIME, "--emit-pytorch: out of memory");
    int rc = DDP_OK, at = -1;
    for (int i = 0; i < TWIN_SET_FILES && rc == DDP_OK; i++) {
        snprintf(paths[i], sizeof paths[i], "%s%s", stem, twin_suffix[i]);
        if ((rc = afile_check(paths[i], err)) != DDP_OK)
            at = i;
    }
    int opened = 0;
    for (; opened < TWIN_SET_FILES && rc == DDP_OK; opened++)
        if ((rc = afile_open(&files[opened], paths[opened], err)) != DDP_OK)
            at = opened;
    float *params = malloc(spec->nparams * sizeof(float));
    uint32_t *perm = malloc(d->n * sizeof *perm);
    int64_t *order = malloc((size_t)epochs * d->n * sizeof *order);
    int64_t *labels = d->labels ? malloc(d->n * sizeof *labels) : NULL;
    if (rc == DDP_OK && (!params || !perm || !order || (d->labels && !labels)))
        rc = err_set(err, DDP_ERR_RUNTIME, "--emit-pytorch: out of memory");
    if (rc == DDP_OK)
        rc = trainer_initial_params(c, spec, params, err);
    if (rc == DDP_OK && (rc = ckpt_weights_into(&files[0], c, spec, params, err)) != DDP_OK)
        at = 0;
    char shape[96];
    if (rc == DDP_OK) {
        snprintf(shape, sizeof shape, "(%zu, %d)", d->n, d->in_dim);
        write_npy(&files[1], "<f4", shape, d->x, d->n * (size_t)d->in_dim * sizeof(float));
        if (labels) { /* class ids, as CrossEntropyLoss takes them */
            for (size_t i = 0; i < d->n; i++)
                labels[i] = (int64_t)d->y[i];
            snprintf(shape, sizeof shape, "(%zu,)", d->n);
            write_npy(&files[2], "<i8", shape, labels, d->n * sizeof *labels);
        } else {
            snprintf(shape, sizeof shape, "(%zu, %d)", d->n, d->tgt_cols);
            write_npy(&files[2], "<f4", shape, d->y, d->n * (size_t)d->tgt_cols * sizeof(float));
        }
        for (long e = 0; e < epochs; e++) {
            sampler_permutation(&smp, e, perm);
            for (size_t i = 0; i < d->n; i++)
                order[(size_t)e * d->n + i] = perm[i];
        }
        snprintf(shape, sizeof shape, "(%ld, %zu)", epochs, d->n);
        write_npy(&files[3], "<i8", shape, order, (size_t)epochs * d->n * sizeof *order);
        if ((rc = write_script(&files[4], base, c, steps, argc, argv, err)) != DDP_OK)
            at = 4;
    }
    if (rc == DDP_OK && (rc = afile_commit_set(files, TWIN_SET_FILES, err)) != DDP_OK)
        at = -2; /* the message names the file at fault */
    else if (rc != DDP_OK)
        for (int i = 0; i < opened; i++)
            afile_abort(&files[i]);
    free(files);
    free(params);
    free(perm);
    free(order);
    free(labels);
    if (rc != DDP_OK) {
        if (strncmp(err, "--emit-pytorch", 14) == 0)
            return rc;
        if (at >= 0 && at < TWIN_DATA_FILES) /* the file at fault, beside the script */
            return err_prefix(err, rc, "--emit-pytorch %s: %s", path, paths[at]);
        if (at == -2)
            return err_prefix(err, rc, "--emit-pytorch");
        return err_prefix(err, rc, "--emit-pytorch %s", path);
    }
    if (!c->quiet) { /* the names as shell words: the line can be pasted */
        fputs("ddpbench: wrote ", info);
        sh_word(info, path);
        fprintf(info, " (the %s job in PyTorch) and ", mode_name(c->mode));
        sh_word(info, stem);
        fputs(".{init.safetensors,x.npy,y.npy,order.npy} beside it: python3 ", info);
        sh_word(info, path);
        fputc('\n', info);
    }
    return DDP_OK;
}
