/* ddp/fingerprint.h: the check that every rank was started on the same job.
 *
 * DDP trains one model on many ranks; a rank started with another model,
 * another learning rate, batch, step count or data set trains wrongly in
 * silence (torch's DDP compares only the parameters' shapes), or hangs when
 * its collectives differ.  Every launcher (the forked ranks here, ranks
 * started by MPI) calls ddp_fingerprint_check once its communicator exists
 * and before the first collective of training: each rank hashes what must
 * agree, field by field (the model, the loss, the optimizer and its
 * hyper-parameters, the batch, the run's length and the steps that add a
 * collective (--log-every, --checkpoint-every), the sample order, the
 * data's identity and contents, DDP's options, the world, the version), the
 * ranks all-gather the hashes, and each compares every rank with rank 0.  A
 * difference fails every rank at start-up (DDP_ERR_INPUT) with one line
 * naming the first rank that differs and what: "rank 2 (device 2) was
 * started with another model (--layers, --act) than rank 0: 8,24,16,3 relu
 * here".  No training step runs, and no rank waits for another. */
#ifndef DDPBENCH_FINGERPRINT_H
#define DDPBENCH_FINGERPRINT_H

#include <stdint.h>

#include "comm/comm.h"
#include "config/config.h"
#include "data/data.h"

enum {
    FP_MODEL = 0,
    FP_LOSS,
    FP_OPTIM,
    FP_BATCH,
    FP_LENGTH,
    FP_ORDER,
    FP_DATA,
    FP_DDP,
    FP_WORLD,
    FP_VERSION,
    FP_FIELDS
};

typedef struct {
    uint64_t h[FP_FIELDS];     /* a hash of each field's text */
    char text[FP_FIELDS][160]; /* the field as this rank has it, for the message */
} fingerprint_t;

/* What rank `rank` of cfg (its own config: launchers may give each rank
 * its own) holds of each field, with data's identity and contents. */
void ddp_fingerprint(const config_t *cfg, const dataset_t *data, fingerprint_t *fp);
/* The label of field k: "the model (--layers, --act)". */
const char *ddp_fingerprint_field(int k);
/* All-gather every rank's hashes over comm (a buffer on be; one host wait,
 * before training) and compare them with rank 0's.  DDP_ERR_INPUT naming
 * the first rank and field that differ (devices: the device of each rank,
 * for the message), DDP_ERR_RUNTIME when the exchange fails. */
int ddp_fingerprint_check(comm_t *comm, backend_t *be, const fingerprint_t *mine,
                          const int *devices, char *err);

#endif
