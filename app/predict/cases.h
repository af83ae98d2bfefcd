/* app/predict/cases.h: the published measurements the GPU model is held against
 * (published_cases.json, compiled in like the profiles), each predicted from the shipped
 * profiles and judged against its tolerance; docs/predict-cases.md says how the unit test
 * holds the declared status ("pass" or "miss") to it. */
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
