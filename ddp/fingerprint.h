/* ddp/fingerprint.h: what every rank of one run must share, written out so a
 * difference can be named.  Ranks that mpirun starts each parse their own
 * command line and read their own data and binary (on other hosts, other
 * files); before anything runs the launcher compares every rank's
 * fingerprint with rank 0's (launch_mpi.c), so a rank started with another
 * --lr, other data or another build is an input error that says which,
 * instead of a run that hangs or quietly trains something else.
 *
 * The text is one line per item, "KEY VALUE": each setting that changes what
 * a rank computes or which collectives it joins, under its option's name
 * ("--lr 0.003"); "data" (the rows, the columns and a hash of every value,
 * not the file's name, which may differ between hosts); "--resume" (a hash
 * of the file's bytes, which every rank reads); "binary" (a hash of the
 * running program's bytes).  What only rank 0 uses (its outputs, --json,
 * --baseline, --init, which it broadcasts) is left out. */
#ifndef DDPBENCH_FINGERPRINT_H
#define DDPBENCH_FINGERPRINT_H

#include <stdbool.h>
#include <stddef.h>

#include "config/config.h"
#include "data/data.h"

#define FINGERPRINT_MAX 3072

typedef struct {
    char text[FINGERPRINT_MAX];
} fingerprint_t;

/* The fingerprint of this process's run: cfg, data (NULL: none loaded, the
 * line says so) and the program at /proc/self/exe. */
void fingerprint_make(fingerprint_t *fp, const config_t *cfg, const dataset_t *data);

/* Compare two fingerprints line by line.  true when they differ: key gets
 * the first differing item's name ("--lr", "data", "binary"), mine and
 * theirs its value in each (len bytes each). */
bool fingerprint_diff(const fingerprint_t *mine, const fingerprint_t *theirs, char *key,
                      char *mine_val, char *their_val, size_t len);

#endif
