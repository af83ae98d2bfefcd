/* app/predict/predict_zero.h: --predict's table of DDP's ZeRO stages (predict_zero.c). */
#ifndef DDPBENCH_PREDICT_ZERO_H
#define DDPBENCH_PREDICT_ZERO_H

#include <stdio.h>

#include "common/config/config.h"
#include "app/predict/predict.h"
#include "common/nn/model.h"
#include "common/train/strategy.h"

/* DDP's ZeRO stages on 1..8 devices under c: bytes, time (in: the measured
 * collectives), memory as ddp's table allocates it plus the activations of
 * tgt_cols-wide batches, and, under --mem-limit (mem_limit bytes, 0:
 * none), the crossover. */
void predict_zero_table(FILE *f, const config_t *c, double mem_limit, const model_spec_t *s,
                        int tgt_cols, const predict_in_t *in, const strategy_t *ddp);

#endif
