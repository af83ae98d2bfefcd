/* common/config/fields.h: what derives from each option's row: its effect and how it
 * enters DDP's start-up check, the JSON echo, a baseline's identity, a checkpoint's facts
 * and the PyTorch twin, which walk the rows (tests/unit/test_config.c checks the rules). */
#ifndef DDPBENCH_CONFIG_FIELDS_H
#define DDPBENCH_CONFIG_FIELDS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config/config.h"

/* What an option changes (every row but a --no-X says).  The rules: ARITH or SHARED
 * <=> in the fingerprint (or FPV_RANK0); ARITH => the echo, the checkpoint and the
 * twin each say what they do with it; an echoed key => the baseline says if it matches. */
enum {
    CF_ARITH = 1 << 0,  /* the result's bits */
    CF_SHARED = 1 << 1, /* what every rank must share: the collectives it runs, when it stops */
    CF_SPEED = 1 << 2,  /* only how fast */
    CF_OUTPUT = 1 << 3, /* only what is printed or written */
    CF_META = 1 << 4,   /* what runs: --help, a preset, --scenario, --against */
};

/* The fingerprint's groups: the words of DDP's refusal ("another model (--layers, --act)") */
typedef enum {
    FP_NONE = 0,
    FP_OTHER,
    FP_MODEL,
    FP_LOSS,
    FP_OPTIM,
    FP_BATCH,
    FP_SCHEDULE,
    FP_ORDER,
    FP_DATA,
    FP_DDP,
    FP_WORLD,
    FP_BUILD,
    FP_NGROUPS
} cf_fp_group_t;

typedef enum {
    FPV_VALUE = 0, /* "--name value" (with a group) */
    FPV_GIVEN,     /* "--name on|off": whether a file was named */
    FPV_FILE,      /* "--name a file of hash H", or "none" */
    FPV_DERIVED,   /* in a line the fingerprint writes itself (data, world) */
    FPV_RANK0,     /* not needed: rank 0's value reaches every rank (a broadcast) */
} cf_fpv_t;

/* 0 in each: not said (the test names the row) */
typedef enum { J_UNSAID = 0, J_VALUE, J_DERIVED, J_NO } cf_json_t;
typedef enum { B_UNSAID = 0, B_MATCH, B_WARN, B_NO } cf_base_t;
typedef enum {
    C_UNSAID = 0,
    C_FACT,    /* a fact of its own: key = the name with '_' for '-' */
    C_DERIVED, /* recorded through another fact or one the checkpoint builds (world, data) */
    C_FREE,    /* a resumed run may change it */
} cf_ckpt_t;
typedef enum {
    T_UNSAID = 0,
    T_CONST,   /* a constant of its own (twin, twin_note) */
    T_DERIVED, /* a constant twin.c builds from several fields (named twin) */
    T_FILES,   /* carried by the files beside the script (weights, data, order) */
    T_REFUSED, /* --emit-pytorch refuses it */
    T_MOOT,    /* changes nothing the twin runs */
} cf_twin_t;

typedef struct {
    unsigned effect;      /* CF_* */
    cf_fp_group_t fp;     /* FP_NONE: not in the fingerprint */
    cf_fpv_t fpv;
    const char *json;     /* the key under "config" ("optimizer.lr") */
    cf_json_t jsonv;
    cf_base_t base;       /* a stored baseline: must match, or only warns */
    cf_ckpt_t ckpt;
    unsigned optims;      /* bit k: recorded only for optimizer kind k (0: every one) */
    const char *twin;     /* the twin's constant ("LR") */
    const char *twin_note;/* its comment before "[--name]" */
    cf_twin_t twinv;
} config_derive_t;

/* A row's value, typed, for whoever writes it. */
#define CONFIG_VALUE_LIST (MODEL_MAX_LAYERS + 1 > MAX_DEVICES ? MODEL_MAX_LAYERS + 1 : MAX_DEVICES)
typedef enum { CV_NONE = 0, CV_BOOL, CV_INT, CV_UINT, CV_FLOAT, CV_DOUBLE, CV_STR, CV_LIST } cv_type_t;
typedef struct {
    cv_type_t type;
    bool b;
    long long i;
    unsigned long long u;
    float f;
    double d;
    const char *s;    /* CV_STR */
    const char *word; /* beside a number: the word given for it ("auto"), text only */
    int n;            /* CV_LIST: n values (0: none) */
    long list[CONFIG_VALUE_LIST];
    char buf[64];     /* room for s */
} config_value_t;

/* The rows: their count, row i's name (no "--") and derivations, a name's row (or -1). */
int config_fields(void);
const char *config_field_name(int i);
const config_derive_t *config_field_derive(int i);
int config_field_find(const char *name);
/* Row i's value in c; CV_NONE for a row without a field (--help). */
void config_field_value(const config_t *c, int i, config_value_t *v);
/* The value as one word (the fingerprint's and a checkpoint's text): bools as yes/no,
 * a float its shortest exact decimal, a double %.9g, a list "a,b" or "none". */
void config_value_text(const config_value_t *v, const char *yes, const char *no, char *out,
                       size_t n);

#endif
