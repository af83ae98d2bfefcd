/* common/comm/comm_shm.c: collectives over the shared segment, for DDP's forked ranks.
 *
 * Each rank's collectives run in launch order on its communication thread (comm_queue.c).
 * A collective is cut into chunks that flow through the segment's ring of slots; per chunk
 * every rank 1. waits until every rank has finished the chunk that last used the slot,
 * 2. stages its input into its part of the slot, 3. waits until everyone has staged, then
 * reduces ITS OWN slice (rank r sums elements [r*len/n, (r+1)*len/n) of all inputs, in rank
 * order), 4. waits until every slice is reduced, then copies the others' slices out: a
 * reduce-scatter then an all-gather, each element summed once in a fixed order, the same bits
 * on every rank.  The ring lets a rank run a few chunks ahead of a slower one.
 *
 * Device (CUDA) buffers are staged through pinned host memory without a host wait: launch
 * queues the input's d2h and an event the comm thread polls; wait queues the h2d back.  The
 * staging is two areas used in turn, one per burst (a DDP step), each refilled only once the
 * event after its last copy back has completed (a step later, so it always has). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/comm/comm_queue.h"
#include "common/comm/comm_seg.h"
#include "common/base/clock.h"

#define SHM_TILE 1024

/* Copy-back to device memory after an op (main thread only). */
typedef struct {
    float *dev_dst;
    const float *host_src;
    size_t back_floats;
    int area;            /* the staging area it used */
    bool staged;         /* its input was copied from the device first */
} shm_back_t;

/* Pinned staging for device buffers (main thread only). */
typedef struct {
    float *buf;
    size_t cap, used;          /* floats */
    backend_event_t *drained;  /* recorded after its last copy back */
} shm_area_t;

typedef struct {
    comm_t c; /* first: a comm_t * is a shm_t * */
    comm_queue_t queue;     /* the ops, their thread and the sticky failure */
    uint64_t ticket;        /* comm thread only: next chunk ticket in the segment */
    uint64_t done_seen;     /* comm thread only: every rank's done counter is at least this */
    uint64_t copied_back;   /* main thread only: ops whose device copy-back is queued */
    shm_back_t back[COMM_QUEUE_LEN]; /* main thread only: per queue slot */
    shm_area_t area[2];     /* main thread only: pinned staging, used in turn */
    int cur_area;
    backend_event_t *staged[COMM_QUEUE_LEN]; /* per queue slot, made on first use */
} shm_t;

// ---------------------------------------------------------------------------
// errors

#define fail(m, ...) comm_queue_fail(&(m)->queue, __VA_ARGS__)

/* The rank that is furthest behind: the one a timed-out wait is really waiting for. */
static int laggard(comm_seg_t *s, int fallback)
{
    int best = fallback;
    uint64_t best_v = UINT64_MAX;
    for (int r = 0; r < s->h->world; r++) {
        uint64_t v = 0;
        for (int w = 0; w < SEG_NCOUNTERS; w++)
            v += atomic_load_explicit(&s->h->ctr[w][r].v, memory_order_acquire);
        if (v < best_v) {
            best_v = v;
            best = r;
        }
    }
    return best;
}

/* A failed wait inside op; a timeout also aborts the group, so the others stop at once. */
static int wait_failed(shm_t *m, const comm_op_t *op, uint64_t seq, int missing)
{
    char msg[ERR_LEN], what[160];
    comm_seg_t *s = m->c.seg;
    if (missing < 0) {
        comm_seg_aborted(s, msg);
        return fail(m, "%s", msg);
    }
    char at[ERR_LEN - 224];
    comm_op_label(what, sizeof what, op, seq);
    comm_seg_ledger(s, seq, at, sizeof at);
    snprintf(msg, sizeof msg, "timed out in %s: rank %d did not arrive within %g s (%s)", what,
             laggard(s, missing), m->c.timeout_s, at);
    comm_seg_abort(s, m->c.rank, msg);
    return fail(m, "%s", msg);
}

// ---------------------------------------------------------------------------
// the chunk engine (comm thread)

/* reduce_slice over 16-bit elements packed two to a word (len words), each addition rounded
 * to 16 bits (base/half.h), in rank order; never averaged. */
