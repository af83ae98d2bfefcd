/* app/scenario_loss_scale.c: --scenario loss-scale, DDP whose loss is the
 * mean over each rank's micro-batch and whose gradients are summed over the
 * ranks and the micro-batches (ddp/plant.c rescales each loss's gradient),
 * against single: the first step's gradient is world x accum times single's;
 * then the right scaling, the same parameters as single. */
#include <math.h>

#include "app/report/report.h"
#include "app/scenario_impl.h"

int sc_loss_scale(scen_t *s)
{
    run_result_t *r = s->run, *one = &r[0], *wrong = &r[1], *right = &r[2];
    char err[ERR_LEN];
    int rc = scen_run(scen_variant(s, 0, MODE_SINGLE, (plant_t){0}, WATCH_GRAD), &s->data, one, err);
    if (rc == DDP_OK)
        rc = scen_run(scen_variant(s, 1, MODE_DDP, (plant_t){.kind = PLANT_RANK_MEAN}, WATCH_GRAD),
                      &s->data, wrong, err);
    if (rc == DDP_OK)
        rc = scen_run(scen_variant(s, 2, MODE_DDP, (plant_t){0}, WATCH_GRAD), &s->data, right, err);
    if (scen_ended(s, rc, err, false))
        return 1;
    const config_t *c = &s->cfg;
    double want = (double)c->ngpus * c->accum, g1 = one->dev[0].grad_norm;
    double ratio = wrong->dev[0].grad_norm / g1, ok = right->dev[0].grad_norm / g1;
    double apart = max_rel_diff(right->params, one->params, one->nparams, REPORT_REL_FLOOR);
    scen_para(s, "What PyTorch users see:",
              "nothing fails. The loss is averaged over each rank's own batch, DDP averages the "
              "gradients over the ranks, and gradient accumulation adds micro-batches up; code "
              "that sums where DDP averages, or forgets to divide by the micro-batches, trains "
              "with a gradient world x accumulation times too large, as a learning rate that "
              "large would (NVIDIA-NeMo/Automodel PR #3830 measured 8.00x = dp x grad_acc; "
              "transformers PRs #34191 and #35438, issue #37766; fastai #3023). With Adam the "
              "scale mostly cancels, with SGD it does not, and either way the run is not the "
              "one the hyper-parameters were tuned for.");
    scen_para(s, "What ddpbench measured:",
              "the first step's gradient (its norm) against single's on the same global batch: "
              "with the loss averaged per rank and the gradients summed over %d ranks and %d "
              "micro-batches %.6f times single's (world x accumulation = %.0f, off by %.1e); "
              "with the loss over the global rows %.6f. After %ld steps the right scaling's "
              "parameters are single's to %.1e (largest relative difference).",
              c->ngpus, c->accum, ratio, want, fabs(ratio / want - 1.0), ok, right->steps, apart);
    scen_para(s, "The fix:",
              "divide each micro-batch's loss by the global batch (or average it per rank and "
              "let DDP average over the ranks) and by the accumulation steps: loss = "
              "loss_fn(out, y) / accum, with DDP's own averaging left on; check the first "
              "step's gradient against one device on the same batch.");
    bool shown = want > 1.0 && fabs(ratio / want - 1.0) <= 1e-6 && apart <= 1e-5;
    return scen_verdict(s, "loss-scale", shown,
                        want <= 1.0 ? "one rank and one micro-batch: the mean per rank is the mean"
                        : apart > 1e-5 ? "the right scaling did not match single to 1e-5"
                                       : "the gradient was not world x accumulation times "
                                         "single's (planted mistake left out?)");
}
