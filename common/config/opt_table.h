/* common/config/opt_table.h: an option table (rows that set the fields of one struct,
 * its part), and the command line made of several: the run's (config_t) first, then
 * the program's and the gate's, so a module includes the part it reads.  One parse
 * fills every part (the last option of a kind wins) and --help prints every row; a row
 * is written with the macros below, OPT_PART naming its table's struct. */
#ifndef DDPBENCH_OPT_TABLE_H
#define DDPBENCH_OPT_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "common/config/config.h"
#include "common/config/fields.h"

typedef enum {
    K_PASS1, /* handled before the others (--help, --version, --model) */
    K_ON,    /* a flag: the bool field becomes true */
    K_OFF,   /* a flag: the bool field becomes false (--no-X) */
    K_INT,   /* an int in [lo, hi] */
    K_LONG,  /* a long in [lo, hi] */
    K_FLOAT, /* a float in [lo, hi] */
    K_DOUBLE,/* a double in [lo, hi] */
    K_ABOVE, /* a double in (lo, hi] */
    K_BYTES, /* a long byte count, K/M/G suffixes */
    K_PATH,  /* a file name (CONFIG_PATH_LEN) */
    K_NAME,  /* an enum by name: parse(v) >= 0, choices for the error */
    K_SET,   /* set(): a setter of its own */
} opt_kind_t;

typedef struct {
    const char *name;
    const char *arg;     /* NULL: a flag */
    const char *dflt;    /* the default, through the setter (a flag: "on"); NULL: preset's */
    const char *shown;   /* --help's [default] when it is not dflt ("preset", "none") */
    const char *help;
    const char *section; /* starts a new section in --help */
    opt_kind_t kind;
    size_t off;          /* the field in its table's part */
    double lo, hi;
    int (*parse)(const char *); /* K_NAME */
    const char *choices;        /* K_NAME */
    const char *(*show)(int);   /* K_NAME: the value's name */
    /* K_SET: option name's value v (NULL for a flag) into the part */
    int (*set)(void *part, const char *name, const char *v, char *err);
    /* the value the derivations see, where the kind does not say (a setter's field) */
    void (*get)(const void *part, config_value_t *v);
    const char *examples[2];    /* K_SET: two values for tests/unit/tu_flip.h */
    char letter;                /* a short form (nccl-tests' letters for --mode comm) */
    const char *after;          /* the run's row --help shows it below (with the rows
                                   after it up to the next with an after) */
    config_derive_t d;          /* what derives from it (fields.h; the run's table alone) */
} opt_t;

typedef struct config_line config_line_t;

typedef struct {
    const opt_t *rows;
    int n;
    size_t size; /* its part */
    /* Its defaults under the --model preset named; NULL: zeros, then its rows' dflt. */
    int (*defaults)(void *part, const char *preset, char *err);
    /* After every option: what joins its fields (DDP_ERR_INPUT, one line), or NULL. */
    int (*finish)(void *part, const config_t *run, const config_line_t *line, char *err);
} opt_table_t;

/* The command line: its tables and the parts they fill (the run's first). */
#define CONFIG_LINE_TABLES 4
#define CONFIG_LINE_ROWS 160
struct config_line {
    int n;
    const opt_table_t *table[CONFIG_LINE_TABLES];
    void *part[CONFIG_LINE_TABLES];
    unsigned char given[CONFIG_LINE_ROWS]; /* after a parse: each row's option was given */
};

/* The run's table (options.c). */
extern const opt_table_t config_options;

/* A line of the run's table alone, filling run; then add the others'. */
void config_line_init(config_line_t *l, config_t *run);
void config_line_add(config_line_t *l, const opt_table_t *t, void *part);
/* The whole parse (config_parse over every table), each table's finish last. */
int config_line_parse(config_line_t *l, int argc, char **argv, FILE *out, char *err);
/* The usage text: every row of every table, with its default. */
void config_line_usage(const config_line_t *l, FILE *f);
/* Whether the last parse was given option name. */
bool config_line_given(const config_line_t *l, const char *name);
/* The part table t fills (NULL: not on this line). */
void *config_line_part(const config_line_t *l, const opt_table_t *t);
/* argv less every option named in drop[] (NULL-ended, long names) and their values,
 * into out (argc + 1 slots, NULL-ended, as the parse reads them); returns its count. */
