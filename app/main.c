/* app/main.c: the ddpbench program: command line -> config -> strategy ->
 * report.  The only place that prints "ddpbench: error:" and picks the exit
 * status (0 ok, 1 runtime fault, 2 bad input, 3 regression, 4 no verdict,
 * 128 + the signal when SIGINT/SIGTERM/SIGHUP stopped the run).  The job's
 * stages are app.h's: plan, train, outputs, gate. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"
#include "common/base/interrupt.h"
#include "common/base/text.h"
#include "common/device/backend.h"
#include "ddp/launcher.h"

// ---------------------------------------------------------------------------
// before main: OpenBLAS's library constructor starts its threads before main and, when it
// cannot, raises SIGINT on itself (docs/faults.md, "Threads"): a function in .preinit_array
// runs before every shared library's constructor, so until main begins a SIGINT is taken for
// OpenBLAS's (one line, exit 2).

static struct sigaction g_old;
static volatile sig_atomic_t g_installed;

static void before_main(int sig)
{
    (void)sig;
    static const char msg[] =
        "ddpbench: error: OpenBLAS could not start its threads before ddpbench began (its "
        "pthread_create failed, line above): a limit on processes (ulimit -u) or on address "
        "space (ulimit -v) is too small for them; raise it, or set OPENBLAS_NUM_THREADS=1\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(2);
}

static void startup_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (sigaction(SIGINT, NULL, &g_old) != 0 || g_old.sa_handler == SIG_IGN)
        return; /* ignored: OpenBLAS's raise does nothing, nothing to catch */
    sa.sa_handler = before_main;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) == 0)
        g_installed = 1;
}

__attribute__((section(".preinit_array"), used)) static void (*const g_preinit)(void) =
    startup_catch;

// ---------------------------------------------------------------------------
// the program

/* The exit status of a status code. */
static int exit_code(int rc)
{
    if (rc == DDP_ERR_INTERRUPTED)
        return interrupt_exit_status();
    return rc;
}

/* The one error line: whatever the message quotes (a path with a newline or
 * an ESC in it) is escaped, so it stays one line of plain text. */
static int app_fail(int code, const char *msg)
{
    text_say(stderr, code == DDP_ERR_INTERRUPTED ? "ddpbench: stopped: " : "ddpbench: error: ",
             msg);
    return exit_code(code);
}

/* A failure agreed by every rank under mpirun is said once, by rank 0 (its
 * err is the line; the others' is empty): the exit status is the same. */
static int fail_or_quiet(int code, const char *msg)
{
    return msg[0] ? app_fail(code, msg) : exit_code(code);
}

/* stdout after --help or --version: a write that failed (/dev/full) fails;
 * a reader that left (| grep -q, | head) took what it wanted, and they are
 * the only output. */
static int stdout_status(char *err)
{
    if ((fflush(stdout) != 0 || ferror(stdout)) && errno != EPIPE)
        return err_set(err, DDP_ERR_RUNTIME, "stdout: write failed: %s", strerror(errno));
    return DDP_OK;
}

/* Train the planned job, write its outputs, judge it; its exit status. */
static int run_job(app_job_t *j, int argc, char **argv)
{
    char err[ERR_LEN] = "";
    int rc = app_prepare(j, argc, argv, err);
    if (rc != DDP_OK)
        return app_fail(rc, err);
    rc = app_train(j, err);
    if (!j->reports) {
        /* Under mpirun, a rank other than 0: rank 0 writes the outputs and
         * reports for all. */
        rc = app_train_follow(j, rc, err);
        return rc == DDP_OK ? 0 : app_fail(rc, err);
    }
    char failed[ERR_LEN] = "", written[3 * CONFIG_PATH_LEN + 48] = "";
    if (rc == DDP_OK)
        app_write_files(j, failed, written, sizeof written);
    if (rc == DDP_OK)
        rc = app_predict(j, err);
    if (rc == DDP_OK)
        app_print(j, failed);
    const gate_opts_t *g = &j->gate_opts;
    int verdict = 0;
    if (rc == DDP_OK && g->baseline[0])
        verdict = gate_stored_judge(&j->gate, j->cfgs, j->reps, j->n, g->tolerance_pct, j->info);
    if (rc == DDP_OK) /* the page last: it draws what the others printed */
        app_write_page(j, failed, written, sizeof written);
    if (rc == DDP_OK)
        rc = app_outputs_status(j, failed, written, err);
    return rc != DDP_OK ? app_fail(rc, err) : verdict;
}

