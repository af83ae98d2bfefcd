/* common/io/checkpoint.h: model weights (--save, --init) and resumable
 * checkpoints (--checkpoint, --checkpoint-every, --resume) as .safetensors:
 * tensor names, metadata and what a resume must share are docs/checkpoints.md.
 * The data is in parameter order (the arena as it is), then each optimizer
 * state arena's.  --resume continues bit for bit. */
#ifndef DDPBENCH_CHECKPOINT_H
#define DDPBENCH_CHECKPOINT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/base/atomic_file.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/nn/model.h"
#include "common/nn/optim.h"
#include "common/data/schedule.h"

/* "0.weight", "0.bias", "2.weight", ... for Linear layer `layer`. */
void ckpt_param_name(int layer, bool bias, char *out, size_t size);

/* --save: the parameters (host) as a weights file, written atomically. */
int ckpt_save_weights(const char *path, const config_t *cfg, const model_spec_t *spec,
                      const float *params, char *err);
/* The same weights file's bytes into a's temporary (the caller commits it,
 * as one of a set: --emit-pytorch). */
int ckpt_weights_into(afile_t *a, const config_t *cfg, const model_spec_t *spec,
                      const float *params, char *err);
/* --init: parameters from a weights file, or from a checkpoint (its optimizer
 * state is then ignored).  what names the option in messages ("--init"). */
int ckpt_load_weights(const char *path, const char *what, const model_spec_t *spec,
                      float *params, char *err);

typedef struct {
    long global_step; /* optimizer steps done: the run continues at this step */
    long optim_step;  /* optim_t.step */
} ckpt_pos_t;

/* Before any strategy runs (main): option combinations, the --init and
 * --resume files against the model and the run (every value finite, a
 * checkpoint's checksum), and whether --save and --checkpoint can be written:
 * bad input is exit 2 before training.  The strategies' loads check again. */
int ckpt_preflight(const config_t *cfg, const model_spec_t *spec, const dataset_t *data,
                   char *err);

/* --init FILE's "act" and "loss" against this run's: a mismatch is not an
 * error (the shapes fit) but a warning, into note ("" when none). */
void ckpt_init_note(const config_t *cfg, const model_spec_t *spec, char *note, size_t len);

// ---------------------------------------------------------------------------
// what a strategy calls (common/train/single.c is the worked example):
// ckpt_run_init after optim_init; ckpt_run_resume after the initial parameters,
// before they go to the device; after step g, ckpt_run_write when ckpt_run_due;
// ckpt_run_free.  DP, which plans its first step before its optimizer exists,
// calls ckpt_run_resume's halves apart.  Only the writer (DP's device 0, DDP's
// rank 0) writes; every DDP rank loads.

typedef struct {
    const config_t *cfg;
    const model_spec_t *spec;
    int device_index; /* the device slot that writes (DDPBENCH_FAULT=write:SLOT:STEP) */
    float *params;    /* host copies, only with --checkpoint or --resume */
    float *state[2];
    int nstate;
    bool loaded;      /* ckpt_run_load read --resume: state[] and pos wait for the upload */
    ckpt_pos_t pos;   /* where the loaded checkpoint stands */
} ckpt_run_t;

/* o may be NULL (the optimizer does not exist yet): the state count then
 * follows cfg->optim, as optim_init will. */
int ckpt_run_init(ckpt_run_t *c, const config_t *cfg, const model_spec_t *spec,
                  const optim_t *o, int device_index, char *err);
/* ckpt_run_load then ckpt_run_upload; each a no-op without --resume. */
int ckpt_run_resume(ckpt_run_t *c, schedule_t *s, float *host_params, optim_t *o, char *err);
/* The host half: --resume into host_params and the state buffers, s->start_step. */
int ckpt_run_load(ckpt_run_t *c, schedule_t *s, float *host_params, char *err);
/* The device half: the loaded optimizer state into o, and o->step. */
int ckpt_run_upload(ckpt_run_t *c, optim_t *o, char *err);
/* Is a checkpoint due after step g (0-based)?  Every --checkpoint-every steps
 * from step 0, and after the last: the same answer on every thread and rank. */
bool ckpt_run_due(const ckpt_run_t *c, const schedule_t *s, long g);
/* Copy the device parameters (dev_params, on o's device) and the optimizer
 * state to the host and write the checkpoint of the state after step g. */
int ckpt_run_write(ckpt_run_t *c, const schedule_t *s, const float *dev_params, const optim_t *o,
                   long g, char *err);
void ckpt_run_free(ckpt_run_t *c);

#endif
