/* app/predict/cases.h: the published measurements the GPU model is held
 * against (app/predict/published_cases.json, compiled in like the
 * profiles): each case one figure as published (its source, setup and
 * numbers), what the model predicts for it from the shipped profiles, the
 * tolerance it is held to and whether it met it.  A case's declared status
 * ("pass" or "miss", with the term believed missing) is part of the data:
 * the unit test fails when a prediction moves across its tolerance, so the
 * table in docs/predict-cases.md stays true. */
#ifndef DDPBENCH_CASES_H
#define DDPBENCH_CASES_H

#include <stdbool.h>
#include <stddef.h>

#include <cJSON.h>

typedef struct {
    char id[64], what[160];
    double predicted, published, tolerance;
    bool pass, declared_pass, flag; /* flag: a yes/no case (no tolerance) */
} case_result_t;

/* The compiled-in cases, parsed (free with cJSON_Delete), or NULL. */
cJSON *cases_load(char *err);
/* One case of the list, predicted and judged; DDP_ERR_INPUT when it names
 * a profile or key that is not there. */
int cases_eval(const cJSON *c, case_result_t *r, char *err);
/* "checked against SOURCE: FIGURE predicted X, published Y (within,
 * tolerance T%)" for the first case held against this hardware profile's
 * name, or "". */
void cases_check(const char *hardware, char *out, size_t n);

#endif