static void reduce_slice16(comm_seg_t *s, int slot, int self, const float *mine, size_t lo,
                           size_t len, dtype_t dt, float *dst, float *dst2)
{
    int n = s->h->world;
    uint16_t tmp[2 * SHM_TILE];
    for (size_t t = 0; t < len; t += SHM_TILE) {
        size_t m = 2 * (len - t < SHM_TILE ? len - t : SHM_TILE);
        const uint16_t *a = (const uint16_t *)(self == 0 ? mine + t : seg_in(s, slot, 0) + lo + t);
        for (size_t i = 0; i < m; i++)
            tmp[i] = a[i];
        for (int q = 1; q < n; q++) {
            const uint16_t *c =
                (const uint16_t *)(self == q ? mine + t : seg_in(s, slot, q) + lo + t);
            for (size_t i = 0; i < m; i++)
                tmp[i] = dtype16_add(dt, tmp[i], c[i]);
        }
        memcpy(dst + t, tmp, m * sizeof(uint16_t));
        if (dst2)
            memcpy(dst2 + t, tmp, m * sizeof(uint16_t));
    }
}

/* dst (and dst2 unless NULL) = the ranks' inputs at [lo, lo+len) of the chunk summed in rank
 * order, divided by n for AVG; this rank's own from its buffer (mine), the peers' from their
 * staging.  Tiled so the running sum stays in L1. */
static void reduce_slice(comm_seg_t *s, int slot, int self, const float *mine, size_t lo,
                         size_t len, bool avg, dtype_t dt, float *dst, float *dst2)
{
    if (dt != DTYPE_F32) {
        reduce_slice16(s, slot, self, mine, lo, len, dt, dst, dst2);
        return;
    }
    int n = s->h->world;
    float tmp[SHM_TILE];
    for (size_t t = 0; t < len; t += SHM_TILE) {
        size_t m = len - t < SHM_TILE ? len - t : SHM_TILE;
        const float *a = self == 0 ? mine + t : seg_in(s, slot, 0) + lo + t;
        const float *b = self == 1 ? mine + t : seg_in(s, slot, 1) + lo + t;
        for (size_t i = 0; i < m; i++)
            tmp[i] = a[i] + b[i];
        for (int q = 2; q < n; q++) {
            const float *c = self == q ? mine + t : seg_in(s, slot, q) + lo + t;
            for (size_t i = 0; i < m; i++)
                tmp[i] += c[i];
        }
        if (avg) {
            float fn = (float)n;
            for (size_t i = 0; i < m; i++)
                tmp[i] /= fn;
        }
        memcpy(dst + t, tmp, m * sizeof(float));
        if (dst2)
            memcpy(dst2 + t, tmp, m * sizeof(float));
    }
}

static bool descs_match(shm_t *m, int slot, const seg_desc_t *mine, char *msg)
{
    comm_seg_t *s = m->c.seg;
    for (int q = 0; q < s->h->world; q++) {
        const seg_desc_t *d = &s->h->desc[q][slot];
        if (d->op_seq == mine->op_seq && d->kind == mine->kind && d->count == mine->count &&
            d->redop == mine->redop && d->root == mine->root)
            continue;
        char at[ERR_LEN - 96];
        comm_seg_ledger(s, mine->op_seq, at, sizeof at);
        snprintf(msg, ERR_LEN, "mismatched collectives: rank %d's #%llu is not rank %d's (%s)",
                 m->c.rank, (unsigned long long)mine->op_seq, q, at);
        return false;
    }
    return true;
}

/* One rank alone: only the out-of-place copy is left to do. */
static void run_local(const comm_op_t *op)
{
    const float *src = op->send ? op->send : op->recv;
    if (op->kind != COLL_BARRIER && op->count && src != op->recv)
        memcpy(op->recv, src, op->count * sizeof(float));
}

/* op's input on this rank (all-gather: its own block; reduce-scatter: every block). */
static const float *op_src(const comm_op_t *op, int rank)
{
    if (op->send)
        return op->send;
    if (op->kind == COLL_ALL_GATHER)
        return op->recv + (size_t)rank * op->count;
    if (op->kind == COLL_REDUCE_SCATTER)
        return op->recv - (size_t)rank * op->count;
    return op->recv;
}

