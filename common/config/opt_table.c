/* common/config/opt_table.c: the command line over its tables (opt_table.h): strict
 * readers of a value, the defaults, getopt over every row, --help, argv less options. */
#include "common/config/opt_table.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/status.h"
#include "common/base/text.h"

// ---------------------------------------------------------------------------
// strict number parsing

int opt_parse_long(const char *opt, const char *s, long lo, long hi, long *out, char *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    bool digits = end != s && !*end && text_is_decimal(s, strlen(s)) && !strpbrk(s, ".eE");
    if (!digits)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not an integer", opt, s);
    if (errno == ERANGE || v > hi)
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too large (at most %ld)", opt, s, hi);
    if (v < lo)
        return err_set(err, DDP_ERR_INPUT, "--%s: %ld is too small (at least %ld)", opt, v, lo);
    *out = v;
    return DDP_OK;
}

/* A decimal number (no hex, inf or nan) in [lo, hi], or (lo, hi] when lo_open. */
int opt_parse_double(const char *opt, const char *s, double lo, double hi, bool lo_open,
                     double *out, char *err)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end || !text_is_decimal(s, strlen(s)))
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a number", opt, s);
    if (v > hi || !isfinite(v)) {
        /* a bound just under a round number (beta1's 0.999999999) prints as
         * that number, which is itself refused */
        char h[32];
        snprintf(h, sizeof h, "%g", hi);
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too large (%s %s)", opt, s,
                       strtod(h, NULL) > hi ? "it must be less than" : "at most", h);
    }
    if (v < lo || (lo_open && v == lo))
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is too small (%s %g)", opt, s,
                       lo_open ? "it must be more than" : "at least", lo);
    *out = v;
    return DDP_OK;
}

/* A byte count: digits and K, M or G (powers of 1024), as nccl-tests' -b and -e. */
int opt_parse_bytes(const char *opt, const char *s, long *out, char *err)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    static const char units[] = "kmg"; /* 2^10, 2^20, 2^30 */
    const char *u = end != s && *end ? strchr(units, tolower((unsigned char)*end)) : NULL;
    long mul = u ? 1L << (10 * (u - units + 1)) : 1;
    end += u != NULL;
    if (end == s || *end || errno || v < 0)
        return err_set(err, DDP_ERR_INPUT, "--%s: '%s' is not a byte count (e.g. 8, 64K, 16M, 1G)",
                       opt, s);
    if (v > (4L << 30) / mul)
        return err_set(err, DDP_ERR_INPUT, "--%s: %s is more than 4G", opt, s);
    *out = v * mul;
    return DDP_OK;
}

