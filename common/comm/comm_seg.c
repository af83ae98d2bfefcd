/* common/comm/comm_seg.c: the shared segment (comm_seg.h): made before fork, leaving no
 * /dev/shm entry; the abort flag, the id exchange, and the bounded spin-then-futex waits. */
#include "common/comm/comm_seg.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"
#include "common/base/cpu_relax.h"

/* The staging ring (tuned with --mode comm): a slot's traffic stays in L2, a rank may run a
 * few chunks ahead.  DDPBENCH_SHM_CHUNK_KB and DDPBENCH_SHM_SLOTS override them. */
#define SEG_DEFAULT_CHUNK_KB 128
#define SEG_DEFAULT_SLOTS 8
#define SEG_MAX_STAGING ((size_t)256 << 20)
/* How long a waiter spins before sleeping: a peer on another core usually publishes within
 * microseconds, about a sleep and wake-up's cost.  Not at all with more ranks than cores, or
 * when the peer last ran on our core (on 2 loaded cores the seed-size DDP step took 51 us
 * p50 with a 20 us spin, 12 us without). */
#define SEG_SPIN_NS 20000ull
/* Longest futex sleep: the abort flag and deadline are checked this often (a dead waker). */
#define SEG_SLEEP_MAX_NS 100000000ull

static long env_long(const char *name, long def, long lo, long hi)
{
    const char *s = getenv(name);
    if (!s || !*s)
        return def;
    char *end;
    long v = strtol(s, &end, 10);
    return (*end || v < lo || v > hi) ? def : v;
}

// ---------------------------------------------------------------------------
// creation

int comm_seg_create(comm_seg_t **out, int world, size_t extra, char *err)
{
    *out = NULL;
    if (world < 1 || world > SEG_MAX_RANKS)
        return err_set(err, DDP_ERR_INPUT, "shared memory: %d ranks (1..%d supported)", world,
                       SEG_MAX_RANKS);
    size_t chunk = (size_t)env_long("DDPBENCH_SHM_CHUNK_KB", SEG_DEFAULT_CHUNK_KB, 4, 65536) *
                   1024 / sizeof(float);
    int slots = (int)env_long("DDPBENCH_SHM_SLOTS", SEG_DEFAULT_SLOTS, 2, SEG_MAX_SLOTS);
    /* Many ranks: shrink the chunks rather than the ring, keeping staging bounded. */
    while (chunk > 1024 && (size_t)slots * (size_t)(world + 1) * chunk * sizeof(float) >
                               SEG_MAX_STAGING)
        chunk /= 2;
    size_t head = (sizeof(seg_header_t) + 4095) & ~(size_t)4095;
    size_t staging = (size_t)slots * (size_t)(world + 1) * chunk * sizeof(float);
    if (extra > SIZE_MAX / 2)
        return err_set(err, DDP_ERR_INPUT, "shared memory: %zu bytes requested", extra);
    size_t bytes = head + staging + ((extra + 4095) & ~(size_t)4095);

    comm_seg_t *s = calloc(1, sizeof *s);
    if (!s)
        return err_set(err, DDP_ERR_RUNTIME, "shared memory: out of memory");

    /* The name exists only between shm_open and shm_unlink, with every catchable signal
     * blocked (only SIGKILL could leak it); the ranks inherit the mapping through fork.
     * O_EXCL and a random name: no planted file is mapped; 0600 keeps other users out. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    char name[64];
    int fd = -1, rc = DDP_OK;
    for (int attempt = 0; attempt < 8 && fd < 0; attempt++) {
        uint64_t rnd = 0;
        if (getrandom(&rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd)
            rnd = now_ns() ^ ((uint64_t)getpid() << 32) ^ (uint64_t)attempt;
        snprintf(name, sizeof name, "/ddpbench-%d-%016llx", (int)getpid(),
                 (unsigned long long)rnd);
        fd = shm_open(name, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    void *map = MAP_FAILED;
    if (fd < 0) {
        rc = err_set(err, DDP_ERR_RUNTIME, "shared memory: shm_open: %s", strerror(errno));
    } else {
        int e = ftruncate(fd, (off_t)bytes) != 0 ? errno : 0;
        /* Reserve the pages now: on a full /dev/shm a touch would be a SIGBUS mid-training. */
        if (!e) {
            e = posix_fallocate(fd, 0, (off_t)bytes);
            if (e == EOPNOTSUPP || e == ENOSYS)
                e = 0;
        }
        if (!e) {
            map = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            e = map == MAP_FAILED ? errno : 0;
        }
        shm_unlink(name);
        close(fd);
        if (e)
            rc = err_set(err, DDP_ERR_RUNTIME,
                         "shared memory: cannot reserve %.1f MiB in /dev/shm: %s%s",
                         (double)bytes / 1048576.0, strerror(e),
                         e == ENOSPC   ? " (mount a larger /dev/shm, e.g. docker --shm-size)"
                         : e == EFBIG ? " (over the file size limit: ulimit -f)"
                                      : "");
    }
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != DDP_OK) {
        if (map != MAP_FAILED)
            munmap(map, bytes);
        free(s);
        return rc;
    }

    seg_header_t *h = map;
    h->world = world;
    for (int r = 0; r < SEG_MAX_RANKS; r++)
        atomic_store(&h->cpu[r].v, -1); /* nobody has published yet */
    h->slots = slots;
    h->chunk = chunk;
    h->spin_ns = world > affinity_cpus() ? 0 : SEG_SPIN_NS; /* the CPUs this process may use */
    s->h = h;
    s->staging = (float *)((char *)map + head);
    s->extra = (char *)map + head + staging;
    s->bytes = bytes;
    *out = s;
    return DDP_OK;
}

