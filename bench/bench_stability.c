/* bench/bench_stability.c: how steady is the instrument?  Each case of a fixed matrix runs N
 * times, each run its own ddpbench process, cases interleaved round by round; per case the
 * median throughput, its max/min spread (and the undisturbed runs' alone), the runs' p50
 * steps, the work's spread; beside them the floor of a two-process shared-memory exchange,
 * and PASS or FAIL per goal (docs/benchmarks.md). */
#include <cJSON.h>
#include <errno.h>
#include <linux/futex.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/base/atomic_file.h"
#include "common/base/clock.h"
#include "common/base/status.h"
#include "gate/paired.h"

#define MAX_RUNS 50
#define SEED_ARGS                                                                          \
    "--layers 10,10 --loss mse --optim sgd --batch 20 --steps 30000 --warmup-steps 3000"
#define SMALL_ARGS "--model mlp-small --steps 200"

typedef struct {
    const char *name;
    const char *args;   /* after ddpbench --backend cpu --quiet --json */
    double spread_goal; /* max/min throughput; 0: no goal */
    double p50_goal_s;  /* the worst run's p50 step; 0: no goal */
    /* measured */
    int n;
    double tput[MAX_RUNS], p50[MAX_RUNS], p95[MAX_RUNS];
    double work[MAX_RUNS];     /* work_cpu_s.p10: the A/B gate's figure on the CPU */
    bool dist[MAX_RUNS];       /* the run's machine.disturbed */
    double cont[MAX_RUNS];     /* its machine.contention (NAN: unknown) */
    char fail[256];
} bcase_t;

/* name, ddpbench options, spread goal (max/min throughput), p50 goal (s) */
#define CASE(n, a, spread, p50) {.name = n, .args = a, .spread_goal = spread, .p50_goal_s = p50}
static bcase_t cases[] = {
    CASE("single mlp-small", "--mode single " SMALL_ARGS, 1.15, 0),
    CASE("dp mlp-small", "--mode dp --gpus 0,1 " SMALL_ARGS, 1.15, 0),
    CASE("ddp mlp-small", "--mode ddp --gpus 0,1 " SMALL_ARGS, 1.15, 0),
    CASE("single seed", "--mode single " SEED_ARGS, 0, 0),
    CASE("dp seed", "--mode dp --gpus 0,1 " SEED_ARGS, 0, 20e-6),
    CASE("ddp seed", "--mode ddp --gpus 0,1 " SEED_ARGS, 0, 10e-6),
    CASE("ddp seed no-overlap", "--mode ddp --gpus 0,1 --no-overlap " SEED_ARGS, 0, 0),
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void loadavg(char *out, size_t n)
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = 0;
    if (f) {
        if (!fgets(out, (int)n, f))
            out[0] = 0;
        fclose(f);
    }
    size_t l = strlen(out);
    while (l > 0 && (out[l - 1] == '\n' || out[l - 1] == ' '))
        out[--l] = 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double vmin(const double *v, int n)
{
    double m = INFINITY;
    for (int i = 0; i < n; i++)
        m = fmin(m, v[i]);
    return m;
}

static double vmax(const double *v, int n)
{
    double m = -INFINITY;
    for (int i = 0; i < n; i++)
        m = fmax(m, v[i]);
    return m;
}

// ---------------------------------------------------------------------------
// one run of ddpbench, as its own process

/* o[a][b] (o[a] when b is NULL) as a number; NAN when absent */
static double num_at(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = o ? cJSON_GetObjectItemCaseSensitive(o, a) : NULL;
    if (v && b)
        v = cJSON_GetObjectItemCaseSensitive(v, b);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static int run_case(const char *bin, bcase_t *c)
{
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "%s --backend cpu --quiet --json %s 2>&1", bin, c->args);
    FILE *p = popen(cmd, "r");
    if (!p) {
        snprintf(c->fail, sizeof c->fail, "popen: %s", strerror(errno));
        return -1;
    }
    static char buf[1 << 20];
    size_t len = fread(buf, 1, sizeof buf - 1, p);
    buf[len] = 0;
    int st = pclose(p);
    /* the JSON object is the last line that starts with '{' */
    char *line = NULL;
    for (char *s = buf; s && *s; s = strchr(s, '\n') ? strchr(s, '\n') + 1 : NULL)
        if (*s == '{')
            line = s;
    cJSON *o = line && st == 0 ? cJSON_Parse(line) : NULL;
    double tp = num_at(o, "throughput_samples_per_s", NULL);
    double p50 = num_at(o, "step_time_s", "p50"), p95 = num_at(o, "step_time_s", "p95");
    if (isnan(tp) || isnan(p50) || isnan(p95)) {
        char *nl = strrchr(buf, '\n');
        if (nl && nl[1] == 0)
            *nl = 0;
        nl = strrchr(buf, '\n');
        snprintf(c->fail, sizeof c->fail, "'%s' failed (status %d): %.160s", c->args, st,
                 nl ? nl + 1 : buf);
        cJSON_Delete(o);
        return -1;
    }
    c->tput[c->n] = tp;
    c->p50[c->n] = p50;
    c->p95[c->n] = p95;
    c->work[c->n] = num_at(o, "work_cpu_s", "p10");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "machine");
    c->dist[c->n] = cJSON_IsTrue(m ? cJSON_GetObjectItemCaseSensitive(m, "disturbed") : NULL);
    c->cont[c->n] = num_at(o, "machine", "contention");
    c->n++;
    cJSON_Delete(o);
    return 0;
}

