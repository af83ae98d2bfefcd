/* common/measure/disturb.h: what else the machine did while a run ran.
 *
 * A run's figures are only as good as the machine was quiet.  Around a run
 * (disturb_begin before it, disturb_end after it, in the process that
 * started it, once its ranks are waited for) this records:
 *   - the 1-minute load average at the start and at the end (/proc/loadavg);
 *   - the CPU time every other process took: the busy time in /proc/stat
 *     (user, nice, system, irq, softirq) of the CPUs the run may use (its
 *     affinity, which its threads and ranks inherit: every CPU, or those
 *     taskset or a cpuset left it) minus this process's and its waited-for
 *     children's (getrusage SELF + CHILDREN: DP's threads and DDP's forked
 *     ranks are in it);
 *   - the steal time of /proc/stat (a VM's CPU given to another guest);
 *   - this process's and its children's involuntary context switches
 *     (getrusage ru_nivcsw: the scheduler took the CPU away);
 *   - the online CPUs, those the run may use, and the devices it used.
 * and judges it `disturbed` by the named thresholds below.
 *
 * "Contention" is the share of the run's own cores that other processes
 * took: the run needs one core per device (a CPU worker computes on one; a
 * GPU's host thread or rank feeds it), the rest of the CPUs are spare, and
 * only what others took beyond the spare cores came out of the run's:
 *     contention = max(0, others_cores - (cpus - run_cores)) / run_cores
 * where others_cores = others' CPU seconds / wall seconds, and cpus are
 * the CPUs the run may use (others' time on the rest takes nothing from
 * it; under taskset -c 0 a hog on CPU 0 takes half the run's core). */
#ifndef DDPBENCH_DISTURB_H
#define DDPBENCH_DISTURB_H

#include <sched.h>
#include <stdbool.h>
#include <stdint.h>

/* The thresholds (measured on the shared 2-core machine this was built on;
 * docs/results.md, "machine"):
 *
 * DISTURB_CONTENTION_MAX: others took more than 10% of the run's cores.  A
 * run left 1 - c of its cores runs at about 1 - c of its speed: 10 single
 * mlp-small runs at c = 0.48..0.89 had p50 steps 10.5..66 ms (6.3x apart),
 * but p50 x (1 - c) 5.1..6.9 ms (1.4x).  At c = 0.10 a run is up to 10%
 * slow, twice the default --tolerance: a disturbed run.  (Kernel threads
 * and daemons take a few % of a core; on a machine with a spare core they
 * never count.) */
#define DISTURB_CONTENTION_MAX 0.10
/* DISTURB_STEAL_PCT_MAX: more than 5% of the CPUs' time stolen by the
 * hypervisor (0 on bare metal; a VM at 5% loses about that much). */
#define DISTURB_STEAL_PCT_MAX 5.0
/* DISTURB_NIVCSW_PER_S_MAX: more than 50 involuntary switches a second,
 * summed over the run's processes (per second, not per step: a long step
 * meets more of the kernel's own rare preemptions).  Runs sharing their
 * cores measured 150-200 a second (single) and 1000-3000 (ddp, whose ranks
 * yield while they wait); an idle core preempts a run a few times a second.
 * It catches a busy machine /proc/stat cannot show (another container's
 * processes on the same cores). */
#define DISTURB_NIVCSW_PER_S_MAX 50.0
/* /proc/stat counts in clock ticks (10 ms): two ticks per CPU of slack
 * before others' time counts, so a short run is not called disturbed for
 * the rounding of its own time. */
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
    bool own_switching;        /* the run has more threads than cores of its own (DP's
                                  device threads, DDP's ranks and their collective
                                  threads): they preempt each other, so its switches
                                  cannot tell another process apart and are not judged */
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
/* Fill contention, the per-step rate, `disturbed` and `why` from the raw
 * figures in d (wall_s, cpus_online, cpus_allowed, devices, others_cpu_s,
 * steal_s, invol_switches, own_switching, steps, known): the judgement
 * alone, for the tests. */
void disturb_judge(disturb_t *d);

/* "others took 0.62 of the run's 2 cores; load 3.1 -> 4.0" (one line) */
void disturb_describe(const disturb_t *d, char *buf, unsigned long len);

#endif
