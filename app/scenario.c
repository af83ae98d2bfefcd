/* app/scenario.c: --scenario NAME (see app.h).  Each scenario is a
 * short run (or two) on the same harness: its options, then the user's,
 * parsed like a command line; what PyTorch users would see; what ddpbench
 * measured, from the run's own record; the fix; and whether it behaved as
 * described, which is the exit status. */
#include "app/scenario_impl.h"

#include <math.h>
#include <string.h>

#include "common/base/clock.h"
#include "common/base/interrupt.h"
#include "app/cmdline/cmdline.h"
#include "app/load/load.h"
#include "app/report/report.h"
#include "app/report/report_page.h"
#include "common/train/strategy.h"

// ---------------------------------------------------------------------------
// the harness (the rest is scenario_harness.c's)

/* Parse the scenario's options, then the user's (argv without argv[0]),
 * resolve them and load the data. */
static int setup(scen_t *s, const char *defaults, int argc, char **argv)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", defaults);
    char *av[256];
    int ac = 0;
    av[ac++] = argv[0];
    for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && ac < 128;
         t = strtok_r(NULL, " ", &save))
        av[ac++] = t;
    int nown = ac;
    av[ac] = NULL;
    /* the scenario's own mode, from its options alone */
    config_t *own = &s->alt[0];
    int rc = config_parse(own, nown, av, s->out, s->err);
    for (int i = 1; i < argc && ac < 255; i++)
        av[ac++] = argv[i];
    av[ac] = NULL;
    config_line_t line;
    cmdline_init(&line, &s->cfg, &s->gate, &s->opts);
    if (rc == DDP_OK)
        rc = config_line_parse(&line, ac, av, s->out, s->err);
    if (rc != DDP_OK)
        return rc;
    /* A scenario prints its own story and writes nothing: an output option
     * or another mode would be ignored in silence, so it is refused. */
    const config_t *c = &s->cfg;
    if (c->mode != own->mode)
        return err_set(s->err, DDP_ERR_INPUT, "--mode %s: this scenario runs %s", mode_name(c->mode),
                       mode_name(own->mode));
    const char *no = c->save_path[0]           ? "--save"
                     : c->checkpoint_path[0]   ? "--checkpoint"
                     : c->resume_path[0]       ? "--resume"
                     : c->trace_path[0]        ? "--trace"
                     : s->opts.emit_pytorch[0] ? "--emit-pytorch"
                     : s->gate.baseline[0]     ? "--baseline"
                     : c->json                 ? "--json"
                     : c->csv                  ? "--csv"
                     : c->explain              ? "--explain"
                     : c->predict              ? "--predict"
                     : c->repeat > 1           ? "--repeat"
                                               : NULL;
    if (no)
        return err_set(s->err, DDP_ERR_INPUT, "not with %s: a scenario prints its own story and "
                       "writes no output", no);
    char note[ERR_LEN];
    TRY(config_resolve(&s->cfg, note, sizeof note, s->err));
    /* a scenario explains what it measured: a busy machine's time apart */
    s->cfg.desched = true;
    TRY(config_model_spec(&s->cfg, &s->spec, s->err));
    TRY(data_load(&s->cfg, &s->spec, &s->data, s->err));
    s->loaded = true;
    return DDP_OK;
}

/* Seconds per timed step of device d's phase p. */
static double per_step(const run_result_t *r, int d, phase_t p)
{
    return r->times.n > 0 ? r->dev[d].phase_s[p] / (double)r->times.n : 0.0;
}

static double compute_of(const run_result_t *r, int d)
{
    return per_step(r, d, PH_FORWARD) + per_step(r, d, PH_LOSS) + per_step(r, d, PH_BACKWARD);
}

static double wait_of(const run_result_t *r, int d)
{
    return per_step(r, d, PH_COMM_EXPOSED) + per_step(r, d, PH_IDLE);
}

/* The machine's share of device d's waits, a fraction of each (docs/results.md:
 * the part the longest another device was descheduled explains). */
static double machine_frac(const run_result_t *r, int d)
{
    static double ph[MAX_DEVICES][PH_COUNT];
    for (int e = 0; e < r->ndev && e < MAX_DEVICES; e++)
        for (int p = 0; p < PH_COUNT; p++)
            ph[e][p] = per_step(r, e, (phase_t)p);
    return report_machine_frac((const double (*)[PH_COUNT])ph, r->ndev, d);
}

