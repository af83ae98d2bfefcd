/* common/train/trainer.h: what every strategy needs before and after its
 * loop (the starting parameters, what its result records) and each step's
 * plan on the meter; the loop itself is composed of the other floors, a
 * strategy adding only its own synchronisation. */
#ifndef DDPBENCH_TRAINER_H
#define DDPBENCH_TRAINER_H

#include "common/config/config.h"
#include "common/data/schedule.h"
#include "common/measure/result.h"
#include "common/measure/step_meter.h"
#include "common/nn/model.h"

/* The starting parameters on the host: nn.Linear init from --seed, or the
 * weights of --init (a .safetensors file, see checkpoint.h). */
int trainer_initial_params(const config_t *c, const model_spec_t *spec, float *host, char *err);

/* Before the loop: the steps, warm-up and epochs into res, and what the run
 * trains on (for compare's verdict). */
void trainer_begin(run_result_t *res, const config_t *c, const schedule_t *sch);

/* Step g begins on the meter, planned from the schedule (timed, told, rows,
 * epoch, logged); it ends with step_meter_end(m, NULL, err). */
void trainer_step_begin(step_meter_t *m, const schedule_t *sch, long g);

/* After the loop: the final host parameters (res owns them now), each
 * device's skew, the story's copies and the figures. */
void trainer_end(run_result_t *res, size_t nparams, float *params);

#endif
