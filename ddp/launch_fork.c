/* ddp/launch_fork.c: the fork launcher (launch.h): the process the user started is the
 * supervisor; it makes the shared segment, forks one rank per device (no CUDA call of its
 * own: CUDA does not survive fork) and watches them.  Failures, stop requests and their
 * graces as docs/faults.md says; ranks die with it (PR_SET_PDEATHSIG), the segment unnamed. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"
#include "common/base/interrupt.h"
#include "common/base/procfile.h"
#include "ddp/launch_impl.h"

/* After a failure, how long ranks get to leave after SIGTERM before SIGKILL. */
#define DDP_GRACE_S 1.0
/* After a stop request, how long ranks get to reach a step's end (and finish a checkpoint)
 * before they are stopped like that: single's and DP's grace (base/interrupt.h). */
#define DDP_STOP_GRACE_S ((double)INTERRUPT_GRACE_S)

// ---------------------------------------------------------------------------
// signals: a self-pipe, so any thread may take the signal and the supervisor still hears it

static int g_sig_pipe[2] = {-1, -1};
static const int g_sigs[] = {SIGCHLD, SIGINT, SIGTERM, SIGHUP};
#define NSIGS ((int)(sizeof g_sigs / sizeof g_sigs[0]))

static pid_t g_sup_pid; /* the supervisor: the one process whose signals these are */

static void on_signal(int sig)
{
    /* A rank between fork and signals_child still has this handler and the pipe: a SIGTERM
     * the supervisor sends it then must not come back as the supervisor's stop request. */
    if (getpid() != g_sup_pid) {
        if (sig != SIGCHLD) { /* end as the signal would have, not as a stop request */
            signal(sig, SIG_DFL);
            raise(sig);
        }
        return;
    }
    int saved = errno;
    unsigned char b = (unsigned char)sig;
    if (write(g_sig_pipe[1], &b, 1) < 0) {
        /* pipe full: the supervisor already has wake-ups pending */
    }
    errno = saved;
}

static int signals_install(struct sigaction *old, char *err)
{
    g_sup_pid = getpid();
    if (pipe2(g_sig_pipe, O_CLOEXEC | O_NONBLOCK) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "ddp: pipe: %s", strerror(errno));
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART | SA_NOCLDSTOP;
    sigemptyset(&sa.sa_mask);
    /* A signal ignored now was ignored when ddpbench started: it stays ignored. */
    for (int i = 0; i < NSIGS; i++)
        if (g_sigs[i] == SIGCHLD || !interrupt_ignored(g_sigs[i]))
            sigaction(g_sigs[i], &sa, &old[i]);
        else
            sigaction(g_sigs[i], NULL, &old[i]);
    return DDP_OK;
}

static void signals_restore(const struct sigaction *old)
{
    for (int i = 0; i < NSIGS; i++)
        sigaction(g_sigs[i], &old[i], NULL);
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    g_sig_pipe[0] = g_sig_pipe[1] = -1;
}

/* In a new rank: default dispositions; the terminal's SIGINT and SIGHUP to the process group
 * are the supervisor's to forward (it stops the ranks in order), not to kill ranks. */
