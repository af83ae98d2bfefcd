/* gate/ab_child.c: one child run of the A/B gate (ab.h): started in
 * its own process group, its stdout and stderr read while it runs, stopped
 * when the gate is asked to stop or when it outlives its deadline, reaped,
 * its group's leftovers killed, a failure named (which side, which round,
 * its exit status or signal, its last stderr line), its JSON read. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gate/ab.h"
#include "gate/gate.h"
#include "common/base/clock.h"
#include "common/base/interrupt.h"
#include "common/base/status.h"
#include "common/base/text.h"

#define AB_OUT_MAX (64u << 20) /* a child's stdout: one JSON object, far below this */
#define AB_KILL_GRACE_S 5.0    /* SIGTERM (or the user's signal), then SIGKILL */
#define AB_POLL_MS 50          /* how often the child's end, the deadline and a stop are seen */

// ---------------------------------------------------------------------------
// reading a child's --json

static double num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* A time the child reports, when it has one, within gate.h's bounds. */
static int time_ok(double t, const char *what, const char *who, const char *when, char *err)
{
    if (isnan(t) || (t >= GATE_TIME_MIN_S && t <= GATE_TIME_MAX_S))
        return DDP_OK;
    return err_set(err, DDP_ERR_RUNTIME, "--against: the %s's JSON in %s has %s %g: not a time "
                   "a run measures (%g to %g s)", who, when, what, t, GATE_TIME_MIN_S,
                   GATE_TIME_MAX_S);
}

/* The figures the gate uses; DDP_ERR_RUNTIME when the object lacks them. */
static int side_read(ab_side_t *s, const char *who, const char *when, char *err)
{
    s->step_p50 = num_at(s->json, "step_time_s", "p50");
    s->work_p10 = num_at(s->json, "work_cpu_s", "p10");
    if (isnan(s->step_p50))
        return err_set(err, DDP_ERR_RUNTIME, "--against: the %s's JSON in %s has no "
                       "step_time_s.p50 (is it a ddpbench?)", who, when);
    TRY(time_ok(s->step_p50, "step_time_s.p50", who, when, err));
    TRY(time_ok(s->work_p10, "work_cpu_s.p10", who, when, err));
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(s->json, "devices");
    s->ndev = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devs)
    {
        if (s->ndev >= MAX_DEVICES)
            break;
        s->work_dev[s->ndev] = num_at(d, "work_cpu_s", "p10");
        TRY(time_ok(s->work_dev[s->ndev], "devices[].work_cpu_s.p10", who, when, err));
        const cJSON *ph = cJSON_GetObjectItemCaseSensitive(d, "phases_s_per_step");
        for (int p = 0; p < PH_COUNT; p++) {
            double v = num_at(ph, phase_key((phase_t)p), NULL);
            s->phase[s->ndev][p] = isfinite(v) ? v : 0.0;
        }
        s->ndev++;
    }
    const cJSON *env = cJSON_GetObjectItemCaseSensitive(s->json, "environment");
    const cJSON *la = cJSON_GetObjectItemCaseSensitive(env, "loadavg");
    s->load1 = cJSON_IsString(la) ? strtod(la->valuestring, NULL) : NAN;
    const char *blas = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(env, "blas"));
    const char *core = blas ? strstr(blas, "(core ") : NULL;
    s->core[0] = 0;
    if (core)
        snprintf(s->core, sizeof s->core, "%.*s", (int)strcspn(core + 6, ",)"), core + 6);
    /* the run's own record of what else the machine did: its round retaken or flagged */
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s->json, "machine");
    s->disturbed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "disturbed"));
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(m, "why");
    const char *w = cJSON_IsString(why) ? why->valuestring : ""; /* a child's words: escaped */
    text_escape(w, strlen(w), s->why, sizeof s->why);
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// its output

typedef struct {
    char *buf;
    size_t len, cap;
} growbuf_t;

static bool grow_add(growbuf_t *g, const char *p, size_t n)
{
    if (g->len + n + 1 > g->cap) {
        size_t cap = g->cap ? g->cap : 4096;
        while (cap < g->len + n + 1)
            cap *= 2;
        if (cap > AB_OUT_MAX)
            return false;
        char *nb = realloc(g->buf, cap);
        if (!nb)
            return false;
        g->buf = nb;
        g->cap = cap;
    }
    memcpy(g->buf + g->len, p, n);
    g->len += n;
    g->buf[g->len] = 0;
    return true;
}

