/* common/report.h: what the user reads: the banner before a run and the
 * result after it. */
#ifndef DDPBENCH_REPORT_H
#define DDPBENCH_REPORT_H

#include <stdio.h>

#include "config.h"
#include "data.h"
#include "model.h"
#include "result.h"

/* One paragraph: mode, backend, devices, model, data, batch, steps. */
void report_banner(FILE *f, const config_t *c, const model_spec_t *spec, const dataset_t *d,
                   const char *backend_note);
/* The result table of one run. */
void report_result(FILE *f, const config_t *c, const model_spec_t *spec, const run_result_t *r);
/* "1.23 ms", "456 us", "7.89 s" */
const char *report_fmt_time(char *buf, size_t n, double seconds);
/* "12.3 MiB" */
const char *report_fmt_bytes(char *buf, size_t n, double bytes);
/* p-th percentile (0..100) of a copy of v[n]. */
double report_percentile(const double *v, long n, double p);

#endif
