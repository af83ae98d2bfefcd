/* gate/ab_report.h: the A/B gate's outputs: the text (stdout; stderr under
 * --json or --csv), --json (one object: the judgement, how the gate ran,
 * every round of both sides) and --csv (a row per round with the interval
 * and the provenance).  docs/gate.md shows each. */
#ifndef DDPBENCH_AB_REPORT_H
#define DDPBENCH_AB_REPORT_H

#include <stdio.h>

#include "gate/ab_judge.h"
#include "common/config/config.h"


void ab_print_text(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                   const ab_judgement_t *j);
/* DDP_OK, or DDP_ERR_RUNTIME when the write failed */
int ab_print_json(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j);
void ab_print_csv(FILE *f, const config_t *cfg, const ab_gate_t *g, const ab_round_t *r, int nr,
                  const ab_judgement_t *j);

#endif
