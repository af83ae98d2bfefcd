/* app/scenario_set_epoch.c: --scenario set-epoch, a DDP run over several
 * epochs whose DistributedSampler is never told the epoch (every epoch
 * reads epoch 0's order: data/schedule.c's planted seam), against the same
 * run with set_epoch, each rank's micro-batches held against the ones at
 * their place an epoch before; and single for the loss. */
#include <math.h>
#include <string.h>

#include "app/scenario_impl.h"

/* The lowest and highest share of a rank's micro-batches that repeated the
 * epoch before's; false when a rank compared none. */
static bool shares(const run_result_t *r, double *lo, double *hi, char *line, size_t n)
{
    *lo = 1.0;
    *hi = 0.0;
    line[0] = 0;
    for (int d = 0; d < r->ndev; d++) {
        const device_stats_t *v = &r->dev[d];
        if (v->batches_compared == 0)
            return false;
        double f = (double)v->batches_repeated / (double)v->batches_compared;
        *lo = fmin(*lo, f);
        *hi = fmax(*hi, f);
        snprintf(line + strlen(line), n - strlen(line), "%srank %d %ld of %ld (%.0f%%)",
                 d ? ", " : "", d, v->batches_repeated, v->batches_compared, 100.0 * f);
    }
    return true;
}

int sc_set_epoch(scen_t *s)
{
    run_result_t *r = s->run, *wrong = &r[0], *right = &r[1], *one = &r[2];
    char err[ERR_LEN], lw[256], lr[256];
    int rc = scen_run(scen_variant(s, 0, MODE_DDP, (plant_t){.kind = PLANT_SAME_ORDER}, WATCH_BATCHES),
                      &s->data, wrong, err);
    if (rc == DDP_OK)
        rc = scen_run(scen_variant(s, 1, MODE_DDP, (plant_t){0}, WATCH_BATCHES), &s->data, right,
                      err);
    if (rc == DDP_OK)
        rc = scen_run(scen_variant(s, 2, MODE_SINGLE, (plant_t){0}, 0), &s->data, one, err);
    if (scen_ended(s, rc, err, false))
        return 1;
    double wlo, whi, rlo, rhi;
    bool cw = shares(wrong, &wlo, &whi, lw, sizeof lw), cr = shares(right, &rlo, &rhi, lr, sizeof lr);
    bool compared = cw && cr;
    scen_para(s, "What PyTorch users see:",
              "nothing. DistributedSampler shuffles with seed + epoch, and its epoch changes only "
              "when the loop calls sampler.set_epoch(epoch); without the call every epoch is "
              "epoch 0: each rank reads the same batches in the same order every epoch. The loss "
              "still falls, a little differently (pytorch#31771; fixed in DALLE-pytorch, SimCLR, "
              "ParallelWaveGAN and more), and nothing tells.");
    scen_para(s, "What ddpbench measured:",
              "over %ld epochs, each rank's micro-batches that held the same samples as the one "
              "at their place an epoch before: without set_epoch %s; with it %s. Mean loss over "
              "the data after training: single %.6f, DDP with set_epoch %.6f, without %.6f "
              "(single and DDP read the same samples step by step only with it).",
              wrong->epochs, lw, lr, scen_data_loss(s, one), scen_data_loss(s, right),
              scen_data_loss(s, wrong));
    scen_para(s, "The fix:",
              "call train_sampler.set_epoch(epoch) at the start of every epoch, before iterating "
              "the DataLoader (ddpbench's sampler does it: seed + epoch).");
    return scen_verdict(s, "set-epoch", compared && wlo >= 1.0 && rhi < 0.05,
                        !compared ? "no rank ran two epochs to compare (--epochs 2 or more)"
                        : wlo < 1.0 ? "without set_epoch a rank read other batches (planted "
                                      "mistake left out?)"
                                    : "with set_epoch the batches repeated (--no-shuffle?)");
}