static double machine_wait(const run_result_t *r, int d) { return machine_frac(r, d) * wait_of(r, d); }

/* Time device d's thread waited for its core (another process had it). */
static double desched_of(const run_result_t *r, int d) { return per_step(r, d, PH_DESCHED); }

static const char *ms(char *b, size_t n, double s) { return report_fmt_time(b, n, s); }
static const char *mib(char *b, size_t n, double x) { return report_fmt_bytes(b, n, x); }

// ---------------------------------------------------------------------------
// uneven: ranks with different amounts of data, without join

static int sc_uneven(scen_t *s)
{
    config_t *c = &s->cfg;
    run_result_t *r = &s->run[0];
    char err[ERR_LEN] = "";
    double t0 = now_s();
    int rc = scen_run(c, &s->data, r, err);
    double secs = now_s() - t0;
    bool hung = rc == DDP_ERR_RUNTIME && strstr(err, "did not arrive") && strstr(err, "ran out of data");
    if (scen_ended(s, rc, err, hung))
        return 1;
    config_t *j = &s->alt[0];
    *j = *c;
    j->join = true;
    char jerr[ERR_LEN] = "";
    int jrc = scen_run(j, &s->data, r, jerr);
    if (scen_ended(s, jrc, jerr, false))
        return 1;
    char steps[256] = "";
    long shadowed = 0;
    for (int d = 0; jrc == DDP_OK && d < r->ndev; d++) {
        size_t u = strlen(steps);
        snprintf(steps + u, sizeof steps - u, "%srank %d %ld/%ld", d ? ", " : "", d,
                 r->dev[d].steps_run, r->dev[d].steps_shadowed);
        shadowed += r->dev[d].steps_shadowed;
    }

    scen_para(s, "What PyTorch users see:",
         "each rank's DataLoader ends after its own number of batches. The rank that runs out "
         "first leaves the training loop; the others call their next all-reduce (inside "
         "backward) and wait for it there. Nothing fails until the NCCL watchdog's timeout (10 "
         "minutes by default) ends the job with a line like \"[Rank 0] Watchdog caught "
         "collective operation timeout: WorkNCCL(SeqNum=7, OpType=ALLREDUCE, ...) ran for "
         "600000 milliseconds before timing out\" (gloo: a timeout after 30 minutes). It names "
         "the operation, not the rank that left.");
    if (c->join)
        scen_para(s, "What ddpbench measured:", "nothing hung: --join was given, so the rank out of "
             "data shadowed the others (steps run/shadowed: %s).", steps);
    else
        scen_para(s, "What ddpbench measured:",
             "--no-join: the run ended after %.1f s (--timeout %g) with exit %d: %s. With --join "
             "the same run %s (steps run/shadowed: %s).",
             secs, c->timeout_s, rc, rc == DDP_OK ? "(it finished: no rank ran out of data)" : err,
             jrc == DDP_OK ? "trained to the end" : jerr, steps[0] ? steps : "none");
    scen_para(s, "The fix:",
         "wrap the training loop in torch.distributed.algorithms.Join([model]): a rank out of "
         "data shadows the others' all-reduces with zero gradients, as --join does here; or give "
         "every rank the same number of batches (DistributedSampler pads the data to equal "
         "shards, or cuts it with drop_last=True).");
    return scen_verdict(s, "uneven", !c->join && hung && secs < c->timeout_s + 5.0 && jrc == DDP_OK &&
                                    shadowed > 0,
                   c->join ? "--join was given: no rank left the loop"
                   : !hung ? "the ranks did not hang on the rank that ran out of data (are "
                             "the --rank-samples uneven?)"
                   : jrc != DDP_OK ? "the run with --join failed"
                                   : "no rank shadowed a step with --join");
}

// ---------------------------------------------------------------------------
// straggler: one slow rank, and every rank waits for it

