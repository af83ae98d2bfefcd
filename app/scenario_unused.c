/* app/scenario_unused.c: --scenario unused, one rank takes a branch from
 * step S that leaves its first layer out of the loss (ddp/plant.c stops its
 * backward above it): DDP's reducer finds the parameters that got no
 * gradient when backward ends and names them, the rank and the step; the
 * run without the branch trains. */
#include <stdio.h>
#include <string.h>

#include "common/base/clock.h"
#include "app/scenario_impl.h"

#define UNUSED_RANK 1
#define UNUSED_STEP 3

int sc_unused(scen_t *s)
{
    run_result_t *r = &s->run[0];
    char err[ERR_LEN] = "", rerr[ERR_LEN];
    plant_t p = {.kind = PLANT_DETACH, .rank = UNUSED_RANK, .step = UNUSED_STEP, .layer = 1};
    double t0 = now_s();
    int rc = scen_run(scen_variant(s, 0, MODE_DDP, p, 0), &s->data, r, err);
    double secs = now_s() - t0;
    if (scen_ended(s, rc, err, rc == DDP_ERR_RUNTIME))
        return 1;
    int rrc = scen_run(scen_variant(s, 1, MODE_DDP, (plant_t){0}, 0), &s->data, r, rerr);
    if (scen_ended(s, rrc, rerr, false))
        return 1;
    long steps = r->steps;
    scen_para(s, "What PyTorch users see:",
              "a parameter that takes no part in a rank's loss gets no gradient there, so DDP's "
              "bucket that holds it is never ready and never all-reduced. The next iteration "
              "stops on that rank: \"RuntimeError: Expected to have finished reduction in the "
              "prior iteration before starting a new one. This error indicates that your module "
              "has parameters that were not used in producing loss\" (pytorch#43259, #57473; "
              "YOLOX #885, mmdet3d #488), naming the parameters' indices only under "
              "TORCH_DISTRIBUTED_DEBUG. find_unused_parameters=True avoids the error by walking "
              "the autograd graph from the outputs after every forward (a cost on every step, "
              "whether or not anything is unused) and all-reducing zeros for what it did not "
              "reach.");
    scen_para(s, "What ddpbench measured:",
              "rank %d left layer 1 out of its loss from step %d (a branch that detaches it): the "
              "run stopped after %.2f s, exit %d: %s. Without the branch it trained %ld steps.",
              UNUSED_RANK, UNUSED_STEP + 1, secs, rc, rc ? err : "it trained", steps);
    scen_para(s, "The fix:",
              "make every rank's loss use every parameter in every step (the same branch on "
              "every rank, or a term like 0 * p.sum() for the ones a branch skips); when the set "
              "of unused parameters is fixed, static_graph=True; find_unused_parameters=True "
              "only when it truly varies, and pay its graph walk per step.");
    char want[96];
    snprintf(want, sizeof want, "rank %d (device", UNUSED_RANK);
    bool shown = rc == DDP_ERR_RUNTIME && strstr(err, want) && strstr(err, "step 4:") &&
                 strstr(err, "layer 1 weight, layer 1 bias no gradient") && rrc == DDP_OK;
    return scen_verdict(s, "unused", shown,
                        s->cfg.ngpus <= UNUSED_RANK ? "there is no rank 1 to take the branch"
                                                    : "the parameters without a gradient were "
                                                      "not named by rank and step (planted "
                                                      "mistake left out?)");
}
