/* ddp/launch_impl.h: a group of ranks as its launchers build it (launch_fork.c, launch_mpi.c);
 * callers use launch.h alone.  launch.c picks the config's launcher's table. */
#ifndef DDPBENCH_LAUNCH_IMPL_H
#define DDPBENCH_LAUNCH_IMPL_H

#include "ddp/launch.h"

typedef struct {
    /* Make the result area of `bytes` (zeroed, 64-byte aligned): g->area. */
    int (*open)(ddp_group_t *g, size_t bytes, char *err);
    /* launch.h's ddp_group_run. */
    int (*run)(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err);
    void (*close)(ddp_group_t *g);
} ddp_group_ops_t;

struct ddp_group {
    const ddp_group_ops_t *ops;
    const config_t *cfg;
    int world;
    int rank;          /* mpi: this process's rank; fork: -1, the supervisor */
    ddp_area_t *area;
    void *impl;        /* fork: the comm_seg_t; mpi: the area's memory */
};

extern const ddp_group_ops_t ddp_fork_ops; /* launch_fork.c */

/* launch_mpi.c's init: the process that started as mpirun's rank and forked
 * the rank itself (its watcher) returns this, with the rank's status. */
#define DDP_LAUNCH_WATCHER 100

#ifdef HAVE_MPI
/* launch_mpi.c: the group, and the program's side of launch.h under mpi */
extern const ddp_group_ops_t ddp_mpi_ops;
int ddp_mpi_init(config_t *cfg, int *code, char *err);
int ddp_mpi_agree(config_t *cfg, const dataset_t *data, int rc, char *err);
void ddp_mpi_describe(char *buf, size_t len);
int ddp_mpi_end(int code);
#endif

#endif