static int sc_straggler(scen_t *s)
{
    config_t *c = &s->cfg;
    int slow = c->slow_rank;
    config_t *b = &s->alt[0];
    *b = *c;
    b->slow_rank = -1;
    run_result_t *both = s->run, *base = &both[0], *str = &both[1];
    char err[ERR_LEN];
    int rc = scen_run(b, &s->data, base, err);
    if (rc == DDP_OK)
        rc = scen_run(c, &s->data, str, err);
    if (scen_ended(s, rc, err, false))
        return 1;
    scen_para(s, "What PyTorch users see:",
         "nothing fails, and nothing says which rank is slow: every rank runs at the "
         "straggler's pace, because each all-reduce completes only when the last rank arrives. "
         "The fast ranks spend the difference waiting inside backward's all-reduce and before "
         "the optimizer (a profiler shows long nccl all-reduce kernels on the fast GPUs, short "
         "ones on the slow one), and GPU utilisation looks high everywhere, as NCCL's kernels "
         "spin while they wait.");
    fprintf(s->out, "  What ddpbench measured (per step; compute = forward, loss, backward; "
                    "waits = comm exposed + idle):\n");
    fprintf(s->out, "    %-8s %16s %16s %16s %16s\n", "rank", "compute alone", "waits alone",
            "compute slowed", "waits slowed");
    char a[32], bb[32], cc[32], dd[32], ee[32], w[32];
    int n = str->ndev;
    /* the fast ranks' waits, the machine's share apart (docs/results.md) */
    double fast_wait = 0.0, fast_wait0 = 0.0, fast_m = 0.0, fast_m0 = 0.0, off_all = 0.0;
    for (int d = 0; d < n; d++) {
        fprintf(s->out, "    %-8d %16s %16s %16s %16s%s\n", d, ms(a, sizeof a, compute_of(base, d)),
                ms(bb, sizeof bb, wait_of(base, d)), ms(cc, sizeof cc, compute_of(str, d)),
                ms(dd, sizeof dd, wait_of(str, d)),
                d == slow && c->slow_factor > 1 ? "   <- --slow-rank" : "");
        off_all += desched_of(base, d) + desched_of(str, d);
        if (d != slow && n > 1) {
            fast_wait += wait_of(str, d) / (n - 1);
            fast_wait0 += wait_of(base, d) / (n - 1);
            fast_m += machine_wait(str, d) / (n - 1);
            fast_m0 += machine_wait(base, d) / (n - 1);
        }
    }
    /* A busy machine: a rank another process held off its core made the
     * others wait for it; said when it shows. */
    if (off_all > 0.0) {
        fprintf(s->out, "    descheduled (another process had the core):");
        for (int d = 0; d < n; d++)
            fprintf(s->out, " rank %d %s alone, %s slowed%s", d,
                    ms(a, sizeof a, desched_of(base, d)), ms(bb, sizeof bb, desched_of(str, d)),
                    d + 1 < n ? ";" : "\n");
    }
    bool named = slow >= 0 && slow < n && c->slow_factor > 1;
    double extra = named ? compute_of(str, slow) - compute_of(base, slow) : 0.0;
    double slow_wait = named ? wait_of(str, slow) - machine_wait(str, slow) : 0.0;
    fprintf(s->out, "    throughput %.1f samples/s alone, %.1f with the straggler (%.2fx)\n",
            base->samples_per_s, str->samples_per_s,
            base->samples_per_s > 0 ? str->samples_per_s / base->samples_per_s : 0.0);
    /* the strategy's share of the growth: the waits less the machine's */
    double grew = (fast_wait - fast_m) - (fast_wait0 - fast_m0), grew_m = fast_m - fast_m0;
    char split[160] = "";
    if (grew_m > 0.05 * extra)
        snprintf(split, sizeof split, ": %s of it for the straggler, %s for a rank that was "
                 "descheduled (the machine's)", ms(dd, sizeof dd, grew), ms(w, sizeof w, grew_m));
    if (named)
        scen_para(s, "", "rank %d computed %s more per step; the other ranks' waits grew by %s to "
             "%s%s; rank %d itself waited %s beyond the machine's share: the ranks that wait "
             "are the fast ones.", slow, ms(a, sizeof a, extra),
             ms(bb, sizeof bb, fast_wait - fast_wait0), ms(cc, sizeof cc, fast_wait), split,
             slow, ms(ee, sizeof ee, slow_wait));
    scen_para(s, "The fix:",
         "find the rank whose compute takes longest (time forward and backward on every rank: "
         "torch.cuda.Event pairs or the profiler, per rank) and remove the cause: a slower or "
         "throttled GPU, a busy host, a slower data loader, a larger batch. The fast ranks' "
         "wait is the price of synchronous training: DDP can hide communication behind "
         "backward, never a slower rank.");
    bool shown = named && n > 1 && extra > 0 && grew >= 0.5 * extra &&
                 fast_wait - fast_m > 2.0 * slow_wait;
    /* the waits grew as the lesson says only with the machine's share in:
     * the machine's time decides it, not the straggler */
    bool busy = named && n > 1 && extra > 0 && !shown && grew + fmax(grew_m, 0.0) >= 0.5 * extra;
    const char *why = !named ? "no rank was slowed (--slow-rank R:F with F > 1)"
                      : n < 2 ? "one rank has no one to wait for"
                      : busy  ? "no verdict: a busy machine: the fast ranks' waits grew as much "
                                "as the straggler's extra work only with the time they waited "
                                "for a rank that was descheduled; run it on a quieter machine"
                              : "the other ranks did not wait for the slow one at the all-reduce";
    char slowed[48];
    snprintf(slowed, sizeof slowed, "ddp --slow-rank %d:%g", slow, c->slow_factor);
    const char *labels[2] = {"ddp", slowed};
    return scen_page(s, "straggler", shown, why, both, labels, 2);
}

