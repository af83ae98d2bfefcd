/* ddp/launcher.h: how the program's processes come to be (fork: this process supervises
 * the ranks; mpirun: this process is one rank, rank 0 reports), implemented in launch.c.
 * The program runs inside launch_main, asks launch_agree once its input is checked, and
 * asks the questions below; it never names a launcher. */
#ifndef DDPBENCH_LAUNCHER_H
#define DDPBENCH_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config/config.h"
#include "common/data/data.h"

/* The program's life under the launcher: resolve --launcher (mpi when asked or when mpirun
 * started this process); under mpirun fork the rank's watcher and initialise MPI, else take
 * the stop signals; then body(ctx, rc, err), rc and err the parse's outcome or the
 * launcher's failure; and the way out with body's status.  Returns main's exit status. */
int launch_main(config_t *cfg, int rc, char *err, int (*body)(void *ctx, int rc, char *err),
                void *ctx);

/* The start-up check, once every rank has checked its input (rc, err: this rank's outcome;
 * data: NULL when not loaded).  fork: returns rc.  mpirun: rank 0 judges every rank's
 * outcome and fingerprint (fingerprint.h) and every rank returns the verdict (DDP_OK, and
 * cfg->gpus holds every rank's device); err holds the line on rank 0 alone. */
int launch_agree(config_t *cfg, const dataset_t *data, int rc, char *err);

/* This process prints the results and writes the output files: always
 * under fork, rank 0 under mpirun. */
bool launch_reports(const config_t *cfg);
/* This process is one rank of a group mpirun started (single and DP run on rank 0 alone). */
bool launch_is_rank(const config_t *cfg);
/* What forks its own runs on one host, refused under mpirun: DDP_ERR_INPUT, "<what>; run it
 * without mpirun"; DDP_OK under fork. */
int launch_one_host(const config_t *cfg, const char *what, char *err);
/* "mpirun: 3 ranks on 2 hosts (a: ranks 0-1, b: rank 2)" for the banner, "" under fork. */
void launch_describe(const config_t *cfg, char *buf, size_t len);

#endif
