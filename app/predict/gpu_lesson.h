/* app/predict/gpu_lesson.h: --hardware NAME|FILE [--workload NAME|FILE]:
 * single, DP and DDP modelled on a GPU box one does not have (gpu_model.h),
 * as the program shows it: the table on 1..count GPUs and the sentence
 * naming the term that makes DP slower, --explain's terms, --json's
 * "predict" object, and the page's chart (a section report_html.c calls
 * back).  With --workload nothing is trained: gpu_lesson_main is the job. */
#ifndef DDPBENCH_GPU_LESSON_H
#define DDPBENCH_GPU_LESSON_H

#include <stdbool.h>
#include <stdio.h>

#include <cJSON.h>

#include "app/predict/gpu_model.h"
#include "common/config/config.h"

typedef struct {
    bool on;
    hw_profile_t hw;
    workload_t wl;
    gpu_row_t rows[GPU_MAX_DEVICES]; /* 1..hw.count */
    char check[512];                  /* "checked against SOURCE: ..." or "" */
} gpu_lesson_t;

/* Load the profiles the options name and model them (no --hardware: off). */
int gpu_lesson_prepare(const config_t *c, gpu_lesson_t *g, char *err);
void gpu_lesson_print(FILE *f, const gpu_lesson_t *g);
void gpu_lesson_explain(FILE *f, const gpu_lesson_t *g);
cJSON *gpu_lesson_json(const gpu_lesson_t *g);
/* The page's section (report_page_t's gpu callback; arg: the lesson). */
void gpu_lesson_page(FILE *f, const void *arg);
/* --workload: the prediction alone, nothing trained. */
int gpu_lesson_main(const config_t *c, char *err);

#endif