// ---------------------------------------------------------------------------
// the floor: one exchange between two processes through shared memory

typedef struct {
    _Alignas(64) _Atomic uint32_t word[2]; /* each side's count of exchanges */
    _Alignas(64) _Atomic uint32_t go;
} xchg_t;

static void futex_wait(_Atomic uint32_t *a, uint32_t v)
{
    syscall(SYS_futex, (uint32_t *)a, FUTEX_WAIT, v, NULL, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *a)
{
    syscall(SYS_futex, (uint32_t *)a, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Side `me` does iters exchanges: publish its count, wait for the other's.
 * sleep: wait on a futex (one sleep and wake-up each) instead of spinning. */
static void exchange_loop(xchg_t *x, int me, long iters, int sleep, double *lat, long nlat)
{
    for (long i = 1; i <= iters; i++) {
        double t0 = lat ? now_s() : 0.0;
        atomic_store_explicit(&x->word[me], (uint32_t)i, memory_order_release);
        if (sleep)
            futex_wake(&x->word[me]);
        for (;;) {
            uint32_t v = atomic_load_explicit(&x->word[!me], memory_order_acquire);
            if (v >= (uint32_t)i)
                break;
            if (sleep)
                futex_wait(&x->word[!me], v);
        }
        if (lat && i <= nlat)
            lat[i - 1] = now_s() - t0;
    }
}

/* p50 seconds of one exchange (spin, or futex when sleep), from side 0. */
static double exchange_floor(int sleep, long iters)
{
    xchg_t *x = mmap(NULL, sizeof *x, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (x == MAP_FAILED)
        return NAN;
    memset(x, 0, sizeof *x);
    pid_t pid = fork();
    if (pid == 0) {
        exchange_loop(x, 1, iters, sleep, NULL, 0);
        _exit(0);
    }
    double *lat = malloc((size_t)iters * sizeof *lat);
    double p50 = NAN;
    if (pid > 0 && lat) {
        exchange_loop(x, 0, iters, sleep, lat, iters);
        /* the first tenth warms up (the child starting, caches) */
        long skip = iters / 10;
        qsort(lat + skip, (size_t)(iters - skip), sizeof *lat, cmp_double);
        p50 = lat[skip + (iters - skip) / 2];
    }
    if (pid > 0)
        waitpid(pid, NULL, 0);
    free(lat);
    munmap(x, sizeof *x);
    return p50;
}

/* The undisturbed runs' throughputs into q; how many. */
static int undisturbed(const bcase_t *c, double *q)
{
    int nq = 0;
    for (int i = 0; i < c->n; i++)
        if (!c->dist[i])
            q[nq++] = c->tput[i];
    return nq;
}

static void json_case(cJSON *arr, const bcase_t *c)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "name", c->name);
    cJSON_AddStringToObject(o, "args", c->args);
    cJSON_AddNumberToObject(o, "runs", c->n);
    cJSON_AddItemToObject(o, "throughput_samples_per_s", cJSON_CreateDoubleArray(c->tput, c->n));
    cJSON_AddItemToObject(o, "p50_step_s", cJSON_CreateDoubleArray(c->p50, c->n));
    cJSON_AddItemToObject(o, "p95_step_s", cJSON_CreateDoubleArray(c->p95, c->n));
    if (c->n > 0) {
        cJSON_AddNumberToObject(o, "throughput_median", paired_median(c->tput, c->n));
        cJSON_AddNumberToObject(o, "spread_max_over_min",
                                vmax(c->tput, c->n) / vmin(c->tput, c->n));
        if (isfinite(vmax(c->work, c->n)))
            cJSON_AddNumberToObject(o, "work_p10_spread_max_over_min",
                                    vmax(c->work, c->n) / vmin(c->work, c->n));
        cJSON_AddItemToObject(o, "work_p10_s", cJSON_CreateDoubleArray(c->work, c->n));
        cJSON_AddNumberToObject(o, "p50_median_s", paired_median(c->p50, c->n));
        cJSON_AddNumberToObject(o, "p50_max_s", vmax(c->p50, c->n));
    }
    cJSON *d = cJSON_AddArrayToObject(o, "disturbed");
    cJSON *ca = cJSON_AddArrayToObject(o, "contention");
    double q[MAX_RUNS];
    int nq = undisturbed(c, q);
    for (int i = 0; i < c->n; i++) {
        cJSON_AddItemToArray(d, cJSON_CreateBool(c->dist[i]));
        cJSON_AddItemToArray(ca, isfinite(c->cont[i]) ? cJSON_CreateNumber(c->cont[i])
                                                      : cJSON_CreateNull());
    }
    if (nq >= 2)
        cJSON_AddNumberToObject(o, "spread_undisturbed", vmax(q, nq) / vmin(q, nq));
    else
        cJSON_AddNullToObject(o, "spread_undisturbed");
    if (c->spread_goal > 0)
        cJSON_AddNumberToObject(o, "spread_goal", c->spread_goal);
    if (c->p50_goal_s > 0)
        cJSON_AddNumberToObject(o, "p50_goal_s", c->p50_goal_s);
    if (c->fail[0])
        cJSON_AddStringToObject(o, "error", c->fail);
    cJSON_AddItemToArray(arr, o);
}

/* mkdir -p of the folder that will hold path */
static void mkdirs_for(const char *path)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *p = dir + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(dir, 0777);
            *p = '/';
        }
}

