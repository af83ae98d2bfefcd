/* common/measure/disturb.h: what else the machine did while a run ran (the load,
 * others' and stolen CPU time on the run's CPUs, the run's involuntary switches),
 * taken around the run by the process that started it, and whether that disturbed
 * it: the record and its judgement are described in docs/results.md ("machine"). */
#ifndef DDPBENCH_DISTURB_H
#define DDPBENCH_DISTURB_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/* The thresholds, each measured in docs/gate.md ("A busy machine"): others took more
 * than 10% of the run's cores; more than 5% of the CPUs' time stolen; more than 50
 * involuntary switches a second; /proc/stat's 10 ms ticks: two per CPU of slack. */
#define DISTURB_CONTENTION_MAX 0.10
#define DISTURB_STEAL_PCT_MAX 5.0
#define DISTURB_NIVCSW_PER_S_MAX 50.0
#define DISTURB_TICK_SLACK 2.0

typedef struct {
    double t0;                 /* now_s() at the start */
    double load0;              /* 1-minute load average (NAN: unknown) */
    bool stat_ok;
    cpu_set_t cpus;            /* the CPUs the run may use */
    int ncpus;                 /* how many (CPU_COUNT of cpus) */
    bool all_cpus;             /* every online CPU: /proc/stat's "cpu" line */
    uint64_t busy0, steal0;    /* /proc/stat jiffies of those CPUs */
    double own0_s;             /* CPU seconds of this process and its children */
    long nivcsw0;
} disturb_mark_t;

typedef struct {
    bool known;                /* /proc/stat was read at both ends */
    double wall_s;
    double load_start, load_end; /* 1-minute load averages (NAN: unknown) */
    int cpus_online;
    int cpus_allowed;          /* the CPUs the run may use (0: as many as are online) */
    int devices;               /* devices the run used */
    int run_cores;             /* min(devices, cpus_allowed) */
    double own_cpu_s;          /* this process and its waited-for children */
    double others_cpu_s;       /* every other process's CPU seconds */
    double others_cores;       /* others_cpu_s / wall_s */
    double contention;         /* share of the run's cores others took (0..1) */
    double steal_s, steal_pct; /* stolen CPU seconds; % of all CPUs' time */
    long invol_switches;       /* involuntary context switches, the run's processes */
    bool own_switching;        /* more threads than cores: its switches are not judged */
    long steps;                /* optimizer steps of the run */
    double invol_per_step, invol_per_s;
    bool disturbed;
    char why[160];             /* what disturbed it, "" when not */
} disturb_t;

/* Test hook: read DIR/stat and DIR/loadavg instead of /proc's (NULL: /proc). */
void disturb_set_proc_dir(const char *dir);
/* Test hook: the CPUs the run may use, of n online (NULL: the process's
 * own affinity and the machine's online CPUs). */
void disturb_set_cpus(const cpu_set_t *set, int n);

/* Mark the start of a run (before it forks anything). */
void disturb_begin(disturb_mark_t *m);
/* The record of the run since m: devices it used and steps it ran. */
void disturb_end(const disturb_mark_t *m, int devices, long steps, bool own_switching,
                 disturb_t *out);
/* The judgement alone (for the tests): contention, the rates, `disturbed` and `why`
 * from d's raw figures. */
void disturb_judge(disturb_t *d);

/* "others took 0.62 of the run's 2 cores; load 3.1 -> 4.0" (one line) */
void disturb_describe(const disturb_t *d, char *buf, unsigned long len);

#endif
