/* app/scenario_impl.h: the scenarios' harness (scenario.c), for the
 * scenarios in files of their own (scenario_<name>.c), each one function
 * plugged into scenario.c's table, as nccl-tests' variants plug into its
 * harness.  A scenario runs its runs, prints what PyTorch users see, what
 * ddpbench measured (from the runs' own records) and the fix, and returns
 * scen_verdict's status. */
#ifndef DDPBENCH_SCENARIO_IMPL_H
#define DDPBENCH_SCENARIO_IMPL_H

#include <stdbool.h>
#include <stdio.h>

#include "app/app.h"
#include "app/report/report_page.h"
#include "common/measure/result.h"

typedef struct {
    FILE *out;
    config_t cfg;        /* the scenario's options, then the user's */
    gate_opts_t gate;    /* the rest of the user's command line: refused below */
    app_opts_t opts;
    model_spec_t spec;
    dataset_t data;
    bool loaded;
    char err[ERR_LEN];
    int ended; /* a run ended the scenario (see scen_ended()): its status; err says why */
    /* A scenario's runs and their configurations live here (the harness is
     * static), not on the stack: a run's record is 79 KB and a config 14
     * KB, and nothing large lives on the stack (docs/faults.md). */
    run_result_t run[3];
    config_t alt[4];                  /* the runs' other configurations */
    config_t page_cfg[PAGE_MAX_RUNS]; /* --report's, one per run drawn */
} scen_t;

/* A paragraph under a heading ("" for none), wrapped to the page. */
void scen_para(scen_t *s, const char *head, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* One of the scenario's runs into r (initialised; its last run freed), none
 * once a signal asked to stop.  scenario_main frees the last. */
int scen_run(const config_t *c, const dataset_t *d, run_result_t *r, char *err);
/* Does this run's outcome end the scenario (a signal, or a failure that is
 * not the one it reproduces: expected false)?  Then return 1 at once. */
bool scen_ended(scen_t *s, int rc, const char *err, bool expected);
/* The last line, "behaved as described" or "NOT as described: why"; 0 or 1. */
int scen_verdict(scen_t *s, const char *name, bool shown, const char *why);
/* --report: the runs drawn on one page, the verdict its story; then
 * scen_verdict's status (1 when the page could not be written). */
int scen_page(scen_t *s, const char *name, bool shown, const char *why, const run_result_t *runs,
              const char *const *labels, int n);
/* "    label   peak  (what it held, by purpose)" for device d of r. */
void scen_mem_line(scen_t *s, const char *label, const run_result_t *r, int d);

/* alt[i]: the scenario's configuration in mode m with the mistake p
 * planted (kind PLANT_NONE: the right way) and watch.  The environment's
 * DDPBENCH_SCENARIO_UNPLANT (the tests') leaves the mistake out, so they
 * can see the verdict fail. */
config_t *scen_variant(scen_t *s, int i, mode_t_ m, plant_t p, unsigned watch);
/* The mean loss over the whole dataset of r's final parameters (NAN when
 * it was skipped). */
double scen_data_loss(scen_t *s, const run_result_t *r);

/* The scenarios in files of their own. */
int sc_set_epoch(scen_t *s);
int sc_loss_scale(scen_t *s);
int sc_no_sync(scen_t *s);
int sc_unused(scen_t *s);
int sc_collective(scen_t *s);
int sc_bucket_view(scen_t *s);

#endif
