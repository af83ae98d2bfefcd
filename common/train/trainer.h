/* common/train/trainer.h: what every strategy needs before and after its
 * loop: the starting parameters, what its result records around the loop,
 * and the evaluation of the trained ones.  The
 * loop itself is composed of data/schedule.h (which samples), train/stage.h
 * (moving them to the device), nn/model.h and nn/optim.h (the step) and
 * measure/step_meter.h (what is measured); a strategy adds only its own
 * synchronisation. */
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

/* Before the loop: record in res the steps the run takes from the
 * schedule's start (--resume's), its warm-up and epochs, and what it trains
 * on (optimizer, sample stream: what compare's verdict needs to tell
 * rounding from a real difference). */
void trainer_begin(run_result_t *res, const config_t *c, const schedule_t *sch);

/* Step g begins on the meter, planned from the schedule: timed or warm-up,
 * the step --explain tells (schedule_told_step: the middle timed step), its
 * rows (this view's, and the global ones: the loss's denominator), epoch,
 * and whether it logs its loss (step_meter_logs).  It ends with
 * step_meter_end(m, NULL, err). */
void trainer_step_begin(step_meter_t *m, const schedule_t *sch, long g);

/* After the loop: the final parameters on the host (nparams floats, res
 * owns them now), each device's skew from the slowest one (step_meter_skew),
 * every device's copies of the told step in the story (step_meter_story_merge)
 * and the figures (result_finish). */
void trainer_end(run_result_t *res, size_t nparams, float *params);

#endif
