/* common/io/checkpoint.h: model weights (--save, --init) and resumable
 * checkpoints (--checkpoint, --checkpoint-every, --resume), as .safetensors.
 *
 * Tensor names are those of the PyTorch module the model is,
 * nn.Sequential(Linear, act, Linear, act, ..., Linear): modules are numbered
 * 0, 1, 2, ... and the activations hold no parameters, so Linear l is module
 * 2l: "0.weight" [dims[1], dims[0]], "0.bias" [dims[1]], "2.weight", ...
 * safetensors.torch.load_file + load_state_dict take a weights file as is.
 * The data is in parameter order, i.e. the parameter arena as it is.
 *
 * Weights file: those tensors (F32) and __metadata__ {"format": "pt",
 * "producer": "ddpbench X.Y.Z", "layers": "D0,..,Dn", "act": "relu"}.
 *
 * Checkpoint file (format 2): the same, then the optimizer state per
 * parameter, named after torch.optim's state keys:
 *   SGD with momentum:  "optim.momentum_buffer.0.weight", ...
 *   Adam / AdamW:       "optim.exp_avg.0.weight", ..., "optim.exp_avg_sq.0.weight", ...
 * (each state arena's data contiguous, after the parameters), and in
 * __metadata__ (strings, as the format requires):
 *   checkpoint    "1" (the format version)
 *   global_step   optimizer steps done = the next step to run (0-based)
 *   optim_step    the optimizer's step count (Adam's bias correction)
 *   epoch, epoch_step, steps_per_epoch
 *                 where the next step is: the sampler's state, since the
 *                 permutation of an epoch is a function of seed + epoch
 *   shuffle_seed  seed + epoch: the seed of that epoch's permutation
 *   checksum      the content checksum of every other metadata entry and
 *                 every tensor (safetensors.h): an edited position or a
 *                 corrupted byte is refused
 *   and the settings a resume must share: layers, act, loss, optim and its
 *   hyperparameters (lr, momentum, dampening, nesterov, weight_decay for SGD;
 *   lr, beta1, beta2, eps, weight_decay for Adam/AdamW; floats as the shortest
 *   decimal that reads back as the same float), seed, mode, world (devices), batch, accum,
 *   shuffle, drop_last, data ("synthetic binary samples=100" or "file x.npy +
 *   y.npy rows=1000": file names without their directory, and the row count),
 *   data_hash ("1000 rows of 8 features and 1 targets, hash 0123456789abcdef":
 *   a hash of every value as loaded, so other data under the same name and
 *   row count is refused, both named; a checkpoint written before it was
 *   recorded is compared by name and rows alone).
 *
 * --resume continues bit for bit: a run stopped after K steps and resumed to N
 * ends with the parameters of the run that never stopped. */
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

#define CKPT_FORMAT "2"

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

/* The whole checkpoint of the run s belongs to (s->cfg, s->data): host
 * parameters and nstate host state arenas (optim_state_count), each
 * spec->nparams floats.  kill_before_rename: DDPBENCH_FAULT=write. */
int ckpt_save(const char *path, const schedule_t *s, const model_spec_t *spec,
              const float *params, const float *const *state, int nstate, const ckpt_pos_t *pos,
              bool kill_before_rename, char *err);
/* Check a checkpoint against the run (settings, position, tensors) and read
 * it into params and state.  Messages start with "--resume PATH: ". */
int ckpt_load(const char *path, const schedule_t *s, const model_spec_t *spec, float *params,
              float *const *state, int nstate, ckpt_pos_t *pos, char *err);


/* Before any strategy runs (main): option combinations, the --init and
 * --resume files against the model and the run (their headers, and their
 * data through a small buffer: every value finite, a checkpoint's checksum),
 * and whether --save and --checkpoint can be written where they point.  Bad
 * input is exit 2 before training rather than a failure at its end.  The
 * loads of the strategies check the same again (DDP_ERR_INPUT). */
int ckpt_preflight(const config_t *cfg, const model_spec_t *spec, const dataset_t *data,
                   char *err);

/* --init FILE's description of the model it was trained as (the "act" and
 * "loss" of its __metadata__) against this run's: a mismatch is not an
 * error (the shapes were checked, so the weights load) but worth a warning,
 * written into note ("" when they agree or the file does not say). */
void ckpt_init_note(const config_t *cfg, const model_spec_t *spec, char *note, size_t len);

// ---------------------------------------------------------------------------
// what a strategy calls (common/train/single.c is the worked example)
//
//   ckpt_run_init(&ck, cfg, &spec, &opt, 0, err);        after optim_init
//   ckpt_run_resume(&ck, &sch, host_params, &opt, err);  after the initial params,
//                                      before they go to the device: with --resume it
//                                      overwrites host_params, uploads the optimizer
//                                      state, sets opt.step and sch.start_step
//   for (g = sch.start_step; g < sch.total_steps; g++) {
//       ... the step ...
//       if (ckpt_run_due(&ck, &sch, g))
//           ckpt_run_write(&ck, &sch, rep.params, &opt, g, err);
//   }
//   ckpt_run_free(&ck);
//
// A strategy that learns its first step before its optimizer exists (DP:
// the plan of the first step is made before the device threads create the
// optimizer) splits ckpt_run_resume in two: ckpt_run_load on the host, then
// ckpt_run_upload once the optimizer is there.  Only the writer (DP's device
// 0, DDP's rank 0) calls ckpt_run_write; in DDP every rank loads the file.

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
/* ckpt_run_load then ckpt_run_upload.  No-op without --resume. */
int ckpt_run_resume(ckpt_run_t *c, schedule_t *s, float *host_params, optim_t *o, char *err);
/* The host half: read --resume into host_params and the state buffers, set
 * s->start_step.  No-op without --resume. */
int ckpt_run_load(ckpt_run_t *c, schedule_t *s, float *host_params, char *err);
/* The device half: the loaded optimizer state into o, and o->step.  No-op
 * when nothing was loaded. */
int ckpt_run_upload(ckpt_run_t *c, optim_t *o, char *err);
/* Is a checkpoint due after step g (0-based)?  Every --checkpoint-every steps
 * (counted from step 0, so a resumed run keeps the cadence) and after the last.
 * Reads only the config and s->total_steps, so every thread and rank of a run
 * gets the same answer. */
bool ckpt_run_due(const ckpt_run_t *c, const schedule_t *s, long g);
/* Copy the device parameters (dev_params, on o's device) and the optimizer
 * state to the host and write the checkpoint of the state after step g. */
int ckpt_run_write(ckpt_run_t *c, const schedule_t *s, const float *dev_params, const optim_t *o,
                   long g, char *err);
void ckpt_run_free(ckpt_run_t *c);

#endif
