/* ddp/launch_mpi.c: the mpi launcher (launch.h), built with MPI: each process mpirun starts
 * forks its watcher, then joins the start-up check and the group runs (docs/hosts.md says
 * what each step guarantees).  Every wait is bounded (nonblocking MPI polled with a deadline);
 * the launcher's collectives run on a duplicate of MPI_COMM_WORLD, apart from training's. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <mpi.h>

#include "common/base/clock.h"
#include "common/base/fault.h"
#include "ddp/fingerprint.h"
#include "ddp/launch_impl.h"
#include "common/device/backend.h"

#define HOST_LEN 64
#define LABEL_LEN 160
/* A record that says the rank is leaving as it should, its exit status in the next byte. */
#define END_MARK '\001'

static struct {
    bool inited;           /* MPI_Init_thread succeeded here */
    bool agreed_failure;   /* every rank exits with the start-up check's status */
    int rank, world, local_rank;
    MPI_Comm comm;         /* the launcher's collectives */
    char host[HOST_LEN];
    char host0[HOST_LEN];  /* rank 0's, after the start-up check */
    char hosts[MAX_DEVICES][HOST_LEN]; /* rank 0: every rank's */
    int label_fd;          /* to the watcher: what to call this rank if it dies */
} g_mpi = {.label_fd = -1};

// ---------------------------------------------------------------------------
// the watcher

static volatile sig_atomic_t g_forwarded; /* a signal the watcher got, passed on */
static volatile pid_t g_sender;               /* and who sent it (0: unknown) */
static volatile pid_t g_rank_pid;

static volatile sig_atomic_t g_is_rank0, g_said; /* rank 0's watcher; its line is out */
static volatile pid_t g_parent;

/* What the rank told its watcher: the label to name it by, and its END_MARK status. */
static int g_label_fd = -1; /* non-blocking: the handler reads it too */
static char g_label[LABEL_LEN];
static volatile sig_atomic_t g_ended, g_end_code;

/* Read every whole record the rank has sent (async-signal-safe).  Each record is one write
 * of LABEL_LEN bytes, under PIPE_BUF, so a read never sees half of one. */
static void drain_labels(void)
{
    char buf[LABEL_LEN];
    while (g_label_fd >= 0 && read(g_label_fd, buf, sizeof buf) == (ssize_t)sizeof buf) {
        if (buf[0] == END_MARK) {
            g_end_code = (unsigned char)buf[1];
            g_ended = 1;
        } else {
            memcpy(g_label, buf, sizeof g_label);
        }
    }
}

#define STOPPED(s) "ddpbench: stopped: interrupted by SIG" s ": mpirun ended the job\n"

static void forward(int sig, siginfo_t *si, void *unused)
{
    (void)unused;
    if (!g_forwarded) {
        g_sender = si && si->si_code == SI_USER ? si->si_pid : 0;
        g_forwarded = sig;
        /* mpirun ending the job: rank 0's line goes out now, before mpirun stops forwarding
         * our stderr; not when the rank already gave its answer (its error line is out) */
        drain_labels();
        if (g_is_rank0 && !g_ended && (g_sender == 0 || g_sender == g_parent)) {
            const char *line = sig == SIGTERM ? STOPPED("TERM") : sig == SIGINT ? STOPPED("INT")
                             : sig == SIGHUP  ? STOPPED("HUP")  : STOPPED("NAL");
            ssize_t w = write(2, line, strlen(line));
            (void)w;
            g_said = 1;
        }
    }
    if (g_rank_pid > 0)
        kill(g_rank_pid, sig);
}

/* The rank this process is, as mpirun's environment says ("?" if none). */
static const char *env_rank(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        if (v && *v)
            return v;
    }
    return "?";
}

/* The parent's life: wait for the rank; its exit status is ours.  Killed by a signal nobody
 * sent through us, or gone without ddp_launch_end (a crash's _exit): name it, exit 1. */
