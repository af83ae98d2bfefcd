/* common/measure/trace.c: creating, copying and naming trace recorders (see trace.h). */
#include "common/measure/trace.h"

#include <stdlib.h>
#include <string.h>

uint32_t trace_capacity(int accum, int extra_per_step)
{
    /* per step: the step itself, every phase once per micro-batch, the extras */
    uint64_t per_step = 1 + (uint64_t)PH_COUNT * (uint64_t)(accum > 0 ? accum : 1) +
                        (uint64_t)(extra_per_step > 0 ? extra_per_step : 0);
    uint64_t cap = per_step * TRACE_MAX_STEPS;
    return cap > TRACE_MAX_EVENTS ? TRACE_MAX_EVENTS : (uint32_t)cap;
}

size_t trace_rec_bytes(uint32_t cap) { return sizeof(trace_rec_t) + (size_t)cap * sizeof(trace_event_t); }

void trace_rec_init(trace_rec_t *t, uint32_t cap, int device)
{
    memset(t, 0, sizeof *t);
    t->cap = cap;
    t->device = device;
    t->max_steps = TRACE_MAX_STEPS;
}

trace_rec_t *trace_rec_create(uint32_t cap, int device)
{
    trace_rec_t *t = malloc(trace_rec_bytes(cap));
    if (t)
        trace_rec_init(t, cap, device);
    return t;
}

trace_rec_t *trace_rec_clone(const trace_rec_t *t)
{
    if (!t)
        return NULL;
    uint32_t n = t->n <= t->cap ? t->n : t->cap; /* a torn segment must not overrun */
    trace_rec_t *c = malloc(trace_rec_bytes(n));
    if (!c)
        return NULL;
    memcpy(c, t, sizeof *c);
    memcpy(c->ev, t->ev, (size_t)n * sizeof *c->ev);
    c->cap = c->n = n;
    return c;
}

void trace_rec_free(trace_rec_t *t) { free(t); }

const char *trace_kind_name(trace_kind_t k)
{
    static const char *const extra[] = {"step",    "all-reduce", "broadcast", "replicate",
                                        "scatter", "gather",     "reduce",     "reduce-scatter"};
    if ((int)k >= 0 && (int)k < PH_COUNT)
        return phase_name((phase_t)k);
    if (k >= TR_STEP && k < TR_KIND_COUNT)
        return extra[k - TR_STEP];
    return "?";
}