/* A reduction chunk this short is reduced whole by every rank that needs it (one crossing)
 * rather than split and gathered back (two): summing n x 16 KiB costs less than a second
 * wait, and the sum, in rank order, is the same bits either way. */
#define SHM_SMALL_FLOATS 4096

/* One chunk of op: where it lies and how it is reduced. */
typedef struct {
    uint64_t k;          /* its ticket */
    int slot;
    size_t off, len;     /* floats of the op's buffers */
    size_t lo, hi;       /* this rank's slice of a split reduction */
    bool reduction;      /* all-reduce or reduce */
    bool whole;          /* reduced whole by every rank that needs it (SHM_SMALL_FLOATS) */
} shm_chunk_t;

/* Step 2: stage our input (seg_publish orders it before the counter): a split reduction only
 * the slices the others reduce; reduce-scatter every block but ours, at in + q*len. */
static void stage_chunk(shm_t *m, const comm_op_t *op, const float *src, const shm_chunk_t *ch)
{
    comm_seg_t *s = m->c.seg;
    const int n = m->c.world, r = m->c.rank;
    float *in = seg_in(s, ch->slot, r), *out = seg_out(s, ch->slot);
    size_t off = ch->off, len = ch->len;
    if (!len)
        return;
    if (ch->whole && (op->kind == COLL_ALL_REDUCE || r != op->root)) {
        memcpy(in, src + off, len * sizeof(float));
    } else if (ch->reduction && !ch->whole) {
        memcpy(in, src + off, ch->lo * sizeof(float));
        memcpy(in + ch->hi, src + off + ch->hi, (len - ch->hi) * sizeof(float));
    } else if (op->kind == COLL_ALL_GATHER) {
        memcpy(in, src + off, len * sizeof(float));
    } else if (op->kind == COLL_REDUCE_SCATTER) {
        for (int q = 0; q < n; q++)
            if (q != r)
                memcpy(in + (size_t)q * len, src + (size_t)q * op->count + off,
                       len * sizeof(float));
    } else if (op->kind == COLL_BROADCAST && r == op->root) {
        memcpy(out, src + off, len * sizeof(float));
    }
}

/* Step 3 of a chunk that is not a split reduction: everyone's input is in. */
static void finish_whole(shm_t *m, const comm_op_t *op, const float *src, const shm_chunk_t *ch)
{
    comm_seg_t *s = m->c.seg;
    const int n = m->c.world, r = m->c.rank;
    const bool avg = op->redop == REDOP_AVG;
    size_t off = ch->off, len = ch->len;
    switch (op->kind) {
    case COLL_ALL_REDUCE: /* every rank sums the whole chunk, in rank order */
        reduce_slice(s, ch->slot, r, src + off, 0, len, avg, op->dtype, op->recv + off, NULL);
        break;
    case COLL_REDUCE:
        if (r == op->root)
            reduce_slice(s, ch->slot, r, src + off, 0, len, avg, op->dtype, op->recv + off, NULL);
        break;
    case COLL_REDUCE_SCATTER: /* our block's piece, from everyone's staging */
        reduce_slice(s, ch->slot, r, src + (size_t)r * op->count + off, (size_t)r * len, len, avg,
                     op->dtype, op->recv + off, NULL);
        break;
    case COLL_BROADCAST:
        if (r != op->root)
            memcpy(op->recv + off, seg_out(s, ch->slot), len * sizeof(float));
        else if (src != op->recv)
            memcpy(op->recv + off, src + off, len * sizeof(float));
        break;
    case COLL_ALL_GATHER:
        for (int q = 0; q < n; q++) {
            float *dst = op->recv + (size_t)q * op->count + off;
            const float *from = q == r ? src + off : seg_in(s, ch->slot, q);
            if (dst != from)
                memcpy(dst, from, len * sizeof(float));
        }
        break;
    default: /* barrier: arriving was all */
        break;
    }
}

