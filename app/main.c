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
#include "app/commbench.h"
#include "app/scenario.h"
#include "common/base/interrupt.h"
#include "common/base/text.h"
#include "app/ab.h"
#include "ddp/launch.h"
#include "common/device/backend.h"

/* The exit status of a status code. */
static int exit_code(int rc)
{
    if (rc == DDP_ERR_INTERRUPTED)
        return interrupt_exit_status();
    return rc;
}

/* The one error line: whatever the message quotes (a path with a newline or
 * an ESC in it) is escaped, so it stays one line of plain text. */
int app_fail(int code, const char *msg)
{
    char shown[2 * ERR_LEN];
    text_escape(msg, shown, sizeof shown);
    fprintf(stderr, "ddpbench: %s %s\n", code == DDP_ERR_INTERRUPTED ? "stopped:" : "error:",
            shown);
    return exit_code(code);
}

/* A failure agreed by every rank under mpirun is said once, by rank 0 (its
 * err is the line; the others' is empty): the exit status is the same. */
static int fail_or_quiet(int code, const char *msg)
{
    return msg[0] ? app_fail(code, msg) : exit_code(code);
}

/* stdout after --help or --version: a write that failed (/dev/full) fails. */
static int stdout_status(char *err)
{
    if (fflush(stdout) != 0 || ferror(stdout))
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
    int verdict = rc == DDP_OK ? app_gate_judge(j) : 0;
    if (rc == DDP_OK) /* the page last: it draws what the others printed */
        app_write_page(j, failed, written, sizeof written);
    if (rc == DDP_OK)
        rc = app_outputs_status(j, failed, written, err);
    return rc != DDP_OK ? app_fail(rc, err) : verdict;
}

int main(int argc, char **argv)
{
    startup_done(); /* OpenBLAS started (startup.c): SIGINT is the user's again */
    /* Under ulimit -v, start again with one OpenBLAS thread at load: its
     * pool threads would otherwise each map a buffer before main and spin
     * forever where one does not fit (backend.h).  Nothing has run yet. */
    if (backend_cpu_restart_env())
        execv("/proc/self/exe", argv); /* on failure, go on as we are */
    /* Past ulimit -f a write raises SIGXFSZ, whose default action kills the
     * process without a word and leaves the temporary; ignored, the write
     * fails with EFBIG, which every writer reports and cleans up after. */
    signal(SIGXFSZ, SIG_IGN);

    static app_job_t job; /* static: large, and its results hold their step statistics */
    app_job_t *j = &job;
    config_t *cfg = &j->cfg;
    char err[ERR_LEN] = "";
    int rc = config_parse(cfg, argc, argv, stdout, err);
    if (rc == CONFIG_EXIT_OK)
        return (rc = stdout_status(err)) == DDP_OK ? 0 : app_fail(rc, err);
    /* The launcher first (ddp/launch.h): under mpirun this process forks its
     * watcher and becomes a rank; even a bad option is then judged with the
     * other ranks' at the start-up check, so it is said once. */
    int code;
    char lerr[ERR_LEN] = "";
    int lrc = ddp_launch_init(cfg, &code, lerr);
    if (lrc == DDP_LAUNCH_WATCHER)
        return code;
    if (lrc != DDP_OK && rc == DDP_OK) {
        if (cfg->launcher != LAUNCHER_MPI || cfg->world_size == 0) /* no group to tell */
            return ddp_launch_end(cfg, app_fail(lrc, lerr));
        rc = lrc;
        snprintf(err, sizeof err, "%s", lerr);
    }
    j->mpi = cfg->launcher == LAUNCHER_MPI;
    if (!j->mpi) /* under mpirun, mpirun's signals end the job */
        interrupt_install();
    if (rc == DDP_OK && cfg->against[0]) { /* the A/B gate: its runs are child processes */
        if (!j->mpi)
            return (rc = ab_main(cfg, argc, argv, err)) == DDP_OK ? 0
                   : rc == DDP_ERR_REGRESSED || rc == DDP_ERR_NOISY ? rc
                                                                    : app_fail(rc, err);
        rc = err_set(err, DDP_ERR_INPUT, "--against: starts its own runs on one host; run it "
                     "without mpirun");
    }
    if (rc == DDP_OK && cfg->scenario[0]) { /* a failure reproduced and explained
                                              (scenario.h): its runs are this process's */
        if (!j->mpi)
            return scenario_main(argc, argv, cfg->scenario, stdout);
        rc = err_set(err, DDP_ERR_INPUT, "--scenario %s: forks its own ranks on one host; run it "
                     "without mpirun", cfg->scenario);
    }

    report_start(); /* the run's start time and load average, for its provenance */
    if (rc == DDP_OK)
        rc = config_resolve(cfg, j->note, sizeof j->note, err);
    if (cfg->mode == MODE_COMM) {
        if (rc == DDP_OK)
            rc = app_mem_check_comm(cfg, j->mpi, err);
        if ((rc = ddp_launch_agree(cfg, NULL, rc, err)) != DDP_OK)
            return ddp_launch_end(cfg, fail_or_quiet(rc, err));
        rc = app_comm(cfg, j->note[0] ? j->note : NULL, err);
        return ddp_launch_end(cfg, rc == DDP_OK ? 0 : app_fail(rc, err));
    }
    rc = app_plan(j, rc, err);
    int status = rc == DDP_OK ? run_job(j, argc, argv) : fail_or_quiet(rc, err);
    app_free(j);
    return ddp_launch_end(cfg, status);
}