int config_line_argv_without(const config_line_t *l, int argc, char **argv,
                             const char *const *drop, char **out);

/* Table t's defaults into its part (the rows' dflt, through their setters). */
int opt_defaults(const opt_table_t *t, void *part, char *err);
/* For setters: the parse's own readers of a value, each one line on error. */
int opt_parse_long(const char *opt, const char *s, long lo, long hi, long *out, char *err);
int opt_parse_double(const char *opt, const char *s, double lo, double hi, bool lo_open,
                     double *out, char *err);
int opt_parse_bytes(const char *opt, const char *s, long *out, char *err);

/* The rows' macros: what a row sets (in the struct OPT_PART names) ... */
#define FIELD(f) .off = offsetof(OPT_PART, f)
#define ON(f) .kind = K_ON, FIELD(f)
#define OFF(f) .kind = K_OFF, FIELD(f)
#define INT(f, a, b) .kind = K_INT, FIELD(f), .lo = (a), .hi = (b)
#define LONG(f, a, b) .kind = K_LONG, FIELD(f), .lo = (a), .hi = (b)
#define FLOAT(f, a, b) .kind = K_FLOAT, FIELD(f), .lo = (a), .hi = (b)
#define DOUBLE(f, a, b) .kind = K_DOUBLE, FIELD(f), .lo = (a), .hi = (b)
#define ABOVE(f, a, b) .kind = K_ABOVE, FIELD(f), .lo = (a), .hi = (b)
#define BYTES(f) .kind = K_BYTES, FIELD(f)
#define PATH(f) .kind = K_PATH, FIELD(f)
#define NAME(f, stem, ch)                                                                  \
    .kind = K_NAME, FIELD(f), .parse = stem##_parse, .show = show_##stem, .choices = (ch)
#define SET(fn, get_fn, ex1, ex2)                                                          \
    .kind = K_SET, .set = (fn), .get = (get_fn), .examples = {(ex1), (ex2)}
#define PASS1 .kind = K_PASS1
/* ... and what derives from it (fields.h): effect, fingerprint, JSON echo (key, and
 * the baseline: MATCH | WARN | NO), checkpoint, twin */
#define EFF(e) .d.effect = (e)
#define FPRINT(g) .d.fp = FP_##g
#define FPRINT_GIVEN(g) .d.fp = FP_##g, .d.fpv = FPV_GIVEN
#define FPRINT_FILE(g) .d.fp = FP_##g, .d.fpv = FPV_FILE
#define FPRINT_D(g) .d.fp = FP_##g, .d.fpv = FPV_DERIVED
#define FPRINT_RANK0 .d.fpv = FPV_RANK0
#define JSON(k, b) .d.json = (k), .d.jsonv = J_VALUE, .d.base = B_##b
#define JSON_D(k, b) .d.json = (k), .d.jsonv = J_DERIVED, .d.base = B_##b
#define NO_JSON .d.jsonv = J_NO
#define CKPT .d.ckpt = C_FACT
#define CKPT_D .d.ckpt = C_DERIVED
#define CKPT_FREE .d.ckpt = C_FREE
#define SGD_ONLY .d.optims = 1u << OPTIM_SGD
#define ADAM_ONLY .d.optims = (1u << OPTIM_ADAM) | (1u << OPTIM_ADAMW)
#define TWIN(k, note) .d.twin = (k), .d.twin_note = (note), .d.twinv = T_CONST
#define TWIN_D(k) .d.twin = (k), .d.twinv = T_DERIVED
#define TWIN_FILES .d.twinv = T_FILES
#define TWIN_REFUSED .d.twinv = T_REFUSED
#define TWIN_MOOT .d.twinv = T_MOOT
#define OPT_STR_(x) #x
#define OPT_STR(x) OPT_STR_(x) /* a default written as a number elsewhere */

#endif
