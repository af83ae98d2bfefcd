/* app/ab.c: the A/B gate's rounds (ab.h): each side a child process with
 * --json, ABBA order, a failed child named (which side, its exit status,
 * its last stderr line), Ctrl-C passed on to the child and the child reaped,
 * a disturbed round retaken (a bounded number of times). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app/ab.h"
#include "common/base/clock.h"
#include "common/base/interrupt.h"
#include "common/base/status.h"

#define AB_OUT_MAX (64u << 20) /* a child's stdout: one JSON object, far below this */
#define AB_KILL_GRACE_S 5.0    /* SIGTERM (or the user's signal), then SIGKILL */
#define AB_EXTEND 3            /* rounds at most, as a multiple of --repeat (see the loop) */

static const char *const side_name[2] = {"base", "candidate"};

/* "round 3", or "the warm-up run" (round -1) */
static const char *round_name(int round)
{
    static char buf[32];
    if (round < 0)
        return "the warm-up run";
    snprintf(buf, sizeof buf, "round %d", round + 1);
    return buf;
}

// ---------------------------------------------------------------------------
// reading a child's --json

static double num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *x = cJSON_GetObjectItemCaseSensitive(o, a);
    if (b)
        x = cJSON_GetObjectItemCaseSensitive(x, b);
    return cJSON_IsNumber(x) ? x->valuedouble : NAN;
}

/* The figures the gate uses; DDP_ERR_RUNTIME when the object lacks them. */
static int side_read(ab_side_t *s, const char *who, int round, char *err)
{
    s->step_p50 = num_at(s->json, "step_time_s", "p50");
    s->work_p10 = num_at(s->json, "work_cpu_s", "p10");
    if (!(s->step_p50 > 0.0))
        return err_set(err, DDP_ERR_RUNTIME, "--against: the %s's JSON in %s has no "
                       "step_time_s.p50 (is it a ddpbench?)", who, round_name(round));
    const cJSON *devs = cJSON_GetObjectItemCaseSensitive(s->json, "devices");
    s->ndev = 0;
    const cJSON *d;
    cJSON_ArrayForEach(d, devs)
    {
        if (s->ndev >= MAX_DEVICES)
            break;
        s->work_dev[s->ndev] = num_at(d, "work_cpu_s", "p10");
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
    /* the run's own record of what else the machine did (when the child
     * keeps one): a disturbed run is retaken or its pair flagged */
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(s->json, "machine");
    s->disturbed = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(m, "disturbed"));
    const cJSON *why = cJSON_GetObjectItemCaseSensitive(m, "why");
    snprintf(s->why, sizeof s->why, "%s", cJSON_IsString(why) ? why->valuestring : "");
    return DDP_OK;
}

// ---------------------------------------------------------------------------
// one child

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

/* Run exe with args, its stdout and stderr read until it ends; the side
 * filled from its JSON.  The child leads its own process group, so its DDP
 * ranks are stopped with it; the terminal's Ctrl-C reaches only this
 * process, which passes the signal on. */
/* A stop the user asked for, passed to the child's whole process group (a
 * DDP child's ranks must stop with it), then SIGKILL once the grace is up:
 * while its output is read and while it is reaped alike. */
static void pass_stop(pid_t pid, int *sig_sent, double *kill_at, bool *killed)
{
    int sig = interrupt_pending();
    if (sig && !*sig_sent) {
        kill(-pid, sig);
        *sig_sent = sig;
        *kill_at = now_s() + AB_KILL_GRACE_S;
    }
    if (*sig_sent && !*killed && now_s() > *kill_at) {
        kill(-pid, SIGKILL);
        *killed = true;
    }
}