// ---------------------------------------------------------------------------
// dp-device0: what DP's device 0 carries

/* dp-device0's memory lines: DP's devices, DDP's ranks, ZeRO-1's. */
static void dp_device0_memory(scen_t *s, const run_result_t *dp, const run_result_t *ddp,
                              const run_result_t *z)
{
    fprintf(s->out, "  What ddpbench measured (peak memory per device, by what it holds):\n");
    char label[48];
    int n = dp->ndev;
    for (int d = 0; d < n; d++) {
        snprintf(label, sizeof label, "dp device %d", d);
        scen_mem_line(s, label, dp, d);
    }
    for (int d = 0; n > 1 && d < ddp->ndev; d++) {
        snprintf(label, sizeof label, "ddp rank %d", d);
        scen_mem_line(s, label, ddp, d);
    }
    for (int d = 0; n > 1 && d < z->ndev; d++) {
        snprintf(label, sizeof label, "ddp --zero1 rank %d", d);
        scen_mem_line(s, label, z, d);
    }
}

/* DDP: the same optimizer state on every rank as DP's device 0; ZeRO-1:
 * about 1/world of it on each (a bucket's few leftover floats, count mod
 * world, are stepped by every rank), all of it over the ranks. */
static bool dp_device0_optim_split(const run_result_t *dp, const run_result_t *ddp,
                                   const run_result_t *z)
{
    size_t all = dp->dev[0].mem_split[MEM_OPTIM], zsum = 0;
    for (int d = 0; d < ddp->ndev; d++)
        if (ddp->dev[d].mem_split[MEM_OPTIM] != all)
            return false;
    for (int d = 0; d < z->ndev; d++) {
        size_t zo = z->dev[d].mem_split[MEM_OPTIM];
        zsum += zo;
        if ((double)zo > (double)all / dp->ndev * 1.01 + 4096.0)
            return false;
    }
    return zsum >= all;
}

