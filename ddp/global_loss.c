/* ddp/global_loss.c: a DDP step's loss over every rank (see
 * global_loss.h). */
#include "ddp/global_loss.h"

#include <string.h>

#include "common/base/status.h"

int global_loss_init(global_loss_t *l, backend_t *be, comm_t *comm, step_meter_t *m, char *err)
{
    *l = (global_loss_t){.be = be, .comm = comm, .meter = m};
    l->buf = backend_alloc_for(be, 2 * sizeof(float), MEM_COMM);
    l->host = backend_alloc_host(be, 4 * sizeof(float));
    if (!l->buf || !l->host)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the loss");
    return DDP_OK;
}

void global_loss_free(global_loss_t *l)
{
    if (!l->be)
        return;
    backend_sync(l->be); /* no copy may still use the loss buffers */
    backend_free_host(l->be, l->host);
    backend_free(l->be, l->buf);
    memset(l, 0, sizeof *l);
}

int global_loss_add(void *ctx, const float *sum, char *err)
{
    global_loss_t *l = ctx;
    if (!step_meter_logs(l->meter))
        return DDP_OK;
    int rc = !l->has ? backend_d2d(l->be, l->buf, sum, sizeof(float))
                     : backend_axpy(l->be, 1.0f, sum, l->buf, 1);
    l->has = true;
    return backend_check(l->be, rc, NULL, err);
}

int global_loss_reduce(global_loss_t *l, long g, size_t rows, bool run, char *err)
{
    if (!l->has) /* no rows this step (out of data, or ZeRO-2/-3's empty micro-batches) */
        TRY(backend_check(l->be, backend_memset0(l->be, l->buf, sizeof(float)), NULL, err));
    float *lh = l->host + 2 * (g & 1); /* a step's copy is read before g+2 */
    lh[1] = (float)rows;
    /* pinned: read when the copy runs (in a --cuda-graph step, at each launch) */
    TRY(backend_check(l->be, backend_h2d_pinned(l->be, l->buf + 1, lh + 1, sizeof(float)), NULL,
                      err));
    comm_op_t op = {.kind = COLL_ALL_REDUCE, .recv = l->buf, .count = 2, .redop = REDOP_SUM,
                    .tag = "the loss"};
    /* Over shm on the CPU nothing is left to overlap it with: run it at once
     * on this thread (comm.h's run); elsewhere queue it. */
    int rc = run ? comm_run(l->comm, &op, NULL)
                 : comm_all_reduce_async(l->comm, l->buf, 2, REDOP_SUM, "the loss", NULL);
    return comm_check(l->comm, rc, NULL, err);
}