static int run_child(const char *exe, char **args, int which, int round, ab_side_t *s,
                     char *err)
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
    double t0 = now_s();
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        close(out[0]), close(out[1]), close(errp[0]), close(errp[1]);
        return err_set(err, DDP_ERR_RUNTIME, "--against: fork: %s", strerror(errno));
    }
    if (pid == 0) {
        setpgid(0, 0);
        /* why: if this process dies unannounced (SIGKILL), the child must
         * not train on unwatched (DDP's ranks follow it the same way) */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent) /* it died before prctl */
            _exit(127);
        dup2(out[1], 1);
        dup2(errp[1], 2);
        execv(exe, args);
        dprintf(2, "cannot run %s: %s\n", exe, strerror(errno));
        _exit(127);
    }
    setpgid(pid, pid); /* both sides set it: whichever runs first, no window */
    close(out[1]);
    close(errp[1]);
    growbuf_t so = {0}, se = {0};
    struct pollfd pf[2] = {{out[0], POLLIN, 0}, {errp[0], POLLIN, 0}};
    int open_fds = 2, sig_sent = 0;
    bool overflow = false, killed = false;
    double kill_at = 0.0;
    static char chunk[65536]; /* not on the stack (docs/faults.md); one child at a time */
    while (open_fds > 0) {
        pass_stop(pid, &sig_sent, &kill_at, &killed);
        int pr = poll(pf, 2, 200);
        if (pr < 0 && errno != EINTR)
            break;
        for (int i = 0; i < 2 && pr > 0; i++) {
            if (pf[i].fd < 0 || !(pf[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            ssize_t k = read(pf[i].fd, chunk, sizeof chunk);
            if (k > 0) {
                growbuf_t *g = i == 0 ? &so : &se;
                if (i == 1 && se.len > 8192) { /* keep stderr's tail only */
                    memmove(se.buf, se.buf + se.len - 4096, 4096);
                    se.len = 4096;
                }
                if (!grow_add(g, chunk, (size_t)k))
                    overflow = true;
            } else if (k == 0 || (errno != EINTR && errno != EAGAIN)) {
                close(pf[i].fd);
                pf[i].fd = -1;
                open_fds--;
            }
        }
    }
    for (int i = 0; i < 2; i++)
        if (pf[i].fd >= 0)
            close(pf[i].fd);
    int st = 0;
    for (;;) { /* reap it, however long its ranks take to stop */
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR))
            break;
        pass_stop(pid, &sig_sent, &kill_at, &killed);
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    s->wall_s = now_s() - t0;
    char line[256] = "";
    last_line(se.buf ? se.buf : "", se.len, line, sizeof line);
    int rc = DDP_OK;
    if (sig_sent) {
        rc = err_set(err, DDP_ERR_INTERRUPTED, "interrupted by SIG%s in %s (the %s's run, "
                     "stopped and reaped)", sigabbrev_np(sig_sent), round_name(round),
                     side_name[which]);
    } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        char how[64];
        if (WIFSIGNALED(st))
            snprintf(how, sizeof how, "killed by SIG%s", sigabbrev_np(WTERMSIG(st)));
        else
            snprintf(how, sizeof how, "exit status %d", WEXITSTATUS(st));
        rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s (%s) failed in %s: %s%s%s",
                     side_name[which], exe, round_name(round), how, line[0] ? ": " : "", line);
    } else if (overflow) {
        rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s's output in %s is larger "
                     "than %u MiB", side_name[which], round_name(round), AB_OUT_MAX >> 20);
    } else {
        char *json = so.buf ? so.buf : "";
        /* the last line is the object (a ddpbench prints one per run) */
        size_t end = so.len;
        while (end > 0 && (json[end - 1] == '\n' || json[end - 1] == ' '))
            json[--end] = 0;
        char *startp = strrchr(json, '\n');
        s->json = cJSON_Parse(startp ? startp + 1 : json);
        if (!s->json)
            rc = err_set(err, DDP_ERR_RUNTIME, "--against: the %s (%s) printed no JSON object in "
                         "%s%s%s", side_name[which], exe, round_name(round),
                         line[0] ? "; its last error line: " : "", line);
        else
            rc = side_read(s, side_name[which], round, err);
    }
    free(so.buf);
    free(se.buf);
    return rc;
}

// ---------------------------------------------------------------------------
// the rounds

static void round_ratio(ab_round_t *x, bool by_work)
{
    x->by_work = by_work;
    x->ratio = round_figure(x, AB_CAND) / round_figure(x, AB_BASE);
    x->ratio_wall = x->side[AB_CAND].step_p50 / x->side[AB_BASE].step_p50;
}

static void rounds_free(ab_round_t *r, int nr)
{
    for (int i = 0; i < nr; i++)
        for (int k = 0; k < 2; k++)
            cJSON_Delete(r[i].side[k].json);
    free(r);
}