static int sc_dp_device0(scen_t *s)
{
    config_t *c = &s->cfg;
    run_result_t *three = s->run, *dp = &three[0], *ddp = &three[1], *z = &three[2];
    char err[ERR_LEN];
    config_t *cd = &s->alt[0], *cz = &s->alt[1];
    *cd = *cz = *c;
    cd->mode = cz->mode = MODE_DDP;
    cd->sampler_replicas = cz->sampler_replicas = c->ngpus;
    cz->zero = 1;
    int rc = scen_run(c, &s->data, dp, err);
    if (rc == DDP_OK && c->ngpus > 1)
        rc = scen_run(cd, &s->data, ddp, err);
    if (rc == DDP_OK && c->ngpus > 1)
        rc = scen_run(cz, &s->data, z, err);
    if (scen_ended(s, rc, err, false))
        return 1;
    scen_para(s, "What PyTorch users see:",
         "nn.DataParallel keeps everything on its output device, GPU 0: the module and the "
         "optimizer state, the whole batch, the gathered outputs and the loss, the summed "
         "gradients. GPU 0 runs out of memory first (\"CUDA out of memory ... GPU 0\" while the "
         "other GPUs have room), works hardest, and the other GPUs wait for it every step. "
         "PyTorch's documentation recommends DistributedDataParallel instead, even on one "
         "machine.");
    dp_device0_memory(s, dp, ddp, z);
    char a[32], b[32], cc[32];
    int n = dp->ndev;
    double alone = per_step(dp, 0, PH_DATA) + per_step(dp, 0, PH_H2D) +
                   per_step(dp, 0, PH_LOSS) + per_step(dp, 0, PH_OPTIM);
    double idle = 0.0, idle_m = 0.0, other_mem = 0.0;
    size_t other_optim = 0;
    for (int d = 1; d < n; d++) { /* the others' idle, the machine's share apart */
        idle += per_step(dp, d, PH_IDLE) * (1.0 - machine_frac(dp, d)) / (n - 1);
        idle_m += per_step(dp, d, PH_IDLE) * machine_frac(dp, d) / (n - 1);
        other_mem = fmax(other_mem, (double)dp->dev[d].mem_peak);
        other_optim += dp->dev[d].mem_split[MEM_OPTIM];
    }
    double step = dp->times.n ? dp->times.timed_s / dp->times.n : 0.0;
    char mach[96] = "", iw[32];
    if (idle_m > 0.05 * step)
        snprintf(mach, sizeof mach, ", and %s more waiting for a device that was descheduled "
                 "(the machine's)", ms(a, sizeof a, idle_m));
    if (n > 1)
        scen_para(s, "", "per step of %s: device 0 alone staged the batch, computed the loss over it "
             "and stepped the optimizer for %s, while the other devices sat idle %s per step "
             "(waiting for it, and at the barriers)%s. DDP's ranks hold the same split each; "
             "with --zero1 each holds 1/%d of the optimizer state.",
             ms(cc, sizeof cc, step), ms(b, sizeof b, alone), ms(iw, sizeof iw, idle), mach, n);
    /* the fix in this run's own numbers: the most any device held */
    double ddp_mem = 0.0, z_mem = 0.0;
    for (int d = 0; n > 1 && d < ddp->ndev; d++)
        ddp_mem = fmax(ddp_mem, (double)ddp->dev[d].mem_peak);
    for (int d = 0; n > 1 && d < z->ndev; d++)
        z_mem = fmax(z_mem, (double)z->dev[d].mem_peak);
    char m0[32], m1[32], m2[32];
    mib(m0, sizeof m0, (double)dp->dev[0].mem_peak);
    if (n > 1)
        scen_para(s, "The fix:",
             "DistributedDataParallel: every rank holds and steps its own copy, so no device "
             "waits for a device 0 to step the optimizer; but each rank holds what DP's device 0 "
             "held (at most %s against %s here: DDP evens the load, not the memory). For the "
             "optimizer's memory, ZeroRedundancyOptimizer (ZeRO-1, --zero1 here) divides its "
             "state among the ranks: at most %s on a rank, %s less than DP's device 0.",
             mib(m1, sizeof m1, ddp_mem), m0, mib(m2, sizeof m2, z_mem),
             mib(cc, sizeof cc, (double)dp->dev[0].mem_peak - z_mem));
    bool shown = n > 1 && (double)dp->dev[0].mem_peak > other_mem && z_mem < dp->dev[0].mem_peak &&
                 dp->dev[0].mem_split[MEM_OPTIM] > 0 && other_optim == 0 && alone > 0 && idle + idle_m > 0;
    shown = shown && dp_device0_optim_split(dp, ddp, z);
    const char *why = n < 2 ? "one device has no others to compare with"
                            : "device 0 did not carry more memory and serial work than the "
                              "others, or DDP's ranks did not hold the same optimizer state, or "
                              "ZeRO-1's about 1/world of it";
    const char *labels[3] = {"dp", "ddp", "ddp --zero1"};
    return scen_page(s, "dp-device0", shown, why, three, labels, n > 1 ? 3 : 1);
}

// ---------------------------------------------------------------------------
// mismatch: a rank started on another job

static config_t g_other;  /* the odd rank's configuration (in the forked rank) */
static int g_odd_rank;

static const config_t *odd_rank(const config_t *cfg, int rank)
{
    return rank == g_odd_rank ? &g_other : cfg;
}

