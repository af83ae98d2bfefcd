/* app/scenario.h: --scenario NAME, failures PyTorch users meet, reproduced
 * in a short run and explained: what they would see there, what ddpbench
 * measured, and the fix.  Each scenario checks that it behaved as described
 * (exit 0) and says so when it did not (exit 1): the lesson is a test.
 *
 *   uneven      ranks with different amounts of data hang without join
 *   straggler   one slow rank (--slow-rank): every rank waits at the all-reduce
 *   dp-device0  DP's device 0 carries the optimizer, the batch and the loss
 *   mismatch    a rank started on another job: caught at start-up and named
 *   set-epoch, loss-scale, no-sync, unused, collective-at-runtime, bucket-view:
 *               mistakes that do not crash (scenario_<name>.c, docs/scenarios.md)
 *
 * The scenario's options come first and the user's after them, so any of
 * them can be changed (--backend cuda, --slow-rank 1:8, --timeout 5). */
#ifndef DDPBENCH_SCENARIO_H
#define DDPBENCH_SCENARIO_H

#include <stdio.h>

/* Run the scenario argv names (--scenario NAME, or list); returns the exit
 * status (0 as described, 1 not, 2 bad input), or DDP_ERR_INTERRUPTED, and
 * when it failed or stopped, the line in msg (ERR_LEN; "" when the
 * scenario's verdict said it). */
int scenario_main(int argc, char **argv, const char *name, FILE *out, char *msg);

#endif