static int watch(pid_t child, int label_fd)
{
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    g_rank_pid = child;
    g_parent = getppid();
    g_label_fd = label_fd;
    fcntl(label_fd, F_SETFL, fcntl(label_fd, F_GETFL) | O_NONBLOCK);
    g_is_rank0 = strcmp(env_rank(), "0") == 0;
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        sigaction(sigs[i], &sa, NULL);
    int st = 0;
    while (waitpid(child, &st, 0) < 0 && errno == EINTR) {
    }
    char label[LABEL_LEN];
    char host[HOST_LEN] = "";
    gethostname(host, sizeof host - 1);
    snprintf(label, sizeof label, "rank %s (host %s)", env_rank(), host);
    sigset_t all, old;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, &old); /* the handler drains the same pipe */
    drain_labels(); /* the rest: the rank is gone, so every record it sent is there */
    if (g_label[0])
        memcpy(label, g_label, sizeof label);
    bool ended = g_ended; /* the rank left through ddp_launch_end, its status its own */
    int end_code = g_end_code;
    sigprocmask(SIG_SETMASK, &old, NULL);
    label[LABEL_LEN - 1] = 0;
    close(label_fd);
    g_label_fd = -1;
    /* A signal from mpirun (our parent) ends the job: rank 0 says so, once.  One from anyone
     * else stops this rank alone, named.  Either way the status is 128 + the signal. */
    int fsig = g_forwarded;
    if (fsig && g_sender != 0 && g_sender != g_parent) {
        fprintf(stderr, "ddpbench: stopped: %s: interrupted by SIG%s from process %ld\n", label,
                sigabbrev_np(fsig), (long)g_sender);
        return 128 + fsig;
    }
    if (WIFEXITED(st) && (ended || fsig))
        return WEXITSTATUS(st);
    /* Its answer was out when mpirun, ending the job for another rank's same answer, caught
     * it still leaving: that answer is the one, said once. */
    if (ended && fsig)
        return end_code;
    if (WIFEXITED(st)) { /* it quit in the middle (an _exit, a library's exit) */
        fprintf(stderr, "ddpbench: error: %s exited with status %d\n", label, WEXITSTATUS(st));
        return 1;
    }
    if (!WIFSIGNALED(st))
        return 1;
    int sig = WTERMSIG(st);
    if (fsig) { /* mpirun is ending the job */
        if (g_is_rank0 && !g_said)
            fprintf(stderr, "ddpbench: stopped: interrupted by SIG%s: mpirun ended the job\n",
                    sigabbrev_np(fsig));
        return 128 + fsig;
    }
    fprintf(stderr, "ddpbench: error: %s killed by signal %d (%s)\n", label, sig, strsignal(sig));
    return 1;
}

