/* common/timing.c: monotonic clocks and phase names (see timing.h). */
#include "measure/timing.h"

#include <time.h>

static const char *const names[PH_COUNT] = {
    "data", "h2d", "scatter", "replicate", "forward", "loss", "backward",
    "comm exposed", "comm hidden", "optimizer", "idle"};
static const char *const keys[PH_COUNT] = {
    "data_s", "h2d_s", "scatter_s", "replicate_s", "forward_s", "loss_s", "backward_s",
    "comm_exposed_s", "comm_hidden_s", "optimizer_s", "idle_s"};

const char *phase_name(phase_t p) { return p < PH_COUNT ? names[p] : "?"; }
const char *phase_key(phase_t p) { return p < PH_COUNT ? keys[p] : "?"; }

uint64_t now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

double now_s(void) { return (double)now_ns() * 1e-9; }
