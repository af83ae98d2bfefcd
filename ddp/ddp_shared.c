/* ddp/ddp_shared.c: the layout of the shared segment's extra area
 * that DDP's ranks hand their results back in (ddp_shared.h says what lies
 * where and who writes it), laid out by the supervisor before the fork, by
 * each process under mpirun, and by --mode comm for its per-rank blocks. */
#include "ddp/ddp_shared.h"

size_t ddp_area_layout(ddp_area_t *a, int world, long max_log, size_t nparams,
                       uint32_t trace_cap)
{
    size_t off = (sizeof(ddp_area_t) + 63) & ~(size_t)63;
    size_t log = off;
    off += (size_t)max_log * sizeof(loss_point_t);
    off = (off + 63) & ~(size_t)63;
    size_t params = off;
    off += nparams * sizeof(float);
    off = (off + 63) & ~(size_t)63;
    size_t trace = off;
    size_t stride = trace_cap ? (trace_rec_bytes(trace_cap) + 63) & ~(size_t)63 : 0;
    off += (size_t)world * stride;
    if (a) {
        a->world = world;
        a->max_log = max_log;
        a->nparams = nparams;
        a->trace_cap = trace_cap;
        a->off_log = log;
        a->off_params = params;
        a->off_trace = trace;
        a->trace_stride = stride;
        for (int r = 0; r < world && trace_cap; r++)
            trace_rec_init(ddp_area_trace(a, r), trace_cap, r);
    }
    return off;
}