/* Tell the watcher what to call this rank from now on. */
static void set_label(const char *label)
{
    char buf[LABEL_LEN] = {0};
    snprintf(buf, sizeof buf, "%s", label);
    if (g_mpi.label_fd >= 0 && write(g_mpi.label_fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
        /* a full pipe: the watcher keeps the label it has */
    }
}

// ---------------------------------------------------------------------------
// bounded waits

/* Poll rq until done or limit_s passes ("timed out in WHAT: ..."). */
static int wait_bounded(MPI_Request *rq, double limit_s, const char *what, char *err)
{
    double deadline = now_s() + limit_s;
    for (;;) {
        int done = 0, code = MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (code != MPI_SUCCESS) {
            char text[MPI_MAX_ERROR_STRING];
            int len = 0;
            MPI_Error_string(code, text, &len);
            return err_set(err, DDP_ERR_RUNTIME, "%s: %s", what, text);
        }
        if (done)
            return DDP_OK;
        if (now_s() > deadline)
            return err_set(err, DDP_ERR_RUNTIME, "timed out in %s: a rank did not arrive within %g s",
                           what, limit_s);
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

/* The bound on forming a group (COMM_INIT_TIMEOUT_S, or --timeout when longer): ranks may
 * arrive far apart (one still loading its data). */
static double init_bound(const config_t *cfg)
{
    return cfg->timeout_s > COMM_INIT_TIMEOUT_S ? cfg->timeout_s : COMM_INIT_TIMEOUT_S;
}

// ---------------------------------------------------------------------------
// start

int ddp_mpi_init(config_t *cfg, int *code, char *err)
{
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "mpi launcher: pipe: %s", strerror(errno));
    fflush(NULL);
    pid_t parent = getpid();
    pid_t child = fork();
    if (child < 0) {
        close(fds[0]);
        close(fds[1]);
        return err_set(err, DDP_ERR_RUNTIME, "mpi launcher: fork: %s", strerror(errno));
    }
    if (child > 0) {
        close(fds[1]);
        *code = watch(child, fds[0]);
        return DDP_LAUNCH_WATCHER;
    }
    /* The rank: die with the watcher, even when it is SIGKILLed. */
    close(fds[0]);
    g_mpi.label_fd = fds[1];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);

    /* Open MPI's libnbc all-reduce below 4 ranks or in place is a binomial reduce then
     * broadcast, half the ring's bandwidth over a slow link; --predict's model is the ring's:
     * ask for it unless the user chose (read in MPI_Init; other MPIs ignore the name). */
    setenv("OMPI_MCA_coll_libnbc_iallreduce_algorithm", "1", 0);
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "MPI_Init_thread failed");
    g_mpi.inited = true;
    if (provided < MPI_THREAD_MULTIPLE)
        return err_set(err, DDP_ERR_RUNTIME,
                       "this MPI gives thread level %d, and ddpbench needs MPI_THREAD_MULTIPLE "
                       "(%d): the communication thread polls while the rank computes",
                       provided, MPI_THREAD_MULTIPLE);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_mpi.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g_mpi.world);
    /* every rank makes these together, right after MPI_Init */
    MPI_Comm_dup(MPI_COMM_WORLD, &g_mpi.comm);
    MPI_Comm_set_errhandler(g_mpi.comm, MPI_ERRORS_RETURN);
    const char *lr = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
    if (lr && *lr) {
        g_mpi.local_rank = atoi(lr);
    } else {
        MPI_Comm local;
        MPI_Comm_split_type(g_mpi.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &local);
        MPI_Comm_rank(local, &g_mpi.local_rank);
        MPI_Comm_free(&local);
    }
    gethostname(g_mpi.host, sizeof g_mpi.host - 1);
    cfg->launcher = LAUNCHER_MPI;
    cfg->world_rank = g_mpi.rank;
    cfg->world_size = g_mpi.world;
    cfg->local_rank = g_mpi.local_rank;
    char label[LABEL_LEN];
    snprintf(label, sizeof label, "rank %d (host %s)", g_mpi.rank, g_mpi.host);
    set_label(label);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the start-up check

typedef struct {
    int32_t rc, device;
    char host[HOST_LEN];
    char msg[ERR_LEN];
    fingerprint_t fp;
} startup_t;

typedef struct {
    int32_t rc;
    int32_t device[MAX_DEVICES];
    char host0[HOST_LEN];
} verdict_t;

/* Rank 0's judgement of every rank's start: the first failure, else the first rank whose
 * fingerprint differs from rank 0's; msg (ERR_LEN) says it. */
static int judge(const startup_t *all, int world, char *msg)
{
    int first = -1, nfail = 0;
    bool same = true;
    for (int r = 0; r < world; r++) {
        if (all[r].rc == DDP_OK)
            continue;
        nfail++;
        if (first < 0)
            first = r;
        else if (strcmp(all[r].msg, all[first].msg) != 0)
            same = false;
    }
    if (first >= 0) {
        if (nfail == world && same) /* every rank says the same: say it once */
            return err_set(msg, all[first].rc, "%s", all[first].msg);
        return err_set(msg, all[first].rc, "rank %d (host %s): %s", first, all[first].host,
                       all[first].msg);
    }
    static fingerprint_t fps[MAX_DEVICES];
    char names[MAX_DEVICES][HOST_LEN + 32];
    const char *who[MAX_DEVICES];
    for (int r = 0; r < world && r < MAX_DEVICES; r++) {
        fps[r] = all[r].fp;
        snprintf(names[r], sizeof names[r], "rank %d (host %s)", r, all[r].host);
        who[r] = names[r];
    }
    return fingerprint_judge(fps, world, who, msg);
}

