/* common/measure/timing.c: phase names (see timing.h). */
#include "common/measure/timing.h"


static const char *const names[PH_COUNT] = {
    "data", "h2d", "scatter", "replicate", "forward", "loss", "backward",
    "comm exposed", "all-gather wait", "comm hidden", "optimizer", "idle", "skew",
    "descheduled"};
static const char *const keys[PH_COUNT] = {
    "data_s", "h2d_s", "scatter_s", "replicate_s", "forward_s", "loss_s", "backward_s",
    "comm_exposed_s", "all_gather_wait_s", "comm_hidden_s", "optimizer_s", "idle_s", "skew_s",
    "descheduled_s"};

const char *phase_name(phase_t p) { return p < PH_COUNT ? names[p] : "?"; }
const char *phase_key(phase_t p) { return p < PH_COUNT ? keys[p] : "?"; }