static int copy_path(const char *opt, const char *s, char *dst, char *err)
{
    if (!*s)
        return err_set(err, DDP_ERR_INPUT, "--%s: empty file name", opt);
    if (strlen(s) >= CONFIG_PATH_LEN)
        return err_set(err, DDP_ERR_INPUT, "--%s: file name longer than %d bytes", opt,
                       CONFIG_PATH_LEN - 1);
    strcpy(dst, s);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// one option

/* Set row o's field in part from its value v (NULL for a flag). */
static int apply(const opt_t *o, void *part, const char *v, char *err)
{
    void *f = (char *)part + o->off;
    long l = 0;
    double d = 0;
    switch (o->kind) {
    case K_PASS1:
        return DDP_OK;
    case K_ON:
    case K_OFF:
        *(bool *)f = o->kind == K_ON;
        return DDP_OK;
    case K_INT:
        TRY(opt_parse_long(o->name, v, (long)o->lo, (long)o->hi, &l, err));
        *(int *)f = (int)l;
        return DDP_OK;
    case K_LONG:
        return opt_parse_long(o->name, v, (long)o->lo, (long)o->hi, (long *)f, err);
    case K_FLOAT:
        TRY(opt_parse_double(o->name, v, o->lo, o->hi, false, &d, err));
        *(float *)f = (float)d;
        return DDP_OK;
    case K_DOUBLE:
    case K_ABOVE:
        return opt_parse_double(o->name, v, o->lo, o->hi, o->kind == K_ABOVE, (double *)f, err);
    case K_BYTES:
        return opt_parse_bytes(o->name, v, (long *)f, err);
    case K_PATH:
        return copy_path(o->name, v, (char *)f, err);
    case K_NAME: {
        int e = o->parse(v);
        if (e < 0)
            return err_set(err, DDP_ERR_INPUT, "--%s: unknown value '%s' (one of: %s)", o->name, v,
                           o->choices);
        *(int *)f = e; /* an enum field */
        return DDP_OK;
    }
    case K_SET:
        return o->set(part, o->name, v, err);
    }
    return err_set(err, DDP_ERR_INPUT, "internal: unhandled option --%s", o->name);
}

int opt_defaults(const opt_table_t *t, void *part, char *err)
{
    for (int i = 0; i < t->n; i++) {
        const opt_t *o = &t->rows[i];
        if (o->dflt && apply(o, part, o->arg ? o->dflt : NULL, err) != DDP_OK)
            /* a bad row in the table: the defaults must parse */
            return err_prefix(err, DDP_ERR_RUNTIME, "internal: the default of --%s", o->name);
    }
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the line: every table's rows, in order, numbered across the tables

void config_line_add(config_line_t *l, const opt_table_t *t, void *part)
{
    if (l->n < CONFIG_LINE_TABLES) {
        l->table[l->n] = t;
        l->part[l->n++] = part;
    }
}

void *config_line_part(const config_line_t *l, const opt_table_t *t)
{
    for (int i = 0; i < l->n; i++)
        if (l->table[i] == t)
            return l->part[i];
    return NULL;
}

/* Row g of the line (*part: the part it sets), or NULL. */
static const opt_t *row_at(const config_line_t *l, int g, void **part)
{
    for (int i = 0; i < l->n && g >= 0; g -= l->table[i++]->n)
        if (g < l->table[i]->n) {
            if (part)
                *part = l->part[i];
            return &l->table[i]->rows[g];
        }
    return NULL;
}

static int find(const config_line_t *l, const char *name)
{
    const opt_t *o;
    for (int g = 0; (o = row_at(l, g, NULL)); g++)
        if (strcmp(o->name, name) == 0)
            return g;
    return -1;
}

bool config_line_given(const config_line_t *l, const char *name)
{
    int g = find(l, name);
    return g >= 0 && g < CONFIG_LINE_ROWS && l->given[g];
}

/* getopt's value for row g (its short letter comes back as itself). */
#define OPT_VAL(g) (256 + (g))

/* getopt's long options and short letters for the line ("+h": -h is --help). */
typedef struct {
    struct option lo[CONFIG_LINE_ROWS + 1];
    char shorts[2 * CONFIG_LINE_ROWS + 4];
    int n;
} getopt_rows_t;

static void getopt_rows(const config_line_t *l, getopt_rows_t *g)
{
    size_t ns = 2;
    const opt_t *o;
    memcpy(g->shorts, "+h", 2);
    for (g->n = 0; g->n < CONFIG_LINE_ROWS && (o = row_at(l, g->n, NULL)); g->n++) {
        g->lo[g->n] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                      OPT_VAL(g->n)};
        if (o->letter) {
            g->shorts[ns++] = o->letter;
            if (o->arg)
                g->shorts[ns++] = ':';
        }
    }
    g->lo[g->n] = (struct option){0, 0, 0, 0};
    g->shorts[ns] = 0;
}

/* The row of getopt's answer id (OPT_VAL, or a letter), its number in *g. */
static const opt_t *row_of(const config_line_t *l, int id, void **part, int *g)
{
    const opt_t *o;
    for (*g = 0; id > 0 && (o = row_at(l, *g, part)); (*g)++)
        if (id == OPT_VAL(*g) || (o->letter && o->letter == id))
            return o;
    return NULL;
}

static bool is(const opt_t *o, const char *name) { return o && strcmp(o->name, name) == 0; }

/* Pass 1: --help, --version (CONFIG_EXIT_OK after printing), --model (*preset). */
static int pass1(const config_line_t *l, const getopt_rows_t *gr, int argc, char **argv,
                 FILE *out, const char **preset)
{
    int id, idx, g;
    opterr = 0;
    optind = 0; /* GNU: 0 restarts the scan from scratch */
    while ((id = getopt_long(argc, argv, gr->shorts, gr->lo, &idx)) != -1) {
        const opt_t *o = row_of(l, id, NULL, &g);
        if (id == 'h' || is(o, "help")) {
            config_line_usage(l, out);
            return CONFIG_EXIT_OK;
        }
        if (is(o, "version")) {
            fprintf(out, "ddpbench %s\n", DDPBENCH_VERSION);
            return CONFIG_EXIT_OK;
        }
        if (is(o, "model"))
            *preset = optarg;
    }
    return DDP_OK;
}

/* getopt's '?': the option it could not take, as one line. */
static int unknown(const config_line_t *l, char **argv, char *err)
{
    const char *bad = argv[optind - 1];
    int g;
    const opt_t *o = row_of(l, optopt, NULL, &g);
    if (o && o->letter && optopt == o->letter)
        return err_set(err, DDP_ERR_INPUT, "-%c (--%s): needs a value (%s)", optopt, o->name,
                       o->arg);
    if (optopt && optopt < 256)
        return err_set(err, DDP_ERR_INPUT, "unknown option '-%c' (see --help)", optopt);
    if (o && o->arg)
        return err_set(err, DDP_ERR_INPUT, "--%s: needs a value (%s)", o->name, o->arg);
    return err_set(err, DDP_ERR_INPUT, "unknown option '%s' (see --help)", bad);
}

int config_line_parse(config_line_t *l, int argc, char **argv, FILE *out, char *err)
{
    static getopt_rows_t gr; /* 6 KB: not on the stack (docs/faults.md) */
    getopt_rows(l, &gr);
    const char *preset = CONFIG_DEFAULT_PRESET;
    TRY(pass1(l, &gr, argc, argv, out, &preset));
    for (int t = 0; t < l->n; t++) {
        if (l->table[t]->defaults) {
            TRY(l->table[t]->defaults(l->part[t], preset, err));
            continue;
        }
        memset(l->part[t], 0, l->table[t]->size);
        TRY(opt_defaults(l->table[t], l->part[t], err));
    }

    /* Pass 2: every option, in order; the last one of a kind wins. */
    memset(l->given, 0, sizeof l->given);
    optind = 0;
    int id, idx, g;
    const char *last = NULL; /* the last option's argument */
    while ((id = getopt_long(argc, argv, gr.shorts, gr.lo, &idx)) != -1) {
        if (id == '?')
            return unknown(l, argv, err);
        void *part;
        const opt_t *o = row_of(l, id, &part, &g);
        if (!o)
            return err_set(err, DDP_ERR_INPUT, "internal: unhandled option '%s'", argv[optind - 1]);
        TRY(apply(o, part, optarg, err));
        l->given[g] = 1;
        last = optarg;
    }
    if (optind < argc) { /* getopt stops at "--" (no option's argument): the rest is no option */
        bool ended = strcmp(argv[optind - 1], "--") == 0 && argv[optind - 1] != last;
        return err_set(err, DDP_ERR_INPUT,
                       "unexpected argument '%s'%s (ddpbench takes no positional arguments%s)",
                       argv[optind], ended ? " after '--'" : "",
                       ended ? ": '--' ends the options" : "; options start with --");
    }
    for (int t = 0; t < l->n; t++)
        if (l->table[t]->finish)
            TRY(l->table[t]->finish(l->part[t], l->part[0], l, err));
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// --help

static void usage_row(FILE *f, const opt_t *o)
{
    if (o->section)
        fprintf(f, "\n%s:\n", o->section);
    char lhs[64], text[512];
    if (o->letter)
        snprintf(lhs, sizeof lhs, "-%c, --%s%s%s", o->letter, o->name, o->arg ? " " : "",
                 o->arg ? o->arg : "");
    else
        snprintf(lhs, sizeof lhs, "--%s%s%s", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    const char *d = o->shown ? o->shown : o->dflt;
    snprintf(text, sizeof text, "%s%s%s%s", o->help, d ? " [" : "", d ? d : "", d ? "]" : "");
    /* wrap the text at 79 columns under its own column */
    fprintf(f, "  %-24s", lhs);
    int col = 26;
    for (char *w = strtok(text, " "); w; w = strtok(NULL, " ")) {
        int len = (int)strlen(w);
        if (col > 26 && col + 1 + len > 79) {
            fprintf(f, "\n%26s", "");
            col = 26;
        }
        fprintf(f, " %s", w);
        col += 1 + len;
    }
    fputc('\n', f);
}

/* The other tables' rows shown after the run's row `name` (NULL: the unplaced). */
static void usage_after(FILE *f, const config_line_t *l, const char *name)
{
    for (int t = 1; t < l->n; t++) {
        const opt_table_t *x = l->table[t];
        for (int r = 0; r < x->n; r++) {
            bool here = name ? x->rows[r].after && strcmp(x->rows[r].after, name) == 0
                             : r == 0 && !x->rows[r].after;
            for (int k = r; here && k < x->n && (k == r || !x->rows[k].after); k++)
                usage_row(f, &x->rows[k]);
        }
    }
}

void config_line_usage(const config_line_t *l, FILE *f)
{
    fprintf(f,
            "usage: ddpbench [options]\n"
            "Trains one MLP on one host three ways (single device, DataParallel,\n"
            "DistributedDataParallel) and reports throughput, where the time goes,\n"
            "memory, and whether the results agree.\n");
    const opt_table_t *run = l->table[0];
    for (int i = 0; i < run->n; i++) {
        usage_row(f, &run->rows[i]);
        usage_after(f, l, run->rows[i].name);
    }
    usage_after(f, l, NULL);
    config_presets_usage(f);
    fprintf(f, "\nExit status: 0 ok (or no change, or improved), 1 a run failed, 2 bad input, 3\n"
               "regressed against --baseline or --against, 4 no verdict (the interval still\n"
               "straddles --tolerance), 128 + N stopped by signal N.  Both gates print a line\n"
               "starting \"verdict: \" (regressed, improved, no change or no verdict).\n");
}

// ---------------------------------------------------------------------------
// argv for a child run

int config_line_argv_without(const config_line_t *l, int argc, char **argv,
                             const char *const *drop, char **out)
{
    static getopt_rows_t gr;
    getopt_rows(l, &gr);
    int n = 0;
    if (argc > 0)
        out[n++] = argv[0];
    opterr = 0;
    optind = 0;
    int id, idx, at = 1, g;
    /* getopt_long leaves optind past the words an option took (one for
     * --x=v or a flag, two for --x v): those words go or stay together */
    while ((id = getopt_long(argc, argv, gr.shorts, gr.lo, &idx)) != -1) {
        const opt_t *o = row_of(l, id, NULL, &g);
        bool gone = false;
        for (int k = 0; o && drop[k]; k++)
            gone = gone || is(o, drop[k]);
        for (; at < optind && at < argc; at++)
            if (!gone)
                out[n++] = argv[at];
    }
    for (; at < argc; at++)
        out[n++] = argv[at];
    out[n] = NULL;
    optind = 0;
    return n;
}
