/* ddp/launch.c: the process topology, the one module that knows it: which launcher a run
 * has (mpirun's environment, or --launcher), the program's side of it (launcher.h) and
 * launch.h's groups, each call going to its launcher (launch_mpi.c needs MPI). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/base/interrupt.h"
#include "ddp/launcher.h"
#include "ddp/launch_impl.h"

/* Whether mpirun (or any PMI/PMIx launcher) started this process: its world size in *size
 * (0: not said, -1: not a positive integer), the variable and its value in *var, *val. */
static bool started_by_mpirun(long *size, const char **var, const char **val)
{
    static const char *const sizes[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        const char *v = getenv(sizes[i]);
        if (v && *v) {
            *var = sizes[i];
            *val = v;
            *size = 0;
            if (i < 2) {
                char *end;
                errno = 0;
                long n = strtol(v, &end, 10);
                *size = errno || *end || n < 1 || n > INT_MAX ? -1 : n;
            }
            return true;
        }
    }
    return false;
}

/* mpirun's variables that cannot be a world mpirun made (docs/hosts.md). */
static int check_mpirun_vars(const config_t *cfg, long size, const char *var, const char *val,
                             char *err)
{
    if (size < 0)
        return err_set(err, DDP_ERR_INPUT, "%s=%s: the world size mpirun sets is a positive "
                       "integer: variables left from another mpirun? start it with mpirun, or "
                       "unset them", var, val);
    if (size == 0)
        return err_set(err, DDP_ERR_INPUT, "%s is set but no world size (OMPI_COMM_WORLD_SIZE "
                       "or PMI_SIZE): variables left from another mpirun? start it with "
                       "mpirun, or unset them", var);
    if (size == 1 && cfg->ngpus > 1)
        return err_set(err, DDP_ERR_INPUT, "%s=1 says a world of 1 rank, but --gpus names %d "
                       "devices: variables left from another mpirun? start it with mpirun -np "
                       "%d, or unset them", var, cfg->ngpus, cfg->ngpus);
    return DDP_OK;
}

/* Resolve --launcher and start it (launch_main). */
static int launch_init(config_t *cfg, int *code, char *err)
{
    *code = 0;
    long size = 0;
    const char *var = NULL, *val = NULL;
    bool mpirun = started_by_mpirun(&size, &var, &val);
    if (cfg->launcher == LAUNCHER_AUTO)
        cfg->launcher = mpirun ? LAUNCHER_MPI : LAUNCHER_FORK;
    if (cfg->launcher == LAUNCHER_FORK) {
        cfg->world_rank = cfg->local_rank = cfg->world_size = 0;
        return DDP_OK;
    }
#ifdef HAVE_MPI
    /* Outside mpirun MPI_Init makes a world of one, whatever --gpus says. */
    if (!mpirun)
        return err_set(err, DDP_ERR_INPUT,
                       "--launcher mpi: mpirun did not start this process (none of "
                       "OMPI_COMM_WORLD_SIZE, PMI_SIZE, PMIX_RANK is set): start it with "
                       "mpirun -np N, or use --launcher fork");
    TRY(check_mpirun_vars(cfg, size, var, val, err));
    int rc = ddp_mpi_init(cfg, code, err);
    if (rc == DDP_OK && size > 0 && cfg->world_size != size)
        return err_set(err, DDP_ERR_INPUT,
                       "%s says %ld ranks, but MPI started %d: variables left from another "
                       "mpirun? start it with mpirun, or unset them",
                       var, size, cfg->world_size);
    return rc;
#else
    if (mpirun)
        return err_set(err, DDP_ERR_INPUT,
                       "mpirun started this process (%s is set), but this ddpbench was built "
                       "without MPI (mpi.h was not found): install libopenmpi-dev and rebuild, "
                       "or run without mpirun (--launcher fork)",
                       var);
    return err_set(err, DDP_ERR_INPUT,
                   "--launcher mpi: this ddpbench was built without MPI (mpi.h was not found)");
#endif
}

int launch_agree(config_t *cfg, const dataset_t *data, int rc, char *err)
{
#ifdef HAVE_MPI
    if (cfg->launcher == LAUNCHER_MPI)
        return ddp_mpi_agree(cfg, data, rc, err);
#else
    (void)cfg;
    (void)data;
    (void)err;
#endif
    return rc;
}

bool launch_reports(const config_t *cfg)
{
    return cfg->launcher != LAUNCHER_MPI || cfg->world_rank == 0;
}