static int write_json(const char *path, cJSON *root)
{
    char *txt = cJSON_Print(root), err[ERR_LEN];
    afile_t a;
    int rc = txt ? afile_open(&a, path, err) : -1;
    if (rc == DDP_OK) {
        afile_write(&a, txt, strlen(txt));
        afile_write(&a, "\n", 1);
        rc = afile_commit(&a, false, err);
    }
    cJSON_free(txt);
    return rc;
}

int main(int argc, char **argv)
{
    int runs = 5, strict = 0, opt;
    const char *bin = "./ddpbench", *out = "build/bench/stability.json", *only = NULL;
    while ((opt = getopt(argc, argv, "n:b:o:sc:h")) != -1) {
        switch (opt) {
        case 'n':
            runs = atoi(optarg);
            break;
        case 'b':
            bin = optarg;
            break;
        case 'o':
            out = optarg;
            break;
        case 's':
            strict = 1;
            break;
        case 'c':
            only = optarg;
            break;
        default:
            fprintf(stderr, "usage: bench_stability [-n runs (5)] [-b ddpbench (./ddpbench)] "
                            "[-o results.json (build/bench/stability.json)] [-s] [-c case]\n");
            return opt == 'h' ? 0 : 2;
        }
    }
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "bench_stability: -n must be 1..%d\n", MAX_RUNS);
        return 2;
    }
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "bench_stability: no ddpbench binary at %s (run make, or pass -b)\n", bin);
        return 2;
    }
    char load0[128], load1[128];
    loadavg(load0, sizeof load0);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    printf("# bench_stability: %d runs per case, each its own process, cases interleaved; "
           "%ld CPUs; load average before: %s\n",
           runs, cpus, load0);
    fflush(stdout);

    double t0 = now_s();
    /* the floor first, while nothing of ours runs */
    double floor_spin = exchange_floor(0, 200000);
    double floor_futex = exchange_floor(1, 20000);
    int errors = 0;
    for (int k = 0; k < runs; k++)
        for (int i = 0; i < NCASES; i++) {
            if (only && !strstr(cases[i].name, only))
                continue;
            if (cases[i].fail[0])
                continue;
            if (run_case(bin, &cases[i]) != 0) {
                fprintf(stderr, "bench_stability: %s: %s\n", cases[i].name, cases[i].fail);
                errors++;
            }
        }
    loadavg(load1, sizeof load1);

    printf("%-22s %12s %8s %11s %21s %11s %10s %9s  %s\n", "case", "samples/s", "max/min", "p50 step",
           "p50 range", "p95 (med)", "disturbed", "work m/m", "goal");
    int failed = 0;
    for (int i = 0; i < NCASES; i++) {
        bcase_t *c = &cases[i];
        if (only && !strstr(c->name, only))
            continue;
        if (c->n == 0) {
            printf("%-22s  no result: %s\n", c->name, c->fail);
            failed++;
            continue;
        }
        double spread = vmax(c->tput, c->n) / vmin(c->tput, c->n);
        double p50 = paired_median(c->p50, c->n);
        char range[48], goal[96] = "-";
        snprintf(range, sizeof range, "%.1f..%.1f us", 1e6 * vmin(c->p50, c->n),
                 1e6 * vmax(c->p50, c->n));
        double q[MAX_RUNS];
        int nq = undisturbed(c, q), nd = c->n - nq;
        char dcol[32];
        snprintf(dcol, sizeof dcol, "%d/%d", nd, c->n);
        if (c->spread_goal > 0) {
            bool ok = spread <= c->spread_goal;
            failed += !ok;
            char quiet[64] = "";
            if (!ok && nd > 0 && nq >= 2)
                snprintf(quiet, sizeof quiet, " (undisturbed runs: %.2f)", vmax(q, nq) / vmin(q, nq));
            else if (!ok && nd > 0)
                snprintf(quiet, sizeof quiet, " (the machine's: too few quiet runs)");
            snprintf(goal, sizeof goal, "spread <= %.2f: %s%s", c->spread_goal, ok ? "PASS" : "FAIL",
                     quiet);
        }
        if (c->p50_goal_s > 0) {
            /* every run must meet it: a steady instrument is steady each time */
            bool ok = vmax(c->p50, c->n) <= c->p50_goal_s;
            failed += !ok;
            snprintf(goal, sizeof goal, "p50 <= %.0f us each run: %s", 1e6 * c->p50_goal_s,
                     ok ? "PASS" : "FAIL");
        }
        /* the work's spread: what the A/B gate judges on the CPU moves this much */
        printf("%-22s %12.0f %8.2f %8.1f us %21s %8.1f us %10s %9.2f  %s\n", c->name,
               paired_median(c->tput, c->n), spread, 1e6 * p50, range,
               1e6 * paired_median(c->p95, c->n), dcol, vmax(c->work, c->n) / vmin(c->work, c->n),
               goal);
    }
    printf("exchange floor (2 processes, shared memory): spin %.2f us, futex sleep/wake %.2f us "
           "(p50 of one exchange)\n",
           1e6 * floor_spin, 1e6 * floor_futex);
    printf("load average after: %s; %.0f s in all\n", load1, now_s() - t0);

    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "tool", "bench_stability");
    cJSON_AddNumberToObject(root, "runs_per_case", runs);
    cJSON_AddNumberToObject(root, "cpus_online", (double)cpus);
    cJSON_AddStringToObject(root, "loadavg_before", load0);
    cJSON_AddStringToObject(root, "loadavg_after", load1);
    cJSON_AddNumberToObject(root, "exchange_floor_spin_s", floor_spin);
    cJSON_AddNumberToObject(root, "exchange_floor_futex_s", floor_futex);
    cJSON_AddNumberToObject(root, "goals_failed", failed);
    cJSON *arr = cJSON_AddArrayToObject(root, "cases");
    for (int i = 0; i < NCASES; i++)
        if (!only || strstr(cases[i].name, only))
            json_case(arr, &cases[i]);
    mkdirs_for(out);
    if (write_json(out, root) != 0)
        fprintf(stderr, "bench_stability: could not write %s\n", out);
    else
        printf("results: %s\n", out);
    cJSON_Delete(root);
    printf("goals: %s (%d not met)\n", failed ? "FAIL" : "PASS", failed);
    if (errors)
        return 1;
    return strict && failed ? 1 : 0;
}