/* Steps 3' and 4 of a long reduction chunk: reduce our slice, then copy out the others'. */
static int finish_split(shm_t *m, const comm_op_t *op, uint64_t seq, const float *src,
                        const shm_chunk_t *ch)
{
    comm_seg_t *s = m->c.seg;
    const int r = m->c.rank;
    float *out = seg_out(s, ch->slot);
    size_t off = ch->off, len = ch->len, lo = ch->lo, hi = ch->hi;
    int missing;
    reduce_slice(s, ch->slot, r, src + off + lo, lo, hi - lo, op->redop == REDOP_AVG, op->dtype,
                 out + lo, op->kind == COLL_ALL_REDUCE ? op->recv + off + lo : NULL);
    seg_publish(s, SEG_REDUCED, r, ch->k + 1);
    if (seg_wait_counters(s, SEG_REDUCED, ch->k + 1, m->c.timeout_s, &missing) != DDP_OK)
        return wait_failed(m, op, seq, missing);
    if (op->kind == COLL_ALL_REDUCE) {
        memcpy(op->recv + off, out, lo * sizeof(float));
        memcpy(op->recv + off + hi, out + hi, (len - hi) * sizeof(float));
    } else if (r == op->root) {
        memcpy(op->recv + off, out, len * sizeof(float));
    }
    return DDP_OK;
}

static int run_op(shm_t *m, const comm_op_t *op, uint64_t seq)
{
    comm_seg_t *s = m->c.seg;
    const int n = m->c.world, r = m->c.rank;
    comm_op_t words;
    if (op->dtype != DTYPE_F32) { /* 16-bit pairs: the chunk engine counts words */
        words = *op;
        words.count /= 2;
        op = &words;
    }
    if (n == 1) {
        run_local(op);
        return DDP_OK;
    }
    const size_t C = s->h->chunk;
    const int D = s->h->slots;
    const double T = m->c.timeout_s;
    const float *src = op_src(op, r);
    /* a reduce-scatter's chunk holds a piece of each of the n blocks */
    const size_t step = op->kind == COLL_REDUCE_SCATTER ? C / (size_t)n : C;
    size_t nchunks = op->kind == COLL_BARRIER ? 1 : (op->count + step - 1) / step;
    /* the element type rides in redop's upper bits: a disagreement is a mismatch */
    seg_desc_t mine = {.op_seq = seq, .kind = op->kind,
                       .redop = (uint32_t)op->redop | (uint32_t)op->dtype << 8, .root = op->root,
                       .count = op->count};
    int missing;
    for (size_t j = 0; j < nchunks; j++) {
        shm_chunk_t ch = {.k = m->ticket++, .off = j * step};
        ch.slot = (int)(ch.k % (uint64_t)D);
        ch.len = op->kind == COLL_BARRIER        ? 0
                 : op->count - ch.off < step ? op->count - ch.off
                                             : step;
        ch.reduction = op->kind == COLL_ALL_REDUCE || op->kind == COLL_REDUCE;
        ch.whole = ch.reduction && ch.len <= SHM_SMALL_FLOATS;
        ch.lo = ch.len * (size_t)r / (size_t)n;
        ch.hi = ch.len * (size_t)(r + 1) / (size_t)n;
        uint64_t k = ch.k;

        /* 1. The slot is free once every rank has finished the chunk that used it D tickets
         *    ago.  Mostly known without looking (a cache miss on every collective's critical
         *    path): a rank stages chunk k only after finishing k-1, so every rank having
         *    staged chunk k (step 3, last chunk) means every done counter is at least k. */
        if (k >= (uint64_t)D && m->done_seen < k + 1 - (uint64_t)D &&
            seg_wait_counters(s, SEG_DONE, k + 1 - (uint64_t)D, T, &missing) != DDP_OK)
            return wait_failed(m, op, seq, missing);

        /* 2. Stage our input (stage_chunk). */
        s->h->desc[r][ch.slot] = mine;
        stage_chunk(m, op, src, &ch);
        seg_publish(s, SEG_STAGED, r, k + 1);
        atomic_store_explicit(&m->queue.progress_ns, now_ns(), memory_order_relaxed);

        /* 3. Everyone's input is in (the one crossing most chunks need). */
        if (seg_wait_counters(s, SEG_STAGED, k + 1, T, &missing) != DDP_OK)
            return wait_failed(m, op, seq, missing);
        /* the acquire of every staged[r] >= k+1 orders their reads of the
         * slots before our next writes (step 1 above) */
        m->done_seen = k;
        char msg[ERR_LEN];
        if (!descs_match(m, ch.slot, &mine, msg)) {
            comm_seg_abort(s, r, msg);
            return fail(m, "%s", msg);
        }
        if (!ch.reduction || ch.whole)
            finish_whole(m, op, src, &ch);
        else
            TRY(finish_split(m, op, seq, src, &ch)); /* 3'. and 4. */
        seg_publish(s, SEG_DONE, r, k + 1);
    }
    return DDP_OK;
}

