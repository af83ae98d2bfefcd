/* gate/ab.h: the A/B gate, ddpbench --against BASE [--candidate CAND].
 *
 * Two executables run the same options as separate child processes with
 * --json (ab_child.h), round by round in ABBA order; each round's pair gives
 * the ratio of their figures.  After every ABBA pair the gate looks at the
 * rounds (ab_judge.h: the median's confidence sequence, valid at every look)
 * and stops as soon as the interval settles the verdict, when another pair
 * would not fit --gate-budget, or at the most rounds (--repeat); then it
 * prints the result (ab_report.h).  The calls run one way: ab.c uses the
 * child, the judgement and the outputs; the outputs use the judgement. */
#ifndef DDPBENCH_AB_H
#define DDPBENCH_AB_H

#include "common/config/config.h"

/* The gate: run it and print its result; returns a status (DDP_OK for no
 * change or improved, DDP_ERR_REGRESSED, DDP_ERR_NOISY for no verdict,
 * DDP_ERR_RUNTIME / DDP_ERR_INTERRUPTED with err, DDP_ERR_INPUT). */
int ab_main(const config_t *cfg, int argc, char **argv, char *err);

#endif
