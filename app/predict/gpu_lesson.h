/* app/predict/gpu_lesson.h: --hardware NAME|FILE [--workload NAME|FILE]:
 * single, DP and DDP modelled on a GPU box one does not have (gpu_model.h)
 * on 1..count GPUs, and the published case on that box it is checked
 * against; app/report/report_gpu.c shows it. */
#ifndef DDPBENCH_GPU_LESSON_H
#define DDPBENCH_GPU_LESSON_H

#include <stdbool.h>

#include "app/predict/gpu_model.h"
#include "common/config/config.h"

typedef struct {
    bool on;
    hw_profile_t hw;
    workload_t wl;
    gpu_row_t rows[GPU_MAX_DEVICES]; /* 1..hw.count */
    char check[512];                  /* "checked against SOURCE: ..." or "" */
} gpu_lesson_t;

/* Load the profiles named (hardware "": off; workload "": the run's MLP
 * from c) and model them. */
int gpu_lesson_prepare(const char *hardware, const char *workload, const config_t *c,
                       gpu_lesson_t *g, char *err);

#endif