int ddp_mpi_agree(config_t *cfg, const dataset_t *data, int rc, char *err)
{
    if (!g_mpi.inited)
        return rc;
    startup_t *mine = calloc(1, sizeof *mine);
    startup_t *all = g_mpi.rank == 0 ? calloc((size_t)g_mpi.world, sizeof *all) : NULL;
    verdict_t v = {0};
    if (!mine || (g_mpi.rank == 0 && !all)) {
        free(mine);
        free(all);
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for the start-up check");
    }
    mine->rc = rc;
    mine->device = rc == DDP_OK && cfg->ngpus > g_mpi.rank ? cfg->gpus[g_mpi.rank] : -1;
    snprintf(mine->host, sizeof mine->host, "%s", g_mpi.host);
    snprintf(mine->msg, sizeof mine->msg, "%s", rc == DDP_OK ? "" : err);
    if (rc == DDP_OK)
        fingerprint_make(&mine->fp, cfg, data);
    /* Why bounded: a rank that never arrives must not hold the others here for ever. */
    MPI_Request rq;
    double limit = init_bound(cfg);
    char why[ERR_LEN];
    int lrc = MPI_Igather(mine, (int)sizeof *mine, MPI_BYTE, all, (int)sizeof *mine, MPI_BYTE, 0,
                          g_mpi.comm, &rq) == MPI_SUCCESS
                  ? wait_bounded(&rq, limit, "the start-up check", why)
                  : err_set(why, DDP_ERR_RUNTIME, "the start-up check: MPI_Igather failed");
    if (lrc == DDP_OK && g_mpi.rank == 0) {
        v.rc = judge(all, g_mpi.world, why);
        for (int r = 0; r < g_mpi.world; r++) {
            v.device[r] = all[r].device;
            snprintf(g_mpi.hosts[r], HOST_LEN, "%s", all[r].host);
        }
        snprintf(v.host0, sizeof v.host0, "%s", g_mpi.host);
    }
    if (lrc == DDP_OK)
        lrc = MPI_Ibcast(&v, (int)sizeof v, MPI_BYTE, 0, g_mpi.comm, &rq) == MPI_SUCCESS
                  ? wait_bounded(&rq, limit, "the start-up check", why)
                  : err_set(why, DDP_ERR_RUNTIME, "the start-up check: MPI_Ibcast failed");
    free(mine);
    free(all);
    if (lrc != DDP_OK) /* the check itself failed: this rank ends the job */
        return err_set(err, lrc, "rank %d (host %s): %s", g_mpi.rank, g_mpi.host, why);
    /* From here every rank shares the verdict and exits with it. */
    snprintf(g_mpi.host0, sizeof g_mpi.host0, "%s", v.host0);
    if (v.rc != DDP_OK) {
        g_mpi.agreed_failure = true;
        if (g_mpi.rank == 0)
            snprintf(err, ERR_LEN, "%s", why);
        else
            err[0] = 0; /* rank 0 says it for everyone */
        return v.rc;
    }
    for (int r = 0; r < g_mpi.world && r < cfg->ngpus; r++)
        cfg->gpus[r] = v.device[r];
    char label[LABEL_LEN];
    snprintf(label, sizeof label, "rank %d (device %d, host %s)", g_mpi.rank,
             cfg->gpus[g_mpi.rank], g_mpi.host);
    set_label(label);
    return DDP_OK;
}

