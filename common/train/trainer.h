/* common/trainer.h: what every strategy shares around the model.
 *
 * The schedule (which samples each global step reads on this rank, epochs,
 * logging and warm-up), the initial parameters, loading the dataset the config
 * names, and moving a micro-batch into a replica.  A strategy composes these
 * with model.h and optim.h and adds only its own synchronisation. */
#ifndef DDPBENCH_TRAINER_H
#define DDPBENCH_TRAINER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "data/data.h"
#include "nn/model.h"
#include "measure/result.h"
#include "data/schedule.h"

/* Load or generate the dataset the config names and check it against the model. */
int trainer_load_data(const config_t *c, const model_spec_t *spec, dataset_t *d, char *err);
/* The starting parameters on the host: nn.Linear init from --seed, or the
 * weights of --init (a .safetensors file, see checkpoint.h). */
int trainer_initial_params(const config_t *c, const model_spec_t *spec, float *host, char *err);

/* Gather rows idx[0..rows) into the replica's x and y (through staging memory
 * and an h2d copy when the device is not host-visible).  staging holds
 * max_rows*(in+tgt) floats, NULL on host-visible devices.  Laps PH_DATA then
 * PH_H2D on pc. */
int trainer_stage_batch(replica_t *r, const dataset_t *d, const uint32_t *idx, int rows,
                        float *staging, phase_clock_t *pc);

/* Double-buffered pinned staging for devices that are not host-visible, so
 * the host gathers the next micro-batch while the device still computes the
 * current one.  stager_stage() moves a batch into the replica (gathering it
 * unless stager_prefetch() already did) and queues its h2d from one buffer;
 * stager_prefetch() gathers the next batch into the other buffer.  Batches are
 * named by a caller's key (e.g. step*accum + micro) so a prefetch is only used
 * for the batch it was made for.  The rule that makes it safe: between two
 * stager_stage() calls the caller syncs the device at least once, so the h2d
 * that last read a buffer is complete before the host gathers into it again.
 * On host-visible devices (CPU) it holds nothing: stage gathers straight into
 * the replica and prefetch does nothing. */
typedef struct {
    backend_t *be;
    float *buf[2];  /* pinned, max_rows*(in+tgt) floats each; NULL when host-visible */
    int max_rows;
    int last;       /* buffer the last h2d read (-1: none yet) */
    long ready_key; /* batch prefetched into buf[ready_buf] (-1: none) */
    int ready_buf;
} stager_t;

int stager_init(stager_t *s, backend_t *be, int max_rows, const dataset_t *d, char *err);
void stager_free(stager_t *s);
static inline bool stager_active(const stager_t *s) { return s->buf[0] != NULL; }
/* Laps PH_DATA (unless prefetched) then PH_H2D on pc. */
int stager_stage(stager_t *s, replica_t *r, const dataset_t *d, long key, const uint32_t *idx,
                 int rows, phase_clock_t *pc);
/* Laps PH_DATA on pc; a no-op when not active or rows == 0. */
void stager_prefetch(stager_t *s, const dataset_t *d, long key, const uint32_t *idx, int rows,
                     phase_clock_t *pc);

/* Mean loss and accuracy over the whole dataset for host parameters (CPU, in
 * chunks); accuracy < 0 for mse.  Skipped (both < 0) when it would cost more
 * than about 2e10 flops. */
int trainer_evaluate(const model_spec_t *spec, loss_t loss, const float *params,
                     const dataset_t *d, double *mean_loss, double *accuracy, char *err);

/* Print one loss line (stdout; stderr under --json/--csv; nothing when quiet). */
void trainer_log_loss(const config_t *c, long step, long total, long epoch, double loss);

#endif
