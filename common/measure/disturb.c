/* common/measure/disturb.c: the disturbance record of a run (disturb.h): /proc/stat
 * and /proc/loadavg at both ends, getrusage for the run's own share, the judgement. */
#include "common/measure/disturb.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/base/affinity.h"
#include "common/base/clock.h"
#include "common/base/procfile.h"

static char proc_dir[256] = "/proc";

void disturb_set_proc_dir(const char *dir)
{
    snprintf(proc_dir, sizeof proc_dir, "%s", dir ? dir : "/proc");
}

static bool cpus_planted;
static cpu_set_t planted_cpus;
static int planted_online;

void disturb_set_cpus(const cpu_set_t *set, int n)
{
    cpus_planted = set != NULL;
    if (set)
        planted_cpus = *set;
    planted_online = n;
}

static int cpus_online(void)
{
    if (cpus_planted)
        return planted_online;
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* The CPUs the run may use: the affinity before any thread was pinned (all inherit it). */
static void allowed_cpus(disturb_mark_t *m)
{
    int online = cpus_online();
    if (cpus_planted) {
        m->cpus = planted_cpus;
        m->ncpus = CPU_COUNT(&m->cpus);
    } else {
        m->ncpus = affinity_allowed(&m->cpus);
    }
    m->all_cpus = m->ncpus <= 0 || m->ncpus >= online;
    if (m->all_cpus)
        m->ncpus = online;
}

static double read_load(void)
{
    char path[320], line[128];
    double v = NAN;
    snprintf(path, sizeof path, "%s/loadavg", proc_dir);
    if (!procfile_value(path, "", line, sizeof line) || sscanf(line, "%lf", &v) != 1)
        return NAN;
    return v;
}

typedef struct {
    const disturb_mark_t *m;
    uint64_t busy, steal;
    int lines; /* the lines summed */
    bool bad;  /* one of them unreadable */
} stat_sum_t;

/* One "cpu" or "cpuN" line of /proc/stat: its busy (user nice system irq softirq;
 * guest is inside user) and steal jiffies added when it is a CPU the run may use. */
static void stat_line(const char *line, void *ctx)
{
    stat_sum_t *s = ctx;
    const char *p = line + 3;
    bool aggregate = *p == ' ';
    if (aggregate != s->m->all_cpus)
        return;
    if (!aggregate) {
        char *end;
        long c = strtol(p, &end, 10);
        if (end == p || c < 0 || c >= CPU_SETSIZE || !CPU_ISSET((int)c, &s->m->cpus))
            return;
        p = end;
    }
    unsigned long long v[8] = {0};
    int n = sscanf(p, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3],
                   &v[4], &v[5], &v[6], &v[7]);
    if (n < 7) {
        s->bad = true;
        return;
    }
    s->busy += v[0] + v[1] + v[2] + v[5] + v[6];
    s->steal += n >= 8 ? v[7] : 0;
    s->lines++;
}

static bool read_stat(const disturb_mark_t *m, uint64_t *busy, uint64_t *steal)
{
    char path[320];
    snprintf(path, sizeof path, "%s/stat", proc_dir);
    stat_sum_t s = {.m = m};
    if (procfile_each(path, "cpu", stat_line, &s) < 0 || s.bad ||
        s.lines != (m->all_cpus ? 1 : m->ncpus))
        return false;
    *busy = s.busy;
    *steal = s.steal;
    return true;
}

static double tv_s(struct timeval t)
{
    return (double)t.tv_sec + (double)t.tv_usec * 1e-6;
}

/* CPU seconds and involuntary switches of this process and its waited-for children. */
static void own_usage(double *cpu_s, long *nivcsw)
{
    struct rusage self, kids;
    memset(&self, 0, sizeof self);
    memset(&kids, 0, sizeof kids);
    getrusage(RUSAGE_SELF, &self);
    getrusage(RUSAGE_CHILDREN, &kids);
    *cpu_s = tv_s(self.ru_utime) + tv_s(self.ru_stime) + tv_s(kids.ru_utime) + tv_s(kids.ru_stime);
    *nivcsw = self.ru_nivcsw + kids.ru_nivcsw;
}

void disturb_begin(disturb_mark_t *m)
{
    memset(m, 0, sizeof *m);
    allowed_cpus(m);
    m->load0 = read_load();
    m->stat_ok = read_stat(m, &m->busy0, &m->steal0);
    own_usage(&m->own0_s, &m->nivcsw0);
    m->t0 = now_s();
}

