/* tests/unit/tu_flip.h: set an option's field to another value than it has (within
 * its bounds; a setter's row uses its examples), for the tests that flip every row of
 * the run's table and check the fingerprint, the echo and a checkpoint see it. */
#ifndef DDPBENCH_TU_FLIP_H
#define DDPBENCH_TU_FLIP_H

#include <stdio.h>
#include <string.h>

#include "common/base/status.h"
#include "common/config/opt_table.h"

/* Another number than v within [lo, hi] (v below lo: an unresolved "auto",
 * which stands for lo or more). */
static inline double tu_other_number(double v, double lo, double hi)
{
    if (v < lo)
        return lo + 1 <= hi ? lo + 1 : hi;
    if (v + 1 <= hi)
        return v + 1;
    if (v - 1 >= lo && v - 1 > lo)
        return v - 1;
    return (v + lo) / 2;
}

/* DDP_ERR_INPUT when row i cannot be flipped (a flag's --no-X, --help). */
static inline int tu_field_flip(config_t *c, int i, char *err)
{
    const opt_t *o = &config_options.rows[i];
    void *f = (char *)c + o->off;
    char buf[64];
    switch (o->kind) {
    case K_ON:
        *(bool *)f = !*(bool *)f;
        return DDP_OK;
    case K_INT:
        *(int *)f = (int)tu_other_number(*(int *)f, o->lo, o->hi);
        return DDP_OK;
    case K_LONG:
    case K_BYTES:
        *(long *)f = o->kind == K_BYTES ? *(long *)f * 2 + 1
                                        : (long)tu_other_number((double)*(long *)f, o->lo, o->hi);
        return DDP_OK;
    case K_FLOAT:
        *(float *)f = (float)tu_other_number(*(float *)f, o->lo, o->hi);
        return DDP_OK;
    case K_DOUBLE:
    case K_ABOVE:
        *(double *)f = tu_other_number(*(double *)f, o->lo, o->hi);
        return DDP_OK;
    case K_PATH:
        snprintf((char *)f, CONFIG_PATH_LEN, "%s", *(char *)f ? "" : "flipped.file");
        return DDP_OK;
    case K_NAME: { /* the next of its choices that is another value */
        int now = *(int *)f;
        snprintf(buf, sizeof buf, "%s", o->choices);
        for (char *save = NULL, *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
            if (o->parse(t) >= 0 && o->parse(t) != now) {
                *(int *)f = o->parse(t);
                return DDP_OK;
            }
        break;
    }
    case K_SET: {
        config_t before = *c;
        for (int k = 0; k < 2 && o->examples[k]; k++) {
            TRY(o->set(c, o->name, o->examples[k], err));
            if (memcmp(&before, c, sizeof *c) != 0)
                return DDP_OK;
        }
        break;
    }
    case K_OFF:
    case K_PASS1:
        break;
    }
    return err_set(err, DDP_ERR_INPUT, "--%s: no other value to flip to", o->name);
}

#endif
