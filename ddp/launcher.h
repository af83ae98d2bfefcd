/* ddp/launcher.h: how the program's processes come to be, its side of the
 * process topology (ddp/launch.c, the one module that knows it), and the one
 * header of a strategy the program includes besides their common seam
 * (common/train/strategy.h): only DDP has ranks, so only ddp/ implements it:
 *
 *   fork     this process is the supervisor: it forks one rank per device
 *            of --gpus when DDP runs, and prints and writes the outputs
 *   mpirun   mpirun started one ddpbench per rank, on one host or many:
 *            this process is one rank (its device --gpus[local rank]); rank
 *            0 prints and writes for the group, and a failure only this
 *            rank knows ends the whole job
 *
 * The program runs inside launch_main, asks launch_agree once its input is
 * checked, and asks the questions below; it never names a launcher. */
#ifndef DDPBENCH_LAUNCHER_H
#define DDPBENCH_LAUNCHER_H

#include <stdbool.h>
#include <stddef.h>

#include "common/config/config.h"
#include "common/data/data.h"

/* The program's life under the launcher: resolve --launcher (mpi when
 * asked, or when mpirun's environment says it started this process); under
 * mpirun fork the rank's watcher (which turns a rank killed by a signal into
 * exit 1 and a line naming it) and initialise MPI, else take the stop
 * signals (base/interrupt.h); then body(ctx, rc, err), rc and err the
 * parse's outcome or the launcher's failure (said at the start-up check);
 * and the way out with body's exit status (MPI_Finalize; a failure only
 * this rank knows ends the whole job).  Returns main's exit status. */
int launch_main(config_t *cfg, int rc, char *err, int (*body)(void *ctx, int rc, char *err),
                void *ctx);

/* The start-up check, once every rank has checked its input.  rc and err:
 * this rank's outcome so far; data: its data set (NULL when not loaded).
 * fork: returns rc.  mpirun: every rank's outcome, device, host and a
 * fingerprint of what must match (the settings, the data, the binary) meet
 * on rank 0, which judges for all; every rank returns the verdict: DDP_OK
 * (and cfg->gpus holds every rank's device), or the first failure, or
 * DDP_ERR_INPUT naming the rank and what differs there.  err holds the
 * line on rank 0, and is empty on the others (rank 0 says it for all). */
int launch_agree(config_t *cfg, const dataset_t *data, int rc, char *err);

/* This process prints the results and writes the output files: always
 * under fork, rank 0 under mpirun. */
bool launch_reports(const config_t *cfg);
/* This process is one rank of a group mpirun started: only DDP spans the
 * group (single and DP run on rank 0 alone), and nothing here forks runs
 * of its own. */
bool launch_is_rank(const config_t *cfg);
/* What forks its own runs on one host (what, e.g. "--against: starts its
 * own runs on one host") refused under mpirun: DDP_ERR_INPUT, "<what>; run
 * it without mpirun"; DDP_OK under fork. */
int launch_one_host(const config_t *cfg, const char *what, char *err);
/* "mpirun: 3 ranks on 2 hosts (a: ranks 0-1, b: rank 2)" for the banner,
 * "" under fork. */
void launch_describe(const config_t *cfg, char *buf, size_t len);

#endif
