/* ddp/fingerprint.h: the start-up check that every rank runs the same job.
 *
 * DDP trains one model on many ranks; a rank started with another model,
 * learning rate, batch, step count, data set or build trains wrongly in
 * silence (torch's DDP compares only the parameters' shapes) or hangs when
 * its collectives differ.  Ranks that mpirun starts each parse their own
 * command line and read their own data and binary (on other hosts, other
 * files); forked ranks share one parse, but a test or --scenario mismatch
 * may hand a rank its own configuration (ddp_shared.h's hook).
 *
 * The fingerprint is one line per item, "KEY VALUE": each setting that
 * changes what a rank computes or which collectives it joins, under its
 * option's name ("--lr 0.003"); "data" (the rows, the columns and a hash of
 * every value, not the file's name, which may differ between hosts);
 * "--resume" (a hash of the file's bytes, which every rank reads); "world"
 * (the ranks); "binary" (a hash of the running program's bytes).  What only
 * rank 0 uses (its outputs, --json, --baseline, --init, which it
 * broadcasts) is left out.  Each key belongs to a group the message names:
 * "another optimizer or hyper-parameters (--optim, --lr, ...)".
 *
 * One comparison (fingerprint_judge: every rank against rank 0, the first
 * that differs named with both values), made where the ranks first meet:
 * under mpirun by the launcher, over MPI, before anything runs
 * (launch_mpi.c, which also names a rank whose input failed); in a forked
 * group by each rank over its communicator once it exists, before the first
 * collective of training (ddp_fingerprint_check, rank.c).  Either way the
 * run ends at start-up with DDP_ERR_INPUT and one line:
 *   not the same job on every rank: rank 2 (device 2) was started with another
 *   optimizer or hyper-parameters (--optim, --lr, --momentum, --weight-decay,
 *   ...) than rank 0 (device 0): --lr 0.03 there, --lr 0.003 on rank 0 */
#ifndef DDPBENCH_FINGERPRINT_H
#define DDPBENCH_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>

#include "common/comm/comm.h"
#include "common/config/config.h"
#include "common/data/data.h"
#include "common/device/backend.h"

#define FINGERPRINT_MAX 3072

typedef struct {
    char text[FINGERPRINT_MAX];
} fingerprint_t;

/* The fingerprint of this rank's run: cfg (its own config), data (NULL:
 * none loaded, the line says so) and the program at /proc/self/exe. */
void fingerprint_make(fingerprint_t *fp, const config_t *cfg, const dataset_t *data);

/* Compare two fingerprints line by line.  true when they differ: key gets
 * the first differing item's name ("--lr", "data", "binary"), mine and
 * theirs its value in each (len bytes each).  Another layout of lines is
 * another build ("binary"). */
bool fingerprint_diff(const fingerprint_t *mine, const fingerprint_t *theirs, char *key,
                      char *mine_val, char *their_val, size_t len);

/* The group key belongs to, as the message says it: "another model
 * (--layers, --act)". */
const char *fingerprint_group(const char *key);

/* Every rank's fingerprint (fps[r], world of them) against rank 0's: DDP_OK
 * when all agree, else DDP_ERR_INPUT with the line above in err (ERR_LEN),
 * each rank called as who[r] says ("rank 2 (device 2)", "rank 1 (host b)"). */
int fingerprint_judge(const fingerprint_t *fps, int world, const char *const *who, char *err);

/* A forked group's check, over comm before training: every rank's
 * fingerprint all-gathered (through a buffer on be; one host wait) and
 * judged; devices: each rank's device, for the names.  DDP_ERR_RUNTIME when
 * the exchange fails. */
int ddp_fingerprint_check(comm_t *comm, backend_t *be, const fingerprint_t *mine,
                          const int *devices, char *err);

#endif