void ddp_mpi_describe(char *buf, size_t len)
{
    int nhosts = 0;
    bool seen[MAX_DEVICES] = {false};
    char list[1024] = "";
    size_t lu = 0;
    for (int r = 0; r < g_mpi.world && r < MAX_DEVICES; r++) {
        if (seen[r])
            continue;
        nhosts++;
        int here = 0; /* ranks on this host: "rank 2" or "ranks 0-1" */
        for (int q = r; q < g_mpi.world && q < MAX_DEVICES; q++)
            here += strcmp(g_mpi.hosts[q], g_mpi.hosts[r]) == 0;
        lu += (size_t)snprintf(list + lu, lu < sizeof list ? sizeof list - lu : 0, "%s%s: rank%s ",
                               nhosts > 1 ? ", " : "", g_mpi.hosts[r], here > 1 ? "s" : "");
        int written = 0;
        for (int q = r; q < g_mpi.world && q < MAX_DEVICES; q++) {
            if (seen[q] || strcmp(g_mpi.hosts[q], g_mpi.hosts[r]) != 0)
                continue;
            seen[q] = true;
            int last = q; /* a run of consecutive ranks on this host: q-last */
            while (last + 1 < g_mpi.world && strcmp(g_mpi.hosts[last + 1], g_mpi.hosts[r]) == 0)
                seen[++last] = true;
            if (lu < sizeof list)
                lu += (size_t)snprintf(list + lu, sizeof list - lu, last > q ? "%s%d-%d" : "%s%d",
                                       written++ ? "," : "", q, last);
            q = last;
        }
    }
    snprintf(buf, len, "mpirun: %d rank%s on %d host%s (%s)", g_mpi.world,
             g_mpi.world == 1 ? "" : "s", nhosts, nhosts == 1 ? "" : "s", list);
}

int ddp_mpi_end(int code)
{
    char mark[3] = {END_MARK, (char)(unsigned char)code, 0};
    set_label(mark); /* the watcher: this exit status is the rank's answer */
    if (!g_mpi.inited)
        return code;
    fflush(NULL);
    if (code == 0 || g_mpi.agreed_failure) {
        /* Why a barrier on an agreed failure: rank 0's watcher, signalled by mpirun before
         * rank 0 printed its line and sent its end mark, would add a "stopped" line.  Every
         * rank holds the verdict and comes here (a dead rank ends the job), so none waits for
         * ever; after it, rank 0's watcher has the end mark. */
        if (g_mpi.agreed_failure)
            MPI_Barrier(g_mpi.comm);
        MPI_Finalize();
        if (fault_at(g_mpi.rank, 0) == FAULT_LINGER)
            sleep(FAULT_PAUSE_S);
        return code;
    }
    /* A failure only this rank knows of: the others would wait for it in their next
     * collective, so the job ends here (mpirun exits with this code). */
    MPI_Abort(MPI_COMM_WORLD, code);
    return code;
}

// ---------------------------------------------------------------------------
// the group

static int nccl_exchange(void *ctx, int rank, void *id, size_t len, double timeout_s, char *err)
{
    (void)ctx;
    (void)rank;
    /* Why: rank 0's ncclUniqueId must reach every rank before any joins. */
    MPI_Request rq;
    if (MPI_Ibcast(id, (int)len, MPI_BYTE, 0, g_mpi.comm, &rq) != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "MPI_Ibcast of the NCCL id failed");
    return wait_bounded(&rq, timeout_s, "the NCCL id's broadcast", err);
}

static int mpi_open(ddp_group_t *g, size_t bytes, char *err)
{
    if (!g_mpi.inited || g->world != g_mpi.world || g->rank != g_mpi.rank)
        return err_set(err, DDP_ERR_RUNTIME, "mpi launcher: a group of %d ranks, MPI has %d",
                       g->world, g_mpi.world);
    size_t n = (bytes + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, n ? n : 64);
    if (!p)
        return err_set(err, DDP_ERR_RUNTIME, "out of memory for %zu bytes of results", n);
    memset(p, 0, n);
    g->impl = p;
    g->area = p;
    return DDP_OK;
}

/* How far this host's monotonic clock is ahead of rank 0's (0 on rank 0's host), read just
 * after a barrier. */