int ab_main(const config_t *cfg, int argc, char **argv, char *err)
{
    char self[CONFIG_PATH_LEN] = "";
    const char *exe[2] = {cfg->against, cfg->candidate};
    if (!cfg->candidate[0]) {
        ssize_t k = readlink("/proc/self/exe", self, sizeof self - 1);
        if (k <= 0)
            return err_set(err, DDP_ERR_RUNTIME, "--against: cannot find this executable: %s",
                           strerror(errno));
        self[k] = 0;
        exe[AB_CAND] = self;
    }
    /* the children run the user's options less the gate's own, with --json */
    static const char *const drop[] = {"against", "candidate", "repeat", "json", "csv",
                                       "tolerance", "quiet", NULL};
    char **args = calloc((size_t)argc + 3, sizeof *args);
    if (!args)
        return err_set(err, DDP_ERR_RUNTIME, "--against: out of memory");
    int na = config_argv_without(argc, argv, drop, args);
    args[na++] = "--json";
    args[na] = NULL;

    int n = cfg->repeat, most = AB_EXTEND * n;
    int retakes = most / 5 + 1; /* bounded: a machine busy throughout cannot be waited out */
    int cap = most + retakes + 1; /* and the warm-up */
    ab_round_t *r = calloc((size_t)cap, sizeof *r);
    if (!r) {
        free(args);
        return err_set(err, DDP_ERR_RUNTIME, "--against: out of memory");
    }
    FILE *info = (cfg->json || cfg->csv) ? stderr : stdout;
    if (!cfg->quiet)
        fprintf(info, "A/B: %d rounds of base %s and candidate %s, ABBA order, %s\n", n, exe[AB_BASE],
                exe[AB_CAND], mode_name(cfg->mode));
    int rc = DDP_OK, nr = 0;
    /* warm-up: one run of each side first, not counted: the first run of an
     * executable pays for its cold page cache and libraries (the first
     * rounds measured without this were the furthest from 1) */
    r[nr].round = -1;
    r[nr].base_first = true;
    for (int which = 0; which < 2 && rc == DDP_OK; which++) {
        args[0] = (char *)exe[which];
        rc = run_child(exe[which], args, which, -1, &r[nr].side[which], err);
    }
    /* The figure judged: on the CPU, each side's work (work_cpu_s.p10: the
     * CPU seconds of the quickest tenth of its steps' work, which another
     * process on the machine hardly moves; docs/gate.md measures it against
     * the median step); elsewhere (a GPU, an older build without it) the
     * median step. */
    bool by_work = rc == DDP_OK && r[nr].side[AB_BASE].work_p10 > 0.0 &&
                   r[nr].side[AB_CAND].work_p10 > 0.0;
    if (rc == DDP_OK)
        round_ratio(&r[nr], by_work);
    nr++;
    ab_judgement_t j;
    for (int round = 0; rc == DDP_OK;) {
        if (round == n) {
            /* N rounds in: when they straddle the tolerance and the noise
             * they measured says a few more would settle it (no more than
             * AB_EXTEND x N in all), run those rather than give up: a gate
             * wants an answer.  Only once, so two looks at the data at most
             * (each at its interval's 95%+). */
            ab_judge(cfg, r, nr, &j);
            int want = j.rounds_to_settle;
            if (n != cfg->repeat || j.verdict != PAIRED_NO_VERDICT || j.explained || want <= n ||
                want > most)
                break;
            if (!cfg->quiet && j.est.n < PAIRED_MIN_ROUNDS)
                fprintf(info, "  %d rounds give no interval: %d more\n", n, want - n);
            else if (!cfg->quiet)
                fprintf(info, "  %d rounds straddle the %g%% tolerance; at their noise %d would "
                        "settle it: %d more\n", n, cfg->tolerance_pct, want, want - n);
            n = want;
        }
        if (round >= n)
            break;
        ab_round_t *x = &r[nr++];
        x->round = round;
        x->base_first = paired_base_first(round);
        x->used = true;
        for (int k = 0; k < 2 && rc == DDP_OK; k++) {
            int which = (k == 0) == x->base_first ? AB_BASE : AB_CAND;
            args[0] = (char *)exe[which];
            rc = run_child(exe[which], args, which, round, &x->side[which], err);
        }
        if (rc != DDP_OK)
            break;
        if (by_work && !(x->side[AB_BASE].work_p10 > 0.0 && x->side[AB_CAND].work_p10 > 0.0)) {
            rc = err_set(err, DDP_ERR_RUNTIME, "--against: round %d's %s has no work_cpu_s.p10 "
                         "though the warm-up run had it", round + 1,
                         x->side[AB_BASE].work_p10 > 0.0 ? "candidate" : "base");
            break;
        }
        round_ratio(x, by_work);
        bool disturbed = ab_lopsided(x); /* retake only what pairing cannot cancel */
        if (!cfg->quiet)
            fprintf(info, "  round %2d (%s): base %.3f ms, candidate %.3f ms, ratio %.3f%s\n",
                    round + 1, x->base_first ? "BC" : "CB", 1e3 * round_figure(x, AB_BASE),
                    1e3 * round_figure(x, AB_CAND), x->ratio,
                    disturbed ? (nr < cap && retakes > 0 ? ", one side disturbed: retaken"
                                                          : ", one side disturbed")
                              : "");
        if (disturbed && retakes > 0 && nr < cap) {
            x->used = false;
            retakes--;
            continue;
        }
        round++;
    }
    free(args);
    if (rc != DDP_OK) {
        rounds_free(r, nr);
        return rc;
    }
    ab_judge(cfg, r, nr, &j);
    if (cfg->json) {
        if (ab_print_json(stdout, cfg, exe[AB_BASE], exe[AB_CAND], r, nr, &j) != DDP_OK)
            rc = err_set(err, DDP_ERR_RUNTIME, "stdout: write failed");
    } else if (cfg->csv) {
        ab_print_csv(stdout, cfg, r, nr, &j);
    }
    if (!cfg->quiet || !(cfg->json || cfg->csv))
        ab_print_text(info, cfg, exe[AB_BASE], exe[AB_CAND], r, nr, &j);
    rounds_free(r, nr);
    if (rc != DDP_OK)
        return rc;
    if (fflush(stdout) != 0)
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
    return j.verdict == PAIRED_REGRESSED    ? DDP_ERR_REGRESSED
           : j.verdict == PAIRED_NO_VERDICT ? DDP_ERR_NOISY
                                            : DDP_OK;
}