/* Everything after the parse, inside the launcher (ddp/launcher.h): rc
 * and err, the parse's outcome or the launcher's; the exit status. */
static int job_main(void *ctx, int rc, char *err)
{
    app_job_t *j = ctx;
    config_t *cfg = &j->cfg;
    j->mpi = launch_is_rank(cfg);
    j->reports = launch_reports(cfg);
    if (rc == DDP_OK && j->gate_opts.against[0]) { /* the A/B gate: its runs are children */
        rc = launch_one_host(cfg, "--against: starts its own runs on one host", err);
        if (rc == DDP_OK) {
            rc = ab_main(&j->gate_opts, cfg, &j->line, j->argc, j->argv, err);
            return rc == DDP_OK || rc == DDP_ERR_REGRESSED || rc == DDP_ERR_NOISY
                       ? rc
                       : app_fail(rc, err);
        }
    }
    const char *scenario = j->opts.scenario;
    if (rc == DDP_OK && scenario[0]) { /* a failure reproduced and explained (app.h):
                                          its runs are this process's */
        char what[CONFIG_PATH_LEN + 64];
        snprintf(what, sizeof what, "--scenario %s: forks its own ranks on one host", scenario);
        if ((rc = launch_one_host(cfg, what, err)) == DDP_OK) {
            err[0] = 0; /* what the scenario says, if anything */
            return fail_or_quiet(scenario_main(j->argc, j->argv, scenario, stdout, err), err);
        }
    }

    if (rc == DDP_OK && j->opts.workload[0]) /* the GPU lesson alone: nothing is trained */
        return (rc = app_gpu_lesson(j, err)) == DDP_OK ? 0 : app_fail(rc, err);
    report_start(); /* the run's start time and load average, for its provenance */
    if (rc == DDP_OK)
        rc = config_resolve(cfg, j->note, sizeof j->note, err);
    if (rc == DDP_OK && cfg->mode != MODE_COMM) /* a bad profile fails before training */
        rc = app_gpu_model(j, err);
    if (cfg->mode == MODE_COMM) {
        if (rc == DDP_OK)
            rc = app_mem_check_comm(cfg, j->mpi, err);
        if ((rc = launch_agree(cfg, NULL, rc, err)) != DDP_OK)
            return fail_or_quiet(rc, err);
        rc = app_comm(cfg, j->note[0] ? j->note : NULL, err);
        return rc == DDP_OK ? 0 : app_fail(rc, err);
    }
    rc = app_plan(j, rc, err);
    int status = rc == DDP_OK ? run_job(j, j->argc, j->argv) : fail_or_quiet(rc, err);
    app_free(j);
    return status;
}

int main(int argc, char **argv)
{
    if (g_installed) /* OpenBLAS started: SIGINT is the user's again (a SIG_IGN stayed) */
        sigaction(SIGINT, &g_old, NULL);
    /* Under ulimit -v, start again with one OpenBLAS thread at load: its
     * pool threads would otherwise each map a buffer before main and spin
     * forever where one does not fit (backend.h).  Nothing has run yet. */
    if (backend_cpu_restart_env())
        execv("/proc/self/exe", argv); /* on failure, go on as we are */
    backend_cpu_pool_stop(); /* one OpenBLAS thread per device, no idle pool spinning */
    /* Past ulimit -f a write raises SIGXFSZ, whose default action kills the
     * process without a word and leaves the temporary; ignored, the write
     * fails with EFBIG, which every writer reports and cleans up after. */
    signal(SIGXFSZ, SIG_IGN);
    /* A reader that leaves early (| head) would kill with SIGPIPE whichever
     * process writes next, a DDP rank included, and cost every output; so
     * a closed stdout fails its writes with EPIPE like a full disk, and is
     * one output that failed (exit 1, the others written: outputs.c). */
    signal(SIGPIPE, SIG_IGN);

    static app_job_t job; /* static: large, and its results hold their step statistics */
    app_job_t *j = &job;
    j->argc = argc;
    j->argv = argv;
    char err[ERR_LEN] = "";
    cmdline_init(&j->line, &j->cfg, &j->gate_opts, &j->opts);
    int rc = config_line_parse(&j->line, argc, argv, stdout, err);
    if (rc == CONFIG_EXIT_OK)
        return (rc = stdout_status(err)) == DDP_OK ? 0 : app_fail(rc, err);
    /* Under mpirun this process becomes a rank (its watcher forked first);
     * even a bad option is then judged with the other ranks' at the
     * start-up check, so it is said once. */
    return launch_main(&j->cfg, rc, err, job_main, j);
}
