/* app/scenario.h: --scenario NAME, failures PyTorch users meet, reproduced
 * in a short run and explained: what they would see there, what ddpbench
 * measured, and the fix.  Each scenario checks that it behaved as described
 * (exit 0) and says so when it did not (exit 1): the lesson is a test (the
 * scenarios: scenario.c's table, docs/scenarios.md).  The scenario's options
 * come first and the user's after them, so any of them can be changed. */
#ifndef DDPBENCH_SCENARIO_H
#define DDPBENCH_SCENARIO_H

#include <stdio.h>

/* Run the scenario argv names (--scenario NAME, or list); returns the exit
 * status (0 as described, 1 not, 2 bad input), or DDP_ERR_INTERRUPTED, and
 * when it failed or stopped, the line in msg (ERR_LEN; "" when the
 * scenario's verdict said it). */
int scenario_main(int argc, char **argv, const char *name, FILE *out, char *msg);

#endif