void comm_seg_free(comm_seg_t *s)
{
    if (!s)
        return;
    munmap(s->h, s->bytes);
    free(s);
}

void *comm_seg_extra(comm_seg_t *s) { return s->extra; }
int comm_seg_world(const comm_seg_t *s) { return s->h->world; }

// ---------------------------------------------------------------------------
// waking and waiting

static void futex_wait(_Atomic uint32_t *addr, uint32_t expect, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    /* Not FUTEX_PRIVATE: the word is in a mapping shared between processes. */
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAIT, expect, &ts, NULL, 0);
}

static void futex_wake_all(_Atomic uint32_t *addr)
{
    syscall(SYS_futex, (uint32_t *)addr, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* The state a waiter waits for has changed (ordered before this, seq_cst): wake the sleepers,
 * if any.  Why the epoch moves only then: bumped at every publish, its line crossed cores
 * twice a chunk (a fifth of the seed-size DDP step); read, it stays in both caches.  No
 * wake-up is lost: seq_cst on both sides (here the state, then the sleepers' count; the
 * sleeper counts itself in, then reads the epoch and the state), so either the sleeper sees
 * the new state, or this sees the sleeper and moves the epoch it sleeps on. */
static void wake_sleepers(comm_seg_t *s)
{
    if (atomic_load_explicit(&s->h->waiters, memory_order_seq_cst) > 0) {
        atomic_fetch_add_explicit(&s->h->epoch, 1, memory_order_seq_cst);
        futex_wake_all(&s->h->epoch);
    }
}

/* This thread's CPU now (glibc reads it from rseq: no system call). */
static inline int32_t this_cpu(void)
{
    int c = sched_getcpu();
    return c < 0 ? -1 : (int32_t)c;
}

void seg_publish(comm_seg_t *s, int which, int rank, uint64_t value)
{
    int32_t cpu = this_cpu();
    if (atomic_load_explicit(&s->h->cpu[rank].v, memory_order_relaxed) != cpu)
        atomic_store_explicit(&s->h->cpu[rank].v, cpu, memory_order_relaxed);
    /* seq_cst store: orders this rank's staging writes before the counter
     * (release) and the counter before the read of the sleepers. */
    atomic_store_explicit(&s->h->ctr[which][rank].v, value, memory_order_seq_cst);
    wake_sleepers(s);
}

/* Wait, bounded, until ready(): DDP_ERR_RUNTIME on timeout (*timed_out) or abort.  peer:
 * where ready() leaves the rank it waits for (-1: unknown), or NULL. */
typedef bool (*seg_ready_fn)(comm_seg_t *s, void *ctx);
static int wait_for(comm_seg_t *s, seg_ready_fn ready, void *ctx, const int *peer,
                    double timeout_s, bool *timed_out)
{
    *timed_out = false;
    if (ready(s, ctx))
        return DDP_OK;
    uint64_t t0 = now_ns();
    uint64_t spin_until = t0 + s->h->spin_ns;
    /* Spinning while the rank we wait for may be queued behind us on this
     * core only keeps it off the core: sleep at once instead. */
    if (peer && *peer >= 0 && *peer < s->h->world &&
        atomic_load_explicit(&s->h->cpu[*peer].v, memory_order_relaxed) == this_cpu())
        spin_until = t0;
    uint64_t deadline = t0 + (uint64_t)(timeout_s * 1e9);
    seg_header_t *h = s->h;
    for (;;) {
        if (atomic_load_explicit(&h->abort_who, memory_order_acquire))
            return DDP_ERR_RUNTIME;
        uint64_t t = now_ns();
        if (t < spin_until) {
            for (int i = 0; i < 32; i++)
                cpu_relax();
            if (ready(s, ctx))
                return DDP_OK;
            continue;
        }
        if (t >= deadline) {
            /* One last look: the peer may have arrived while we checked the clock. */
            if (ready(s, ctx))
                return DDP_OK;
            *timed_out = true;
            return DDP_ERR_RUNTIME;
        }
        atomic_fetch_add_explicit(&h->waiters, 1, memory_order_seq_cst);
        uint32_t e = atomic_load_explicit(&h->epoch, memory_order_seq_cst);
        /* ready()'s loads after the count, in the waker's order (wake_sleepers) */
        atomic_thread_fence(memory_order_seq_cst);
        if (!ready(s, ctx) && !atomic_load_explicit(&h->abort_who, memory_order_seq_cst)) {
            uint64_t left = deadline - t;
            futex_wait(&h->epoch, e, left < SEG_SLEEP_MAX_NS ? left : SEG_SLEEP_MAX_NS);
        }
        atomic_fetch_sub_explicit(&h->waiters, 1, memory_order_seq_cst);
        if (ready(s, ctx))
            return DDP_OK;
    }
}

typedef struct {
    int which;
    uint64_t target;
    int missing;
} counters_ctx_t;

static bool counters_ready(comm_seg_t *s, void *vctx)
{
    counters_ctx_t *c = vctx;
    int world = s->h->world;
    for (int r = 0; r < world; r++) {
        /* acquire: pairs with the peer's seq_cst store in seg_publish, so the
         * staging data it wrote before publishing is visible to us. */
        if (atomic_load_explicit(&s->h->ctr[c->which][r].v, memory_order_acquire) < c->target) {
            c->missing = r;
            return false;
        }
    }
    return true;
}

int seg_wait_counters(comm_seg_t *s, int which, uint64_t target, double timeout_s, int *missing)
{
    counters_ctx_t c = {which, target, -1};
    bool timed_out;
    int rc = wait_for(s, counters_ready, &c, &c.missing, timeout_s, &timed_out);
    *missing = timed_out ? c.missing : -1;
    return rc;
}

// ---------------------------------------------------------------------------
// abort and the id exchange

void comm_seg_abort(comm_seg_t *s, int who, const char *why)
{
    seg_header_t *h = s->h;
    int slot = who + 1;
    /* The reason first, in this aborter's own slot, then the claim: a reader that sees the
     * claim (seq_cst, after the text) has the reason whole, however long this writer is held
     * up between the two, and a writer killed before its claim aborted nothing.  A second
     * aborter of the same slot leaves the text to the first. */
    int32_t idle = 0;
    if (!atomic_load_explicit(&h->abort_who, memory_order_acquire) &&
        atomic_compare_exchange_strong(&h->abort_writing[slot], &idle, 1)) {
        snprintf(h->abort_why[slot], sizeof h->abort_why[slot], "%s", why ? why : "aborted");
        int32_t none = 0;
        atomic_compare_exchange_strong(&h->abort_who, &none, (int32_t)(who + 2));
    }
    atomic_fetch_add_explicit(&h->epoch, 1, memory_order_seq_cst);
    futex_wake_all(&h->epoch);
}

bool comm_seg_aborted(comm_seg_t *s, char *msg)
{
    seg_header_t *h = s->h;
    int32_t v = atomic_load_explicit(&h->abort_who, memory_order_acquire);
    if (!v)
        return false;
    if (msg) {
        int who = v - 2;
        char by[32];
        if (who < 0)
            snprintf(by, sizeof by, "the supervisor");
        else
            snprintf(by, sizeof by, "rank %d", who);
        err_set(msg, DDP_OK, "aborted by %s: %s", by, h->abort_why[who + 1]);
    }
    return true;
}

void comm_seg_note(comm_seg_t *s, int rank, uint64_t seq, const comm_op_t *op)
{
    seg_note_t *e = &s->h->ledger[rank].n[seq % SEG_LEDGER];
    e->kind = (uint32_t)op->kind;
    e->count = op->count;
    size_t k = op->tag ? strnlen(op->tag, sizeof e->tag - 1) : 0; /* no snprintf per launch */
    memcpy(e->tag, op->tag ? op->tag : "", k);
    e->tag[k] = 0;
    e->seq = seq;
}

/* Rank r's entry: its collective #seq when it still holds it, else its last. */
static const seg_note_t *ledger_entry(comm_seg_t *s, int r, uint64_t seq)
{
    const seg_note_t *e = NULL;
    for (int i = 0; i < SEG_LEDGER; i++) {
        const seg_note_t *x = &s->h->ledger[r].n[i];
        if (x->seq && (!e || (e->seq != seq && (x->seq == seq || x->seq > e->seq))))
            e = x;
    }
    return e;
}

static bool same_note(const seg_note_t *a, const seg_note_t *b)
{
    return a == b || (a && b && a->seq == b->seq && a->kind == b->kind && a->count == b->count &&
                      strcmp(a->tag, b->tag) == 0);
}

void comm_seg_ledger(comm_seg_t *s, uint64_t seq, char *buf, size_t n)
{
    int world = s->h->world;
    bool told[SEG_MAX_RANKS] = {false};
    size_t u = 0;
    buf[0] = 0;
    /* ranks at the same place in one group: "ranks 0, 1 and 3: #5 ..." */
    for (int r = 0; r < world && u + 1 < n; r++) {
        if (told[r])
            continue;
        const seg_note_t *e = ledger_entry(s, r, seq);
        int k = 0, last = r;
        for (int q = r; q < world; q++)
            if (!told[q] && same_note(ledger_entry(s, q, seq), e) && ++k)
                told[last = q] = true;
        u += (size_t)snprintf(buf + u, n - u, "%srank%s", u ? "; " : "", k > 1 ? "s" : "");
        for (int q = r; q <= last && u + 1 < n; q++)
            if (told[q] && same_note(ledger_entry(s, q, seq), e))
                u += (size_t)snprintf(buf + u, n - u, "%s %d", q == r ? "" : q == last ? " and" : ",", q);
        if (u + 1 < n)
            u += e ? (size_t)snprintf(buf + u, n - u, ": #%llu %s%s%s (%llu floats)",
                                      (unsigned long long)e->seq, coll_name((coll_kind_t)e->kind),
                                      e->tag[0] ? " of " : "", e->tag, (unsigned long long)e->count)
                   : (size_t)snprintf(buf + u, n - u, ": none yet");
        u = u < n ? u : n - 1;
    }
}

int comm_seg_abort_origin(comm_seg_t *s, char *why)
{
    seg_header_t *h = s->h;
    int32_t v = atomic_load_explicit(&h->abort_who, memory_order_acquire);
    if (!v)
        return -2;
    if (why)
        snprintf(why, ERR_LEN, "%s", h->abort_why[v - 1]);
    return v - 2;
}

static bool id_ready(comm_seg_t *s, void *ctx)
{
    (void)ctx;
    /* acquire: pairs with rank 0's release store after it wrote the id. */
    return atomic_load_explicit(&s->h->id_ready, memory_order_acquire) != 0;
}

int comm_seg_exchange_id(comm_seg_t *s, int rank, void *id, size_t len, double timeout_s,
                         char *err)
{
    seg_header_t *h = s->h;
    if (len > COMM_SEG_ID_MAX)
        return err_set(err, DDP_ERR_RUNTIME, "id exchange: %zu bytes (at most %d)", len,
                       COMM_SEG_ID_MAX);
    if (rank == 0) {
        memcpy(h->id, id, len);
        h->id_len = (uint32_t)len;
        atomic_store_explicit(&h->id_ready, 1, memory_order_release);
        atomic_thread_fence(memory_order_seq_cst); /* the store before the sleepers' count */
        wake_sleepers(s);
        return DDP_OK;
    }
    bool timed_out;
    if (wait_for(s, id_ready, NULL, NULL, timeout_s, &timed_out) != DDP_OK) {
        if (timed_out)
            return err_set(err, DDP_ERR_RUNTIME,
                           "timed out waiting for rank 0's communicator id: rank 0 did not "
                           "arrive within %g s",
                           timeout_s);
        char msg[ERR_LEN];
        comm_seg_aborted(s, msg);
        return err_set(err, DDP_ERR_RUNTIME, "%s", msg);
    }
    if (h->id_len != len)
        return err_set(err, DDP_ERR_RUNTIME, "id exchange: rank 0 sent %u bytes, expected %zu",
                       h->id_len, len);
    memcpy(id, h->id, len);
    return DDP_OK;
}