/* Before the comm thread reads a staged input: its d2h, queued at launch, has completed.
 * Polled (it must not block the device's other users), bounded like every wait. */
static int wait_staged(shm_t *m, backend_event_t *ev, const comm_op_t *op, uint64_t seq)
{
    double deadline = now_s() + m->c.timeout_s;
    for (long spins = 0;; spins++) {
        bool done = false;
        if (backend_event_query(m->c.be, ev, &done) != DDP_OK) {
            char what[160];
            comm_op_label(what, sizeof what, op, seq);
            return fail(m, "staging the input of %s: %s", what, backend_last_error(m->c.be));
        }
        if (done)
            return DDP_OK;
        if (comm_seg_aborted(m->c.seg, NULL))
            return wait_failed(m, op, seq, -1);
        if (now_s() > deadline) {
            char msg[ERR_LEN], what[160];
            comm_op_label(what, sizeof what, op, seq);
            snprintf(msg, sizeof msg, "timed out staging the input of %s: the device did not "
                     "finish within %g s", what, m->c.timeout_s);
            comm_seg_abort(m->c.seg, m->c.rank, msg);
            return fail(m, "%s", msg);
        }
        if (spins > 1000) {
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
}

/* comm_queue's run_op: op's staged input first (device buffers), then the chunks. */
static int shm_run_op(comm_t *c, const comm_op_t *op, uint64_t seq, void *staged,
                      comm_span_t *span)
{
    shm_t *m = (shm_t *)c;
    char msg[ERR_LEN];
    span->start_s = now_s();
    if (comm_seg_aborted(c->seg, msg))
        return fail(m, "%s", msg);
    int rc = staged ? wait_staged(m, staged, op, seq) : DDP_OK;
    if (rc == DDP_OK)
        rc = run_op(m, op, seq);
    span->end_s = now_s();
    return rc;
}

// ---------------------------------------------------------------------------
// the main thread's side: launch, wait, staging

static int shm_wait(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    shm_t *m = (shm_t *)c;
    int rc = comm_queue_wait(&m->queue, h, span);
    /* Waiting for an op staged from the device is waiting for the device: counted once. */
    bool staged = false;
    for (uint64_t k = m->copied_back; k < h && !staged; k++)
        staged = m->back[k % COMM_QUEUE_LEN].staged;
    if (rc == DDP_OK && staged)
        backend_count_host_sync(c->be);
    /* Device buffers: results back in op order, queued on the caller's stream. */
    bool touched[2] = {false, false};
    while (rc == DDP_OK && m->copied_back < h) {
        shm_back_t *b = &m->back[m->copied_back % COMM_QUEUE_LEN];
        if (b->back_floats) {
            rc = backend_h2d(c->be, b->dev_dst, b->host_src, b->back_floats * sizeof(float));
            touched[b->area] = true;
        }
        if (rc != DDP_OK)
            return fail(m, "copying a result to the device: %s", backend_last_error(c->be));
        m->copied_back++;
    }
    /* Why an event per area: it may be refilled only once the copies that
     * read it back have run. */
    for (int a = 0; a < 2 && rc == DDP_OK; a++)
        if (touched[a] && backend_event_record(c->be, m->area[a].drained) != DDP_OK)
            return fail(m, "staging: %s", backend_last_error(c->be));
    return rc;
}

static void shm_span(comm_t *c, comm_handle_t h, comm_span_t *span)
{
    comm_queue_span(&((shm_t *)c)->queue, h, span);
}


/* The most a burst may grow a staging area to (1 GiB of floats); one op
 * larger than it still gets the room it needs. */
#define SHM_BURST_MAX_FLOATS ((size_t)1 << 28)

/* Make area a ready for a burst needing need floats: its last copies back have run (in DDP
 * always, a step later), and it is large enough (grown only when nothing is in flight). */
static int area_reset(shm_t *m, int a, size_t need)
{
    comm_t *c = &m->c;
    backend_t *be = c->be;
    shm_area_t *ar = &m->area[a];
    bool done = true;
    if ((!ar->drained && !(ar->drained = backend_event_new(be, false))) ||
        backend_event_query(be, ar->drained, &done) != DDP_OK ||
        (!done && backend_event_sync(be, ar->drained) != DDP_OK))
        return fail(m, "staging: %s", backend_last_error(be));
    ar->used = 0;
    if (need <= ar->cap)
        return DDP_OK;
    /* Room to spare: a later burst may add a small op (DDP's loss), and growing waits. */
    size_t cap = need + need / 8 + 1024;
    if (cap < 2 * ar->cap)
        cap = 2 * ar->cap;
    backend_free_host(be, ar->buf); /* frees once the device is done with it */
    ar->buf = backend_alloc_host(be, cap * sizeof(float));
    ar->cap = ar->buf ? cap : 0;
    if (!ar->buf)
        return fail(m, "out of pinned host memory for %zu bytes of staging", cap * sizeof(float));
    return DDP_OK;
}

/* Device buffers: reserve host staging for op, queue its input's copy there, point op at it. */
static int stage_device_op(shm_t *m, comm_op_t *op, shm_back_t *req,
                           backend_event_t **staged)
{
    comm_t *c = &m->c;
    backend_t *be = c->be;
    bool gather = op->kind == COLL_ALL_GATHER, scatter = op->kind == COLL_REDUCE_SCATTER;
    /* 16-bit elements travel as pairs in float-sized words (an even count) */
    size_t cnt = op->dtype != DTYPE_F32 ? op->count / 2 : op->count;
    size_t mine = (size_t)c->rank * cnt; /* our block in a world-sized buffer */
    size_t need = op->kind == COLL_BARRIER         ? 0
                  : gather || scatter ? cnt * (size_t)c->world
                                      : cnt;
    req->back_floats = 0;
    *staged = NULL;
    if (need == 0)
        return DDP_OK;
    if (m->copied_back == c->issued) {
        /* Nothing in flight: a new burst, in the other area. */
        m->cur_area ^= 1;
        TRY(area_reset(m, m->cur_area, need));
    }
    shm_area_t *ar = &m->area[m->cur_area];
    if (ar->used + need > ar->cap) {
        /* A burst larger than the area: let everything in flight finish, then start over in
         * one that holds the whole burst, up to a bound (--mode comm's back-to-back ops
         * would grow it to iterations x size). */
        size_t burst = ar->used + need;
        TRY(shm_wait(c, c->issued, NULL));
        TRY(area_reset(m, m->cur_area, burst <= SHM_BURST_MAX_FLOATS ? burst : need));
    }
    float *host = ar->buf + ar->used;
    ar->used += need;
    req->area = m->cur_area;
    const float *dev_src = op_src(op, c->rank);
    /* the host copy of the input: ours, in its place in a world-sized buffer */
    float *host_src = gather ? host + mine : host;
    size_t in_floats = scatter ? need : cnt;
    bool has_input = op->kind != COLL_BROADCAST || c->rank == op->root;
    if (has_input && in_floats) {
        /* After the backend's earlier work; the comm thread reads it once `staged` completed. */
        backend_event_t **ev = &m->staged[c->issued % COMM_QUEUE_LEN];
        if ((!*ev && !(*ev = backend_event_new(be, false))) ||
            backend_d2h_async(be, host_src, dev_src, in_floats * sizeof(float)) != DDP_OK ||
            backend_event_record(be, *ev) != DDP_OK)
            return fail(m, "staging a collective's input: %s", backend_last_error(be));
        *staged = *ev;
    }
    bool back = op->kind == COLL_ALL_REDUCE || gather || scatter ||
                (op->kind == COLL_REDUCE && c->rank == op->root) ||
                (op->kind == COLL_BROADCAST && (c->rank != op->root || dev_src != op->recv));
    if (back) {
        req->dev_dst = op->recv;
        req->host_src = scatter ? host + mine : host;
        req->back_floats = scatter ? cnt : need;
    }
    op->send = host_src;
    op->recv = scatter ? host + mine : host;
    return DDP_OK;
}

static int shm_launch(comm_t *c, const comm_op_t *in, comm_handle_t *h)
{
    shm_t *m = (shm_t *)c;
    char msg[ERR_LEN];
    if (h)
        *h = 0;
    TRY(comm_queue_check(&m->queue, in));
    if (comm_seg_aborted(c->seg, msg))
        return fail(m, "%s", msg);
    comm_op_t op = *in;
    shm_back_t back = {0};
    backend_event_t *staged = NULL;
    if (!backend_host_visible(c->be))
        TRY(stage_device_op(m, &op, &back, &staged));
    comm_handle_t mine;
    TRY(comm_queue_launch(&m->queue, &op, staged, &mine));
    back.staged = staged != NULL;
    m->back[(mine - 1) % COMM_QUEUE_LEN] = back;
    if (h)
        *h = mine;
    return DDP_OK;
}

/* Launch and wait in one: on the calling thread for host memory, else the queued path. */
static int shm_run(comm_t *c, const comm_op_t *op, comm_handle_t *h)
{
    shm_t *m = (shm_t *)c;
    if (!backend_host_visible(c->be)) {
        comm_handle_t mine;
        int rc = shm_launch(c, op, &mine);
        if (h)
            *h = rc == DDP_OK ? mine : 0;
        return rc == DDP_OK ? shm_wait(c, mine, NULL) : rc;
    }
    TRY(comm_queue_run(&m->queue, op, h));
    m->copied_back = c->issued; /* host memory: nothing to copy back */
    return DDP_OK;
}

static void shm_abort(comm_t *c, const char *why)
{
    shm_t *m = (shm_t *)c;
    comm_seg_abort(c->seg, c->rank, why);
    fail(m, "aborted: %s", why ? why : "abort");
}

static void shm_destroy(comm_t *c)
{
    shm_t *m = (shm_t *)c;
    /* Abandoning ops the peers are waiting on would leave them to time out:
     * abort the group so they (and our thread) stop now. */
    if (m->queue.thread_started && comm_queue_pending(&m->queue))
        comm_seg_abort(c->seg, c->rank, "a rank left with collectives pending");
    comm_queue_stop(&m->queue);
    if (m->area[0].buf || m->area[1].buf || m->staged[0])
        backend_sync(c->be); /* no copy may still use the staging */
    for (int a = 0; a < 2; a++) {
        backend_free_host(c->be, m->area[a].buf);
        backend_event_free(c->be, m->area[a].drained);
    }
    for (int i = 0; i < COMM_QUEUE_LEN; i++)
        backend_event_free(c->be, m->staged[i]);
    free(m);
}

static const comm_ops_t shm_ops = {COMM_OPS(shm, "shm"), .run = shm_run};

int comm_shm_create(comm_t **out, const comm_args_t *a, char *err)
{
    *out = NULL;
    if (!a->seg)
        return err_set(err, DDP_ERR_RUNTIME, "comm shm: no shared segment");
    if (a->world != comm_seg_world(a->seg) || a->rank < 0 || a->rank >= a->world)
        return err_set(err, DDP_ERR_RUNTIME, "comm shm: rank %d of %d in a segment for %d",
                       a->rank, a->world, comm_seg_world(a->seg));
    shm_t *m = calloc(1, sizeof *m);
    if (!m)
        return err_set(err, DDP_ERR_RUNTIME, "comm shm: out of memory");
    m->c = comm_header(&shm_ops, COMM_SHM, a, m);
    /* Continue the group's chunk numbering where this rank left it (all ranks
     * have finished the same chunks when a group is re-formed). */
    m->ticket = atomic_load(&a->seg->h->ctr[SEG_DONE][a->rank].v);
    int rc = comm_queue_start(&m->queue, &m->c, shm_run_op, 0, err);
    if (rc != DDP_OK) {
        shm_destroy(&m->c);
        return rc;
    }
    *out = &m->c;
    return DDP_OK;
}
