/* bench/bench_limits.c: what the limits cost, measured on the program as a
 * user runs it (./ddpbench, from the repository root, as make bench does).
 *
 *   steps    bytes of a run's step statistics (step_times_t) and of DDP's
 *            shared area for a tiny model (--layers 4,4) at --steps 5e5 and
 *            5e7, as laid out (ddp_area_layout) and as mapped by a running
 *            supervisor (/proc/PID/maps), and its RSS, with what the
 *            per-step arrays of before would have taken (8 bytes per step
 *            and rank, 24 per step for the loss log);
 *   csv      a 10^6-column CSV (2 rows, 4 MB): data_load_csv's time and the
 *            peak RSS it adds, in a child process each round; and the whole
 *            run (./ddpbench --layers 999999,1 --batch 1 --steps 1): wall
 *            time and peak RSS, from wait4.
 * Rounds alternate and the median and range of 5 are printed; the machine
 * may be shared, so ratios within a round mean more than the absolutes. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "app/load/load.h"
#include "ddp/ddp_shared.h"
#include "common/measure/result.h"
#include "common/measure/timing.h"

#define ROUNDS 5

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void report(const char *what, double *v, int n, const char *unit)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    printf("  %-44s median %10.2f %s  (range %.2f .. %.2f)\n", what, v[n / 2], unit, v[0],
           v[n - 1]);
}

/* Run argv to its end; wall seconds and peak RSS (KiB) from wait4. */
static int run_child(char *const argv[], double *secs, long *maxrss_kb)
{
    double t0 = now_s();
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (pid < 0 || wait4(pid, &st, 0, &ru) != pid)
        return -1;
    *secs = now_s() - t0;
    *maxrss_kb = ru.ru_maxrss;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* A DDP supervisor of --steps N on a tiny model, looked at 2 s in: the bytes
 * of its shared segment mapping and its RSS. */
static int ddp_footprint(const char *steps, long *seg_bytes, long *rss_kb)
{
    pid_t pid = fork();
    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);
        dup2(devnull, 1);
        dup2(devnull, 2);
        execl("./ddpbench", "./ddpbench", "--mode", "ddp", "--gpus", "0,1", "--backend", "cpu",
              "--layers", "4,4", "--loss", "mse", "--samples", "16", "--batch", "4", "--steps",
              steps, "--log-every", "1", "--quiet", (char *)NULL);
        _exit(127);
    }
    if (pid < 0)
        return -1;
    sleep(2);
    char path[64], line[512];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(path, "r");
    *seg_bytes = 0;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long a, b;
        if (strstr(line, "/dev/shm/ddpbench") && sscanf(line, "%lx-%lx", &a, &b) == 2)
            *seg_bytes += (long)(b - a);
    }
    if (f)
        fclose(f);
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    *rss_kb = 0;
    while (f && fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", rss_kb) == 1)
            break;
    if (f)
        fclose(f);
    kill(pid, SIGTERM);
    int st;
    waitpid(pid, &st, 0);
    return 0;
}

int main(void)
{
    if (access("./ddpbench", X_OK) != 0) {
        fprintf(stderr, "bench_limits: run from the repository root after make\n");
        return 1;
    }
    printf("bench_limits: bounded step statistics and the 10^6-column CSV\n");

    // ---- step statistics --------------------------------------------------------
    printf("  step_times_t: %zu bytes per run, whatever --steps (a per-step array: 8 bytes "
           "per step)\n",
           sizeof(step_times_t));
    const long steps[2] = {500000, 50000000};
    for (int i = 0; i < 2; i++) {
        long max_log = steps[i] < LOSS_LOG_MAX ? steps[i] : LOSS_LOG_MAX;
        size_t now = ddp_area_layout(NULL, 2, max_log, 20, 0);
        double before = (double)(2 * steps[i] * 8 + steps[i] * 24) + (double)now;
        char s[32];
        snprintf(s, sizeof s, "%ld", steps[i]);
        long seg = 0, rss = 0;
        ddp_footprint(s, &seg, &rss);
        printf("  ddp --steps %-9ld --log-every 1: area %.2f MiB (per-step arrays: %.1f MiB); "
               "segment mapped %.2f MiB, supervisor RSS %.1f MiB\n",
               steps[i], now / 1048576.0, before / 1048576.0, seg / 1048576.0, rss / 1024.0);
    }

    // ---- the 10^6-column CSV ------------------------------------------------------
    char csv[] = "/tmp/bench_limits_XXXXXX.csv";
    int fd = mkstemps(csv, 4);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f)
        return 1;
    for (int r = 0; r < 2; r++) {
        for (int c = 0; c < 1000000; c++)
            fprintf(f, c ? ",%d" : "%d", (c + r) % 10);
        fputc('\n', f);
    }
    fclose(f);
    f = fopen(csv, "r");
    fseek(f, 0, SEEK_END);
    long csv_bytes = ftell(f);
    fclose(f);
    double load_s[ROUNDS], load_mb[ROUNDS], run_s[ROUNDS], run_mb[ROUNDS];
    for (int k = 0; k < ROUNDS; k++) {
        /* the loader alone, in a child: the peak RSS it adds */
        int pfd[2];
        if (pipe(pfd) != 0)
            return 1;
        pid_t pid = fork();
        if (pid == 0) {
            struct rusage r0, r1;
            getrusage(RUSAGE_SELF, &r0);
            dataset_t d;
            char err[ERR_LEN];
            double t0 = now_s();
            int rc = data_load_csv(&d, csv, 1, false, err);
            double v[2] = {now_s() - t0, 0};
            getrusage(RUSAGE_SELF, &r1);
            v[1] = (double)(r1.ru_maxrss - r0.ru_maxrss) / 1024.0;
            if (write(pfd[1], v, sizeof v) != (ssize_t)sizeof v || rc != DDP_OK)
                _exit(1);
            _exit(0);
        }
        double v[2] = {0, 0};
        if (read(pfd[0], v, sizeof v) != (ssize_t)sizeof v)
            return 1;
        waitpid(pid, NULL, 0);
        close(pfd[0]);
        close(pfd[1]);
        load_s[k] = v[0];
        load_mb[k] = v[1];
        char *argv[] = {"./ddpbench", "--mode", "single", "--backend", "cpu", "--data", csv,
                        "--layers", "999999,1", "--loss", "mse", "--batch", "1", "--steps", "1",
                        "--quiet", NULL};
        long kb = 0;
        if (run_child(argv, &run_s[k], &kb) != 0) {
            fprintf(stderr, "bench_limits: the wide CSV run failed\n");
            return 1;
        }
        run_mb[k] = kb / 1024.0;
    }
    unlink(csv);
    printf("  CSV of 2 rows x 10^6 columns: %.1f MB on disk, %.1f MB as float32\n",
           csv_bytes / 1e6, 2e6 * 4 / 1e6);
    report("data_load_csv: time", load_s, ROUNDS, "s");
    report("data_load_csv: peak RSS added", load_mb, ROUNDS, "MiB");
    report("whole run (--layers 999999,1): wall time", run_s, ROUNDS, "s");
    report("whole run: peak RSS", run_mb, ROUNDS, "MiB");
    return 0;
}