static int sc_mismatch(scen_t *s)
{
    config_t *c = &s->cfg;
    struct {
        const char *what, *torch;
        int field; /* 0: a wider hidden layer, 1: another learning rate */
    } cases[] = {
        {"a wider hidden layer (another model)", "DDP's constructor compares the parameters' "
         "shapes across ranks and raises \"RuntimeError: DDP expects same model across all "
         "ranks ...\"", 0},
        {"another learning rate", "nothing checks it: the ranks average gradients of different "
         "jobs and their replicas drift apart in silence", 1},
    };
    g_odd_rank = c->ngpus - 1;
    scen_para(s, "What PyTorch users see:",
         "each rank parses its own command line. A rank with another model fails in DDP's "
         "constructor, which compares only the parameters' shapes. Anything else -- a learning "
         "rate, a batch size, a seed, another data file -- passes unnoticed: the ranks average "
         "gradients of different jobs and drift apart without an error, and a rank with another "
         "number of steps leaves the others waiting in an all-reduce until the watchdog's "
         "timeout.");
    bool many = c->ngpus > 1, all = many;
    /* One rank has no other to differ from: changed, rank 0 would be the
     * run's reference itself, training another model than the one the
     * supervisor laid out the shared segment for (its final parameters
     * overran it: a rank killed by SIGSEGV, one run in twenty). */
    if (many)
        fprintf(s->out, "  What ddpbench measured (rank %d started with a change):\n", g_odd_rank);
    else
        fprintf(s->out, "  What ddpbench measured: nothing: one rank has no other rank to differ "
                        "from, so none was started with a change.\n");
    for (size_t i = 0; many && i < sizeof cases / sizeof cases[0]; i++) {
        g_other = *c;
        if (cases[i].field == 0 && g_other.ndims > 2)
            g_other.dims[1] += 8;
        else
            g_other.optim.lr *= 10.0f;
        run_result_t *r = &s->run[0];
        char err[ERR_LEN] = "";
        if (scen_ended(s, DDP_OK, "", true)) /* a signal before this run */
            return 1;
        double t0 = now_s();
        int rc = ddp_strategy.run_each(c, &s->data, odd_rank, r, err);
        double secs = now_s() - t0;
        result_free(r);
        /* refused at start-up is what it shows; trained is its verdict's */
        if (scen_ended(s, rc, err, rc == DDP_ERR_INPUT))
            return 1;
        char want[32];
        snprintf(want, sizeof want, "rank %d (device", g_odd_rank);
        bool caught = rc == DDP_ERR_INPUT && strstr(err, want) && strstr(err, "was started with");
        fprintf(s->out, "    %s: %s in %.2f s: %s\n", cases[i].what,
                caught ? "refused at start-up" : "NOT caught", secs,
                rc == DDP_OK ? "it trained" : err);
        fprintf(s->out, "      (PyTorch: %s)\n", cases[i].torch);
        all = all && caught && secs < c->timeout_s;
    }
    scen_para(s, "The fix:",
         "start every rank from one command and one configuration, and check it before "
         "training: ddpbench's ranks all-gather a fingerprint of their configuration and of "
         "their data at start-up and compare it with rank 0's (in PyTorch: "
         "dist.all_gather_object of a hash of the config and the dataset, before the first "
         "step).");
    return scen_verdict(s, "mismatch", all,
                   c->ngpus < 2 ? "one rank has no other rank to differ from"
                                : "a rank started on another job was not refused at start-up");
}

// ---------------------------------------------------------------------------
// the table of scenarios