static int clock_offset(const ddp_group_t *g, double *offset, char *err)
{
    MPI_Request rq;
    double limit = init_bound(g->cfg);
    *offset = 0.0;
    if (MPI_Ibarrier(g_mpi.comm, &rq) != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "MPI_Ibarrier failed");
    TRY(wait_bounded(&rq, limit, "the ranks' first barrier", err));
    double t = now_s(), t0 = t;
    if (MPI_Ibcast(&t0, 1, MPI_DOUBLE, 0, g_mpi.comm, &rq) != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "MPI_Ibcast failed");
    TRY(wait_bounded(&rq, limit, "the ranks' clocks", err));
    if (strcmp(g_mpi.host, g_mpi.host0) != 0)
        *offset = t - t0;
    return DDP_OK;
}

/* Under mpirun a device's name says its host too (ranks on several hosts). */
static void name_device(const config_t *cfg, device_stats_t *d)
{
    if (d->name[0])
        return;
    const char *what = NULL;
    if (cfg->backend == BACKEND_CUDA) {
        const gpu_topology_t *t = backend_cuda_gpus();
        if (t && d->device_id >= 0 && d->device_id < t->count)
            what = t->gpu[d->device_id].name;
    } else {
        what = backend_cpu_model();
    }
    snprintf(d->name, sizeof d->name, "%.40s%shost %.16s", what && *what ? what : "",
             what && *what ? ", " : "", g_mpi.host);
}

static int mpi_run(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err)
{
    double offset;
    TRY(clock_offset(g, &offset, err));
    ddp_env_t env = {.rank = g->rank, .world = g->world, .area = g->area,
                     .exchange = nccl_exchange};
    ddp_rank_rec_t *rec = &g->area->rank[g->rank];
    int rc = body(g->cfg, &env, ctx);
    if (rc != DDP_OK)
        return err_set(err, rc, "rank %d (device %d, host %s): %s", g->rank,
                       g->cfg->gpus[g->rank], g_mpi.host, rec->msg[0] ? rec->msg : "failed");
    name_device(g->cfg, &rec->stats);
    trace_rec_t *tr = ddp_area_trace(g->area, g->rank);
    for (uint32_t i = 0; tr && offset != 0.0 && i < tr->n; i++) {
        tr->ev[i].t_begin -= offset;
        tr->ev[i].t_end -= offset;
    }
    /* Rank 0 gathers every record, then every slot, into its own area (read as the segment). */
    double limit = 2.0 * g->cfg->timeout_s + 10.0;
    MPI_Request rq;
    const int rb = (int)sizeof *rec;
    bool root = g->rank == 0;
    if (MPI_Igather(root ? MPI_IN_PLACE : (void *)rec, rb, MPI_BYTE, g->area->rank, rb, MPI_BYTE,
                    0, g_mpi.comm, &rq) != MPI_SUCCESS)
        return err_set(err, DDP_ERR_RUNTIME, "rank %d: MPI_Igather failed", g->rank);
    rc = wait_bounded(&rq, limit, "gathering the ranks' results", err);
    size_t stride = g->area->trace_stride;
    if (rc == DDP_OK && stride > 0) {
        char *slots = (char *)g->area + g->area->off_trace;
        if (stride > (size_t)INT32_MAX ||
            MPI_Igather(root ? MPI_IN_PLACE : (void *)(slots + (size_t)g->rank * stride),
                        (int)stride, MPI_BYTE, slots, (int)stride, MPI_BYTE, 0, g_mpi.comm,
                        &rq) != MPI_SUCCESS)
            return err_set(err, DDP_ERR_RUNTIME, "rank %d: MPI_Igather of %zu bytes failed",
                           g->rank, stride);
        rc = wait_bounded(&rq, limit, "gathering the ranks' results", err);
    }
    if (rc != DDP_OK)
        return err_prefix(err, rc, "rank %d (device %d, host %s)", g->rank,
                          g->cfg->gpus[g->rank], g_mpi.host);
    return DDP_OK;
}

static void mpi_close(ddp_group_t *g) { free(g->impl); }

const ddp_group_ops_t ddp_mpi_ops = {.open = mpi_open, .run = mpi_run, .close = mpi_close};
