/* app/scenario_collective.c: --scenario collective-at-runtime, one rank runs
 * a collective at step S the others do not (ddp/plant.c: it all-reduces the
 * loss it logs).  Over shared memory the ranks compare each collective as
 * they meet in it, over NCCL the others wait until --timeout: either way the
 * run ends at once, exit 1, saying where each rank stands (the group's
 * ledger, comm.h: each rank's collective number and operation), leaving no
 * process and no shared memory behind; the run without it trains. */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "common/base/clock.h"
#include "app/scenario_impl.h"

#define EXTRA_RANK 1
#define EXTRA_STEP 5

/* Whether a child of this process is left (a rank not reaped, or one that
 * ended and was not waited for: reaped here), and the /dev/shm entries named
 * ddpbench-... */
static void leftovers(int *children, int *segments)
{
    *children = !(waitpid(-1, NULL, WNOHANG) == -1 && errno == ECHILD);
    *segments = 0;
    DIR *d = opendir("/dev/shm");
    for (struct dirent *e; d && (e = readdir(d));)
        *segments += strncmp(e->d_name, "ddpbench-", 9) == 0;
    if (d)
        closedir(d);
}

/* Rank q's collective number in the ledger's words ("ranks 0 and 2: #8 ..."). */
static bool seq_of(const char *err, int q, unsigned long long *at)
{
    for (const char *h = strstr(err, ": #"); h; h = strstr(h + 3, ": #")) {
        const char *g = h;
        while (g > err && strncmp(g, "rank", 4) != 0)
            g--;
        for (const char *x = g + 4; x < h; x++)
            if (isdigit((unsigned char)*x) && x[-1] == ' ' && atoi(x) == q)
                return sscanf(h + 3, "%llu", at) == 1;
    }
    return false;
}

int sc_collective(scen_t *s)
{
    const config_t *c = &s->cfg;
    run_result_t *r = &s->run[0];
    char err[ERR_LEN] = "", rerr[ERR_LEN];
    int kids, shm0, shm;
    leftovers(&kids, &shm0);
    double t0 = now_s();
    plant_t p = {.kind = PLANT_EXTRA_COLL, .rank = EXTRA_RANK, .step = EXTRA_STEP};
    int rc = scen_run(scen_variant(s, 0, MODE_DDP, p, 0), &s->data, r, err);
    double secs = now_s() - t0;
    leftovers(&kids, &shm);
    if (scen_ended(s, rc, err, rc == DDP_ERR_RUNTIME))
        return 1;
    int rrc = scen_run(scen_variant(s, 1, MODE_DDP, (plant_t){0}, 0), &s->data, r, rerr);
    if (scen_ended(s, rrc, rerr, false))
        return 1;
    scen_para(s, "What PyTorch users see:",
              "one rank takes a branch the others do not and calls a collective they never call "
              "(an all-reduce of a metric it logs under its own condition). NCCL pairs the "
              "ranks' collectives by their order alone: the others' next collective meets it, "
              "with the wrong size, or waits for a partner that never comes, and the job hangs "
              "until the watchdog's timeout (YaLM-100B#31: after 1,805,074 ms). Flight "
              "Recorder (TORCH_NCCL_TRACE_BUFFER_SIZE) or TORCH_DISTRIBUTED_DEBUG=DETAIL tell "
              "afterwards, from each rank's dump, which collective each rank was in.");
    scen_para(s, "What ddpbench measured:",
              "rank %d ran one all-reduce more at step %d: the run ended after %.2f s (--timeout "
              "%g), exit %d: %s. Processes of the run left: %s; shared-memory segments: %d "
              "before, %d after. Without the extra collective it trained.",
              EXTRA_RANK, EXTRA_STEP + 1, secs, c->timeout_s, rc, rc ? err : "it trained",
              kids ? "some" : "none", shm0, shm);
    scen_para(s, "The fix:",
              "run the same collectives, in the same order, on every rank: a value one rank "
              "wants is all-reduced by every rank (or sent with its own point-to-point send); "
              "turn on the collectives' record (Flight Recorder) before a long job, so a hang "
              "names its ranks.");
    /* Named: every rank's place, and the extra collective itself, or its rank
     * one collective ahead of the others (the tag gone from its ledger). */
    bool named = c->ngpus > EXTRA_RANK, ahead = true;
    unsigned long long at[MAX_DEVICES];
    for (int q = 0; q < c->ngpus && named; q++)
        named = seq_of(err, q, &at[q]);
    for (int q = 0; q < c->ngpus && named; q++)
        ahead = ahead && (q == EXTRA_RANK || at[q] + 1 == at[EXTRA_RANK]);
    named = named && (strstr(err, "of the loss this rank logs") || ahead);
    bool shown = rc == DDP_ERR_RUNTIME && named && secs <= c->timeout_s + 1.0 && !kids &&
                 shm <= shm0 && rrc == DDP_OK;
    return scen_verdict(s, "collective-at-runtime", shown,
                        c->ngpus <= EXTRA_RANK ? "there is no rank 1 to run the extra collective"
                        : rc != DDP_ERR_RUNTIME ? "the run did not fail (planted mistake left out?)"
                        : !named ? "the failure did not say where each rank stood"
                                 : "the run outlived --timeout + 1 s or left something behind");
}