static const struct {
    const char *name, *title, *options;
    int (*fn)(scen_t *);
    bool draws; /* its runs finish: --report draws them */
} scenarios[] = {
    {"uneven", "ranks with different amounts of data hang without join",
     "--backend cpu --mode ddp --gpus 0,1,2 --layers 6,10,3 --samples 60 --loss mse --batch 9 "
     "--epochs 1 --rank-samples 24,15,6 --no-join --timeout 2 --quiet",
     sc_uneven, false},
    {"straggler", "one slow rank: every DDP rank waits for it at the all-reduce",
     "--backend cpu --mode ddp --gpus 0,1 --model mlp-small --steps 40 --warmup-steps 4 "
     "--slow-rank 1:4 --quiet",
     sc_straggler, true},
    {"dp-device0", "DP's device 0 carries the optimizer, the batch and the loss",
     "--backend cpu --mode dp --gpus 0,1 --model mlp-small --steps 20 --quiet", sc_dp_device0,
     true},
    {"mismatch", "a rank started with another model or flags: caught at start-up and named",
     "--backend cpu --mode ddp --gpus 0,1,2 --layers 8,24,16,3 --loss mse --samples 240 "
     "--batch 24 --steps 10 --timeout 10 --quiet",
     sc_mismatch, false},
    {"set-epoch", "without sampler.set_epoch every epoch reads the same batches",
     "--backend cpu --mode ddp --gpus 0,1 --layers 16,32,4 --loss mse --samples 256 --batch 32 "
     "--epochs 4 --optim sgd --lr 0.05 --quiet",
     sc_set_epoch, false},
    {"loss-scale", "the loss averaged per rank and the gradients summed: world x accum too large",
     "--backend cpu --mode ddp --gpus 0,1,2,3 --accum 2 --layers 16,32,4 --loss mse --samples 512 "
     "--batch 64 --steps 4 --optim sgd --lr 0.05 --quiet",
     sc_loss_scale, false},
    {"no-sync", "no_sync left on for the all-reducing micro-batch: the replicas drift apart",
     "--backend cpu --mode ddp --gpus 0,1 --accum 2 --layers 16,32,4 --loss mse --samples 512 "
     "--batch 32 --steps 16 --optim sgd --lr 0.1 --check-replicas 1 --quiet",
     sc_no_sync, true},
    {"unused", "a branch leaves a layer out of one rank's loss: named by rank and step",
     "--backend cpu --mode ddp --gpus 0,1 --layers 16,32,32,4 --loss mse --samples 512 --batch 32 "
     "--steps 8 --quiet",
     sc_unused, false},
    {"collective-at-runtime", "one rank runs one collective more: named as it happens, no hang",
     "--backend cpu --mode ddp --gpus 0,1 --layers 16,32,4 --loss mse --samples 512 --batch 32 "
     "--steps 8 --timeout 2 --cuda-graph off --quiet",
     sc_collective, false},
    {"bucket-view", "DDP's buckets as views of the gradients, not copies: the memory saved",
     "--backend cpu --mode ddp --gpus 0,1 --model mlp-small --steps 10 --quiet", sc_bucket_view,
     true},
};
#define NSCEN ((int)(sizeof scenarios / sizeof scenarios[0]))

int scenario_main(int argc, char **argv, const char *name, FILE *out, char *msg)
{
    if (strcmp(name, "list") == 0) {
        for (int i = 0; i < NSCEN; i++)
            fprintf(out, "%-22s %s\n", scenarios[i].name, scenarios[i].title);
        return 0;
    }
    int i = 0;
    while (i < NSCEN && strcmp(scenarios[i].name, name) != 0)
        i++;
    if (i == NSCEN) {
        char names[256] = "";
        for (int k = 0; k < NSCEN; k++)
            snprintf(names + strlen(names), sizeof names - strlen(names), "%s, ",
                     scenarios[k].name);
        return err_set(msg, DDP_ERR_INPUT, "--scenario: unknown scenario '%.40s' (one of: "
                       "%slist)", name, names);
    }
    static scen_t s; /* static: it holds a config, the data and the runs */
    memset(&s, 0, sizeof s);
    for (int k = 0; k < (int)(sizeof s.run / sizeof s.run[0]); k++)
        result_init(&s.run[k]);
    s.out = out;
    int rc = setup(&s, scenarios[i].options, argc, argv);
    /* --report draws the runs of a scenario that finishes them */
    if (rc == DDP_OK && s.cfg.report_path[0] && !scenarios[i].draws)
        rc = err_set(s.err, DDP_ERR_INPUT, "--report: this scenario's runs do not finish, so "
                     "there is no step to draw (straggler, dp-device0, no-sync and "
                     "bucket-view draw theirs)");
    else if (rc == DDP_OK && s.cfg.report_path[0])
        rc = report_page_check(s.cfg.report_path, s.err);
    if (rc != DDP_OK) {
        if (s.loaded)
            data_free(&s.data);
        return err_set(msg, rc == DDP_ERR_INPUT ? DDP_ERR_INPUT : DDP_ERR_RUNTIME,
                       "--scenario %.40s: %.400s", name, s.err);
    }
    fprintf(out, "scenario %s: %s\n", scenarios[i].name, scenarios[i].title);
    fflush(out);
    rc = scenarios[i].fn(&s);
    data_free(&s.data);
    for (int k = 0; k < (int)(sizeof s.run / sizeof s.run[0]); k++)
        result_free(&s.run[k]);
    if (s.ended) { /* a signal, or a run that failed: as any run says it (main.c) */
        fflush(out);
        return err_set(msg, s.ended, "--scenario %s: %.400s", scenarios[i].name, s.err);
    }
    return rc;
}