void launch_describe(const config_t *cfg, char *buf, size_t len)
{
    buf[0] = 0;
#ifdef HAVE_MPI
    if (cfg->launcher == LAUNCHER_MPI)
        ddp_mpi_describe(buf, len);
#else
    (void)cfg;
    (void)len;
#endif
}

bool launch_is_rank(const config_t *cfg) { return cfg->launcher == LAUNCHER_MPI; }

int launch_one_host(const config_t *cfg, const char *what, char *err)
{
    if (!launch_is_rank(cfg))
        return DDP_OK;
    return err_set(err, DDP_ERR_INPUT, "%s; run it without mpirun", what);
}

int launch_main(config_t *cfg, int rc, char *err, int (*body)(void *ctx, int rc, char *err),
                void *ctx)
{
    int code;
    char lerr[ERR_LEN] = "";
    int lrc = launch_init(cfg, &code, lerr);
    if (lrc == DDP_LAUNCH_WATCHER)
        return code;
    /* A launcher that failed: under mpirun the start-up check says it with the others'
     * (once); without one, the body says it at once. */
    if (lrc != DDP_OK && rc == DDP_OK) {
        rc = lrc;
        snprintf(err, ERR_LEN, "%s", lerr);
    }
    if (!launch_is_rank(cfg)) /* under mpirun, mpirun's signals end the job */
        interrupt_install();
    int code_out = body(ctx, rc, err);
#ifdef HAVE_MPI
    if (cfg->launcher == LAUNCHER_MPI)
        return ddp_mpi_end(code_out);
#endif
    return code_out;
}

// ---------------------------------------------------------------------------
// groups

size_t ddp_area_layout(ddp_area_t *a, int world, long max_log, size_t nparams,
                       uint32_t trace_cap)
{
    size_t log = (sizeof(ddp_area_t) + 63) & ~(size_t)63;
    size_t params = (log + (size_t)max_log * sizeof(loss_point_t) + 63) & ~(size_t)63;
    size_t trace = (params + nparams * sizeof(float) + 63) & ~(size_t)63;
    size_t stride = trace_cap ? (trace_rec_bytes(trace_cap) + 63) & ~(size_t)63 : 0;
    if (a) {
        a->max_log = max_log;
        a->trace_cap = trace_cap;
        a->off_log = log;
        a->off_params = params;
        a->off_trace = trace;
        a->trace_stride = stride;
        for (int r = 0; r < world && trace_cap; r++)
            trace_rec_init(ddp_area_trace(a, r), trace_cap, r);
    }
    return trace + (size_t)world * stride;
}

int ddp_group_open(ddp_group_t **out, const config_t *cfg, size_t bytes, char *err)
{
    *out = NULL;
    const ddp_group_ops_t *ops = &ddp_fork_ops;
#ifdef HAVE_MPI
    if (cfg->launcher == LAUNCHER_MPI)
        ops = &ddp_mpi_ops;
#endif
    ddp_group_t *g = calloc(1, sizeof *g);
    if (!g)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the group of ranks");
    g->ops = ops;
    g->cfg = cfg;
    g->world = cfg->ngpus;
    g->rank = cfg->launcher == LAUNCHER_MPI ? cfg->world_rank : -1;
    int rc = ops->open(g, bytes, err);
    if (rc != DDP_OK) {
        free(g);
        return rc;
    }
    *out = g;
    return DDP_OK;
}

ddp_area_t *ddp_group_area(ddp_group_t *g) { return g->area; }

int ddp_group_run(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err)
{
    return g->ops->run(g, body, ctx, err);
}

bool ddp_group_reports(const ddp_group_t *g) { return g->rank <= 0; }

bool ddp_group_mpi(const ddp_group_t *g) { return g->rank >= 0; }

void ddp_group_close(ddp_group_t *g)
{
    if (!g)
        return;
    g->ops->close(g);
    free(g);
}

void ddp_rank_end(const ddp_env_t *env, comm_t *comm, int rc, const char *err)
{
    ddp_rank_rec_t *rec = &env->area->rank[env->rank];
    if (rc == DDP_OK) {
        rec->state = RANK_DONE;
        return;
    }
    /* Record why first, then abort the group: the supervisor reports the first rank that
     * aborted, with this message. */
    rec->rc = rc;
    snprintf(rec->msg, sizeof rec->msg, "%s", err[0] ? err : "unknown error");
    rec->state = RANK_FAILED;
    if (comm)
        comm_abort(comm, rec->msg);
    else if (env->seg) /* under mpirun the launcher ends the job instead */
        comm_seg_abort(env->seg, env->rank, rec->msg);
}
