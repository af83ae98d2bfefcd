/* app/app.h: one job of the program, as its files hand it on (the order:
 * app/README.md).  The job is one static object (its results hold their step
 * statistics), so main's stack stays small. */
#ifndef DDPBENCH_APP_H
#define DDPBENCH_APP_H

#include <stdbool.h>
#include <stdio.h>

#include "common/base/status.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/measure/collperf.h"
#include "app/predict/predict.h"
#include "app/repeat/repeat.h"
#include "common/measure/result.h"
#include "app/report/report.h"
#include "app/cmdline/cmdline.h"
#include "gate/gate.h"

/* compare: single, dp, ddp, and ddp --zero 1, 2, 3 (--zero 1,2,3), or single, dp
 * and ddp again at each further precision (--precision fp32,bf16,tf32) */
#define MAX_RUNS 9

/* --predict (and compare's predicted column): the alpha-beta model's inputs */
typedef struct {
    bool on;
    collperf_t perf; /* the collectives, measured by --mode comm */
    predict_in_t in;
    predict_row_t rows[PREDICT_MAX_DEVICES];
} predict_t;

typedef struct {
    config_t cfg;                 /* the user's, resolved */
    gate_opts_t gate_opts;        /* the gate's options (gate/options.h) */
    app_opts_t opts;              /* the program's own (app/cmdline/cmdline.h) */
    config_line_t line;           /* the command line over the three */
    char note[ERR_LEN];           /* what --backend/--gpus auto chose ("" when nothing) */
    model_spec_t spec;
    int n;                        /* runs: 1, or compare's (3; 2 under mpirun) */
    config_t cfgs[MAX_RUNS];      /* each run's own config */
    run_result_t res[MAX_RUNS];   /* each run's last repetition */
    repeat_t reps[MAX_RUNS];      /* each run's repetitions (--repeat) */
    const repeat_t *rep_of[MAX_RUNS]; /* &reps[i], for ctx.reps */
    int order[MAX_RUNS];          /* which run goes when */
    dataset_t data;
    bool loaded;
    report_ctx_t ctx;
    gate_stored_t gate;           /* --baseline, and each run's match in it */
    bool gated;                   /* this process judges --baseline */
    int argc;                     /* the command line */
    char **argv;
    bool mpi;                     /* this process is one rank of mpirun's (launch_is_rank) */
    bool reports;                 /* this process writes the outputs (rank 0 under mpirun) */
    FILE *info;                   /* progress and notes: stderr under --json/--csv */
    predict_t pred;
    bool full;                    /* measure every collective the model needs */
    bool measure;                 /* measure the collectives at all */
    run_result_t hook_ref;        /* --comm-hook: the same DDP run without the hook */
    gpu_lesson_t gpu;             /* --hardware: the run's model on a GPU box (app/predict/) */
} app_job_t;

// plan.c
/* The config of one run: compare gives each run its mode; single runs on
 * the first device of the list. */
void app_run_config(const config_t *base, mode_t_ mode, config_t *out);
/* Everything checked before training, up to the start-up agreement of every
 * rank (rc: the status so far; under mpirun the ranks agree on it). */
int app_plan(app_job_t *j, int rc, char *err);
/* --hardware: its profiles (--workload's, or the run's MLP) modelled on
 * 1..count GPUs into j->gpu, checked against a published case on the box;
 * without --hardware j->gpu is off. */
int app_gpu_model(app_job_t *j, char *err);
/* The memory the planned runs need at least, with the data d (loaded, or
 * only its shape: load.h's data_shape), against the machine's available
 * memory and --mem-limit (memcheck.c): DDP_ERR_INPUT naming both when it
 * cannot fit.  _comm: --mode comm's buffers. */
int app_mem_check(const app_job_t *j, const dataset_t *d, char *err);
int app_mem_check_comm(const config_t *c, bool mpi, char *err);
/* After the agreement: --emit-pytorch, the --init note, the banner. */
int app_prepare(app_job_t *j, int argc, char **argv, char *err);
void app_free(app_job_t *j);

// run.c
/* Every run, --repeat times, in the order that is fair to them. */
int app_train(app_job_t *j, char *err);
/* Under mpirun, a rank other than 0 after training: it joins the
 * collectives' measurement, whose failure rank 0 reports. */
int app_train_follow(app_job_t *j, int rc, char *err);
/* --predict's collectives and single's phases, after the files are written. */
int app_predict(app_job_t *j, char *err);
/* --mode comm, the collectives alone (nccl-tests' way, on DDP's ranks): the banner, the
 * measurement, the report on stdout; a check that found a wrong value is DDP_ERR_RUNTIME. */
int app_comm(const config_t *cfg, const char *note, char *err);

// outputs.c
/* --save, the evaluation and --trace, each on its own: a failure is added
 * to failed, what was written to written. */
void app_write_files(app_job_t *j, char *failed, char *written, size_t wlen);
/* The result on stdout and --explain. */
void app_print(app_job_t *j, char *failed);
/* --report: the page (report_page.h), written like the files; after the
 * gate, so an A/B verdict can be drawn on it. */
void app_write_page(app_job_t *j, char *failed, char *written, size_t wlen);
/* The status of the outputs: DDP_OK, or one line naming what failed and
 * what was written. */
int app_outputs_status(const app_job_t *j, const char *failed, const char *written, char *err);
/* --workload: the GPU lesson alone on stdout (--json: its object), nothing
 * trained. */
int app_gpu_lesson(app_job_t *j, char *err);

// scenario.c
/* --scenario NAME (or list): a failure PyTorch users meet, reproduced in a short run and
 * explained, its verdict the exit status (0 as described, 1 not, 2 bad input) or
 * DDP_ERR_INTERRUPTED; when it failed or stopped, the line in msg ("" when the verdict said
 * it).  Its options come first and the user's after them, so any can be changed. */
int scenario_main(int argc, char **argv, const char *name, FILE *out, char *msg);

// twin.c
/* --emit-pytorch FILE.py (path): the PyTorch twin of run_cfg's run (single, dp or ddp) and the
 * files beside it that it reads (docs/checkpoints.md), argv quoted in its docstring, each
 * written atomically; DDP_ERR_INPUT when the job has no twin (ddp on a batch its ranks
 * do not divide; --rank-samples; --resume; --zero) or a file cannot be written there. */
int twin_emit(const config_t *run_cfg, const char *path, const model_spec_t *spec,
              const dataset_t *data, int argc, char **argv, FILE *info, char *err);

#endif