static void signals_child(pid_t parent)
{
    signal(SIGCHLD, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    signal(SIGHUP, SIG_IGN);
    signal(SIGINT, SIG_IGN);
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    /* Die with the supervisor; if it is already gone, leave now. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != parent)
        _exit(1);
}

// ---------------------------------------------------------------------------
// supervision

typedef struct {
    const config_t *cfg;
    comm_seg_t *seg;
    ddp_area_t *area;
    int world;
    pid_t pid[MAX_DEVICES];
    bool alive[MAX_DEVICES];
    int status[MAX_DEVICES];
    int nalive;
    int first_failed;     /* the first rank reaped with a failure, -1 none */
    int interrupted;      /* the signal that interrupted us, 0 none */
    bool stopping;
    double term_at;       /* a stop request: abort and SIGTERM at this time, 0 none */
    double kill_at;       /* SIGKILL the survivors at this time (stopping) */
    char stop_why[ERR_LEN]; /* why we stopped the ranks */
    long oom_kills_before;  /* the kernel's OOM kills when the ranks started */
} sup_t;

/* The kernel's count of OOM kills (/proc/vmstat), 0 unknown: one that grew while the ranks
 * ran names memory as the likely cause of a SIGKILL. */
static long oom_kills(void)
{
    char v[32];
    return procfile_value("/proc/vmstat", "oom_kill ", v, sizeof v) ? strtol(v, NULL, 10) : 0;
}

static void describe_death(const sup_t *s, int r, char *buf)
{
    int st = s->status[r], dev = s->cfg->gpus[r];
    const ddp_rank_rec_t *rec = &s->area->rank[r];
    if (WIFSIGNALED(st))
        err_set(buf, DDP_OK, "rank %d (device %d) killed by signal %d (%s)%s", r, dev,
                WTERMSIG(st), strsignal(WTERMSIG(st)),
                WTERMSIG(st) == SIGKILL && oom_kills() > s->oom_kills_before
                    ? " (out of memory? the kernel's OOM killer ran meanwhile)"
                    : "");
    else if (rec->state == RANK_FAILED && rec->msg[0])
        err_set(buf, DDP_OK, "rank %d (device %d): %s", r, dev, rec->msg);
    else
        err_set(buf, DDP_OK, "rank %d (device %d) exited with status %d", r, dev,
                WIFEXITED(st) ? WEXITSTATUS(st) : -1);
}

static void signal_alive(sup_t *s, int sig)
{
    for (int r = 0; r < s->world; r++)
        if (s->alive[r])
            kill(s->pid[r], sig);
}

/* Begin stopping every rank: abort flag first (ranks blocked in a collective
 * leave it at once), then SIGTERM, and SIGKILL after the grace period. */
static void stop_all(sup_t *s, const char *why)
{
    if (s->stopping)
        return;
    s->stopping = true;
    snprintf(s->stop_why, sizeof s->stop_why, "%s", why);
    comm_seg_abort(s->seg, -1, why);
    signal_alive(s, SIGTERM);
    s->kill_at = now_s() + DDP_GRACE_S;
}

/* A stop request (a signal to the supervisor): the flag every rank reads at its step's end.
 * The first rank to stop aborts the group, freeing the others; nobody is signalled, so rank
 * 0 is not killed mid-checkpoint.  Ranks still running after the grace: as after a failure. */
static void stop_soft(sup_t *s, int sig)
{
    if (s->stopping)
        return;
    s->stopping = true;
    err_set(s->stop_why, DDP_OK, "interrupted by SIG%s", sigabbrev_np(sig));
    /* Why release: a rank that reads the flag also reads what the
     * supervisor wrote before it (nothing yet, but the order is the rule). */
    __atomic_store_n(&s->area->stop_sig, sig, __ATOMIC_RELEASE);
    s->term_at = now_s() + DDP_STOP_GRACE_S;
    s->kill_at = s->term_at + 3600.0;
}

static void reap(sup_t *s)
{
    for (int r = 0; r < s->world; r++) {
        if (!s->alive[r])
            continue;
        int st;
        pid_t p = waitpid(s->pid[r], &st, WNOHANG);
        if (p != s->pid[r])
            continue;
        s->alive[r] = false;
        s->status[r] = st;
        s->nalive--;
        bool ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        /* Stopping on request: a rank gone frees the others from any collective it would
         * have joined (a rank writing a checkpoint is in none). */
        if (s->term_at > 0)
            comm_seg_abort(s->seg, -1, s->stop_why);
        if (!ok && s->first_failed < 0 && !s->stopping) {
            s->first_failed = r;
            char why[ERR_LEN];
            describe_death(s, r, why);
            stop_all(s, why);
        }
    }
}

static void supervise(sup_t *s)
{
    while (s->nalive > 0) {
        /* Sleep until a signal arrives; wake every 100 ms anyway (a missed byte). */
        struct pollfd pfd = {g_sig_pipe[0], POLLIN, 0};
        poll(&pfd, 1, 100);
        unsigned char buf[64];
        ssize_t n;
        while ((n = read(g_sig_pipe[0], buf, sizeof buf)) > 0)
            for (ssize_t i = 0; i < n; i++)
                if (buf[i] != SIGCHLD && !s->interrupted)
                    s->interrupted = buf[i];
        reap(s);
        if (s->interrupted && !s->stopping)
            stop_soft(s, s->interrupted);
        if (s->term_at > 0 && s->nalive > 0 && now_s() >= s->term_at) {
            /* the grace is over: the hard way (stop_all's order) */
            s->term_at = 0;
            comm_seg_abort(s->seg, -1, s->stop_why);
            signal_alive(s, SIGTERM);
            s->kill_at = now_s() + DDP_GRACE_S;
        }
        if (s->stopping && s->nalive > 0 && now_s() >= s->kill_at) {
            signal_alive(s, SIGKILL);
            s->kill_at = now_s() + 3600.0; /* once */
        }
    }
}

/* The one line that says why the run failed, and its status. */
static int failure(const sup_t *s, char *err)
{
    /* A rank that aborted the group did so with the root cause; the others failed of it. */
    char why[ERR_LEN];
    int origin = comm_seg_abort_origin(s->seg, why);
    if (s->interrupted && s->first_failed < 0) {
        interrupt_note(s->interrupted); /* main exits with 128 + the signal */
        bool said = origin >= 0 && origin < s->world &&
                    s->area->rank[origin].rc == DDP_ERR_INTERRUPTED && why[0];
        if (!said)
            snprintf(why, sizeof why, "interrupted by SIG%s", sigabbrev_np(s->interrupted));
        return err_set(err, DDP_ERR_INTERRUPTED, "%s: stopped %d rank%s", why, s->world,
                       s->world == 1 ? "" : "s");
    }
    if (origin >= 0 && origin < s->world && why[0]) {
        int rc = s->area->rank[origin].rc == DDP_ERR_INPUT ? DDP_ERR_INPUT : DDP_ERR_RUNTIME;
        return err_set(err, rc, "rank %d (device %d): %s", origin, s->cfg->gpus[origin], why);
    }
    int r = s->first_failed >= 0 ? s->first_failed : 0;
    describe_death(s, r, err);
    const ddp_rank_rec_t *rec = &s->area->rank[r];
    return rec->state == RANK_FAILED && rec->rc == DDP_ERR_INPUT ? DDP_ERR_INPUT
                                                                 : DDP_ERR_RUNTIME;
}

/* ddp_group_run (launch.h): fork the ranks and supervise them. */
static int fork_run(ddp_group_t *g, ddp_body_fn body, void *ctx, char *err)
{
    sup_t sup = {.cfg = g->cfg, .seg = g->impl, .area = g->area, .world = g->world,
                 .first_failed = -1, .oom_kills_before = oom_kills()};
    sup_t *s = &sup;
    struct sigaction old[NSIGS];
    TRY(signals_install(old, err));
    fflush(NULL); /* buffered output would be written once per process */
    pid_t self = getpid();
    for (int r = 0; r < s->world; r++) {
        pid_t p = fork();
        if (p == 0) {
            signals_child(self);
            interrupt_follow(&s->area->stop_sig); /* the supervisor's stop request */
            /* A CPU rank is a core of its own, so peers never wait for it to be scheduled
             * (base/affinity.h); its communication thread runs anywhere. */
            if (s->cfg->backend == BACKEND_CPU)
                affinity_pin(r, s->world);
            ddp_env_t env = {.rank = r, .world = s->world, .area = s->area, .seg = s->seg};
            int code = body(s->cfg, &env, ctx);
            fflush(NULL);
            _exit(code);
        }
        if (p < 0) {
            char why[ERR_LEN];
            err_set(why, DDP_OK, "fork for rank %d: %s", r, strerror(errno));
            stop_all(s, why);
            break;
        }
        s->pid[r] = p;
        s->alive[r] = true;
        s->nalive++;
    }
    supervise(s);
    signals_restore(old);
    if (s->stopping || s->first_failed >= 0)
        return s->interrupted || s->first_failed >= 0
                   ? failure(s, err)
                   : err_set(err, DDP_ERR_RUNTIME, "%s", s->stop_why);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// the group (launch_impl.h)

static int fork_open(ddp_group_t *g, size_t bytes, char *err)
{
    comm_seg_t *seg;
    TRY(comm_seg_create(&seg, g->world, bytes, err));
    g->impl = seg;
    g->area = comm_seg_extra(seg);
    return DDP_OK;
}

static void fork_close(ddp_group_t *g) { comm_seg_free(g->impl); }

const ddp_group_ops_t ddp_fork_ops = {.open = fork_open, .run = fork_run, .close = fork_close};
