/* ddp/fingerprint.h: the start-up check that every rank runs the same job (docs/modes.md):
 * one "KEY VALUE" line per setting that changes what a rank computes or which collectives it
 * joins ("--lr 0.003"), then "data" (rows, columns, a hash of every value), "world" and
 * "binary" (a hash of the program); what only rank 0 uses is left out.  Compared under mpirun
 * by the launcher (launch_mpi.c), in a forked group over its communicator (rank_setup.c). */
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

/* This rank's fingerprint: cfg, data (NULL: none loaded) and the program (/proc/self/exe). */
void fingerprint_make(fingerprint_t *fp, const config_t *cfg, const dataset_t *data);

/* Compare line by line; true when they differ: key gets the first differing item's name
 * ("--lr", "data", "binary"), mine_val and their_val its values (len bytes each).  Another
 * layout of lines is another build ("binary"). */
bool fingerprint_diff(const fingerprint_t *mine, const fingerprint_t *theirs, char *key,
                      char *mine_val, char *their_val, size_t len);

/* The group key belongs to, as the message says it: "another model (--layers, --act)". */
const char *fingerprint_group(const char *key);

/* Every rank's fingerprint (fps[r]) against rank 0's: DDP_OK, else DDP_ERR_INPUT with the
 * line in err, each rank called as who[r] says ("rank 2 (device 2)", "rank 1 (host b)"). */
int fingerprint_judge(const fingerprint_t *fps, int world, const char *const *who, char *err);

/* A forked group's check over comm before training: every fingerprint all-gathered through
 * a buffer on be, and judged; devices name the ranks.  DDP_ERR_RUNTIME when it fails. */
int ddp_fingerprint_check(comm_t *comm, backend_t *be, const fingerprint_t *mine,
                          const int *devices, char *err);

#endif