/* The last non-empty line of text (into out). */
static void last_line(const char *text, size_t len, char *out, size_t n)
{
    size_t end = len;
    while (end > 0 && (text[end - 1] == '\n' || text[end - 1] == '\r'))
        end--;
    size_t start = end;
    while (start > 0 && text[start - 1] != '\n')
        start--;
    size_t k = end - start < n - 1 ? end - start : n - 1;
    memcpy(out, text + start, k);
    out[k] = 0;
}

typedef struct {
    struct pollfd pf[2]; /* stdout, stderr; fd -1 once closed */
    growbuf_t out, err;
    bool overflow;
} streams_t;

/* Read what is ready within ms milliseconds; false when nothing was. */
static bool streams_read(streams_t *st, int ms)
{
    if (st->pf[0].fd < 0 && st->pf[1].fd < 0) {
        if (ms > 0)
            poll(NULL, 0, ms);
        return false;
    }
    int pr = poll(st->pf, 2, ms);
    if (pr <= 0)
        return false;
    static char chunk[65536]; /* not on the stack (docs/faults.md); one child is read at a time */
    bool got = false;
    for (int i = 0; i < 2; i++) {
        if (st->pf[i].fd < 0 || !(st->pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        ssize_t k = read(st->pf[i].fd, chunk, sizeof chunk);
        if (k > 0) {
            got = true;
            growbuf_t *g = i == 0 ? &st->out : &st->err;
            if (i == 1 && st->err.len > 8192) { /* keep stderr's tail only */
                memmove(st->err.buf, st->err.buf + st->err.len - 4096, 4096);
                st->err.len = 4096;
            }
            if (!grow_add(g, chunk, (size_t)k))
                st->overflow = true;
        } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
            close(st->pf[i].fd);
            st->pf[i].fd = -1;
        }
    }
    return got;
}

// ---------------------------------------------------------------------------
// one child

/* A stop: the user's (Ctrl-C, SIGTERM: passed on) or the deadline's
 * (SIGTERM), to the child's whole process group, then SIGKILL once the
 * grace is up. */
typedef struct {
    int sig;        /* the signal sent, 0 none */
    bool hung;      /* sent because the deadline passed */
    bool killed;    /* SIGKILL sent */
    double kill_at; /* when SIGKILL follows */
} stop_t;

static void stop_check(pid_t pid, double deadline_at, stop_t *s)
{
    double now = now_s();
    int sig = interrupt_pending();
    if (!s->sig && (sig || (deadline_at > 0 && now > deadline_at))) {
        s->sig = sig ? sig : SIGTERM;
        s->hung = !sig;
        kill(-pid, s->sig);
        s->kill_at = now + AB_KILL_GRACE_S;
    }
    if (s->sig && !s->killed && now > s->kill_at) {
        kill(-pid, SIGKILL);
        s->killed = true;
    }
}

/* Start the child in a process group of its own, its stdout and stderr on
 * pipes (*st's); *pid. */
static int spawn(const ab_child_t *c, streams_t *st, pid_t *pid, char *err)
{
    int out[2], errp[2];
    if (pipe2(out, O_CLOEXEC) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "--against: pipe: %s", strerror(errno));
    if (pipe2(errp, O_CLOEXEC) != 0) {
        close(out[0]);
        close(out[1]);
        return err_set(err, DDP_ERR_RUNTIME, "--against: pipe: %s", strerror(errno));
    }
    fflush(NULL);
    /* why: what the child moves out of its group (setsid, a daemon's double
     * fork) is handed to this process, not to init, once its parent ends,
     * so await can end it too */
    prctl(PR_SET_CHILD_SUBREAPER, 1);
    pid_t parent = getpid();
    *pid = fork();
    if (*pid < 0) {
        close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
        return err_set(err, DDP_ERR_RUNTIME, "--against: fork: %s", strerror(errno));
    }
    if (*pid == 0) {
        setpgid(0, 0);
        /* why: if this process dies unannounced (SIGKILL), the child must
         * not train on unwatched (DDP's ranks follow it the same way) */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* it died before prctl */
            _exit(127);
        dup2(out[1], 1);
        dup2(errp[1], 2);
        execv(c->args[0], c->args);
        dprintf(2, "cannot run %s: %s\n", c->args[0], strerror(errno));
        _exit(127);
    }
    setpgid(*pid, *pid); /* both sides set it: whichever runs first, no window */
    close(out[1]);
    close(errp[1]);
    *st = (streams_t){.pf = {{out[0], POLLIN, 0}, {errp[0], POLLIN, 0}}};
    return DDP_OK;
}

/* Kill and reap every child this process still has: after a child's end,
 * what it left outside its group (spawn makes us their subreaper). */
static void kill_strays(void)
{
    char path[64]; /* the forking thread's children: this one's */
    snprintf(path, sizeof path, "/proc/self/task/%d/children", (int)getpid());
    for (int tries = 0; tries < 50; tries++) {
        FILE *f = fopen(path, "r");
        bool any = false;
        for (long p; f && fscanf(f, "%ld", &p) == 1; any = true)
            kill((pid_t)p, SIGKILL);
        if (f)
            fclose(f);
        while (waitpid(-1, NULL, WNOHANG) > 0)
            ;
        if (!any)
            return;
        poll(NULL, 0, 20);
    }
}

/* Until the child itself ends: its output read as it comes, its end, the
 * deadline and a stop looked at every AB_POLL_MS.  Its end, not the pipes'
 * end, ends the wait: a process it left behind may hold them.  Then nothing
 * of it outlives the round. */
static void await(pid_t pid, double deadline_at, streams_t *st, stop_t *stop, int *status)
{
    for (;;) {
        pid_t w = waitpid(pid, status, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        stop_check(pid, deadline_at, stop);
        streams_read(st, AB_POLL_MS);
    }
    /* what it wrote before it ended is in the pipes: drain it without
     * waiting for an end of file a leftover would hold back */
    while (streams_read(st, 0))
        ;
    /* why: nothing of this child outlives its round (a background process
     * it started, a rank it orphaned); ESRCH when its group is gone */
    kill(-pid, SIGKILL);
    /* and gone before the next round starts: a killed process dies when it
     * next runs (up to 1 s on a busy machine; ESRCH at once when the group
     * was empty, as after a ddpbench) */
    for (int i = 0; i < 50 && kill(-pid, 0) == 0; i++)
        poll(NULL, 0, 20);
    kill_strays();
    for (int i = 0; i < 2; i++)
        if (st->pf[i].fd >= 0)
            close(st->pf[i].fd);
}

/* Its JSON: the last line it printed is the object (a ddpbench prints one
 * per run); line is its last error line. */
static int read_json(const ab_child_t *c, streams_t *st, ab_side_t *s, const char *who,
                     const char *when, const char *line, char *err)
{
    char *json = st->out.buf ? st->out.buf : "";
    size_t end = st->out.len;
    while (end > 0 && (json[end - 1] == '\n' || json[end - 1] == ' '))
        json[--end] = 0;
    char *startp = strrchr(json, '\n');
    s->json = cJSON_Parse(startp ? startp + 1 : json);
    if (!s->json)
        return err_set(err, DDP_ERR_RUNTIME, "--against: the %s (%s) printed no JSON object in "
                       "%s%s%s", who, c->args[0], when, line[0] ? "; its last error line: " : "",
                       line);
    return side_read(s, who, when, err);
}

int ab_child_run(const ab_child_t *c, ab_side_t *s, char *err)
{
    const char *who = c->which == AB_CAND ? "candidate" : "base", *exe = c->args[0];
    char when[32] = "the warm-up run"; /* round -1 */
    if (c->round >= 0)
        snprintf(when, sizeof when, "round %d", c->round + 1);
    streams_t st;
    pid_t pid = 0;
    double t0 = now_s();
    TRY(spawn(c, &st, &pid, err));
    stop_t stop = {0};
    int status = 0;
    await(pid, c->deadline_s > 0 ? t0 + c->deadline_s : 0.0, &st, &stop, &status);
    s->wall_s = now_s() - t0;
    char line[256] = "";
    last_line(st.err.buf ? st.err.buf : "", st.err.len, line, sizeof line);
    int rc = DDP_OK;
    if (stop.sig && !stop.hung) {
        rc = err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s in %s (the %s's run, "
                     "stopped and reaped)", sigabbrev_np(stop.sig), when, who);
    } else if (stop.hung) {
        rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s (%s) hung in %s: still running "
                     "after %.1f s (its deadline: %s), stopped and reaped%s%s", who, exe, when,
                     c->deadline_s, c->deadline_why, line[0] ? "; its last error line: " : "",
                     line);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        char how[64];
        if (WIFSIGNALED(status))
            snprintf(how, sizeof how, "killed by SIG%s", sigabbrev_np(WTERMSIG(status)));
        else
            snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(status));
        rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s (%s) failed in %s: %s%s%s", who,
                     exe, when, how, line[0] ? ": " : "", line);
    } else if (st.overflow) {
        rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s's output in %s is larger "
                     "than %u MiB", who, when, AB_OUT_MAX >> 20);
    } else {
        rc = read_json(c, &st, s, who, when, line, err);
    }
    free(st.out.buf);
    free(st.err.buf);
    return rc;
}