void disturb_end(const disturb_mark_t *m, int devices, long steps, bool own_switching,
                 disturb_t *out)
{
    double t1 = now_s();
    uint64_t busy1 = 0, steal1 = 0;
    bool ok = read_stat(m, &busy1, &steal1);
    double own1;
    long niv1;
    own_usage(&own1, &niv1);
    memset(out, 0, sizeof *out);
    out->wall_s = t1 - m->t0;
    out->load_start = m->load0;
    out->load_end = read_load();
    out->cpus_online = cpus_online();
    out->cpus_allowed = m->ncpus;
    out->devices = devices;
    out->own_switching = own_switching;
    out->own_cpu_s = own1 - m->own0_s;
    out->invol_switches = niv1 - m->nivcsw0;
    out->steps = steps;
    out->known = ok && m->stat_ok && busy1 >= m->busy0 && steal1 >= m->steal0;
    if (out->known) {
        double hz = (double)sysconf(_SC_CLK_TCK);
        hz = hz > 0 ? hz : 100.0;
        /* the ticks' rounding is no one's: slack before others count */
        double others = (double)(busy1 - m->busy0) / hz - out->own_cpu_s -
                        DISTURB_TICK_SLACK * out->cpus_allowed / hz;
        out->others_cpu_s = others > 0 ? others : 0.0;
        out->steal_s = (double)(steal1 - m->steal0) / hz;
    }
    disturb_judge(out);
}

void disturb_judge(disturb_t *d)
{
    int cpus = d->cpus_allowed > 0 ? d->cpus_allowed : d->cpus_online;
    d->run_cores = d->devices < cpus ? d->devices : cpus;
    if (d->run_cores < 1)
        d->run_cores = 1;
    d->others_cores = d->wall_s > 0 ? d->others_cpu_s / d->wall_s : 0.0;
    double spare = (double)(cpus - d->run_cores);
    double took = d->others_cores - spare;
    d->contention = took > 0 ? took / d->run_cores : 0.0;
    if (d->contention > 1.0)
        d->contention = 1.0;
    d->steal_pct = d->wall_s > 0 && cpus > 0 ? 100.0 * d->steal_s / (d->wall_s * cpus) : 0.0;
    d->invol_per_step = d->steps > 0 ? (double)d->invol_switches / (double)d->steps : 0.0;
    d->invol_per_s = d->wall_s > 0 ? (double)d->invol_switches / d->wall_s : 0.0;
    d->why[0] = 0;
    size_t used = 0;
    d->disturbed = false;
#define WHY(...)                                                                                   \
    do {                                                                                           \
        if (used < sizeof d->why)                                                                  \
            used += (size_t)snprintf(d->why + used, sizeof d->why - used, __VA_ARGS__);            \
        d->disturbed = true;                                                                       \
    } while (0)
    if (d->known && d->contention > DISTURB_CONTENTION_MAX)
        WHY("%sother processes took %.0f%% of the run's %d core%s", used ? "; " : "",
            100.0 * d->contention, d->run_cores, d->run_cores == 1 ? "" : "s");
    if (d->known && d->steal_pct > DISTURB_STEAL_PCT_MAX)
        WHY("%s%.0f%% of the CPU time stolen", used ? "; " : "", d->steal_pct);
    if (!d->own_switching && d->invol_per_s > DISTURB_NIVCSW_PER_S_MAX)
        WHY("%s%.0f involuntary context switches a second", used ? "; " : "", d->invol_per_s);
#undef WHY
}

void disturb_describe(const disturb_t *d, char *buf, unsigned long len)
{
    char load[64] = "";
    char of[24] = "";
    if (d->cpus_allowed > 0 && d->cpus_allowed < d->cpus_online)
        snprintf(of, sizeof of, "%d of ", d->cpus_allowed);
    if (isfinite(d->load_start) && isfinite(d->load_end))
        snprintf(load, sizeof load, "; load %.1f -> %.1f on %s%d CPUs", d->load_start,
                 d->load_end, of, d->cpus_online);
    if (!d->known)
        snprintf(buf, len, "others' CPU time unknown (no /proc/stat); %.0f involuntary switches "
                           "a second%s",
                 d->invol_per_s, load);
    else
        snprintf(buf, len, "%s%s", d->disturbed ? d->why : "quiet", load);
}
