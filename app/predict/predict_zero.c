/* app/predict/predict_zero.c: --predict's model of DDP's ZeRO stages on 1..8 devices: the
 * bytes each rank moves per step, their time on the measured ring, each stage's memory per
 * device and, under --mem-limit, the crossover (docs/results.md, "--predict and the ZeRO
 * stages", gives each formula). */
#include "app/predict/predict.h"

static double mib(double b) { return b / 1048576.0; }

void predict_zero_table(FILE *f, const config_t *c, double mem_limit, const model_spec_t *s,
                        int tgt_cols, const predict_in_t *in, const strategy_t *ddp)
{
    double P = (double)s->nparams * sizeof(float);
    bool timed = in->all_reduce && in->k0 >= 2;
    char err[ERR_LEN];
    fprintf(f, "\n  ZeRO stages (--predict): per rank and step; bytes moved on a ring of k "
               "(ddp, zero-1, zero-2: 2(k-1)/k x the parameters' %.2f MiB, zero-3: 3(k-1)/k)\n",
            mib(P));
    fprintf(f, "  %7s %10s %10s %11s %11s %9s %9s %9s %9s\n", "devices", "ddp MiB", "zero-3 MiB",
            timed ? "ddp ms" : "", timed ? "zero-3 ms" : "", "ddp mem", "zero-1", "zero-2",
            "zero-3");
    double mem[PREDICT_MAX_DEVICES + 1][4] = {{0}}, acts[PREDICT_MAX_DEVICES + 1] = {0};
    for (int k = 1; k <= PREDICT_MAX_DEVICES; k++) {
        double ring = (double)(k - 1) / k;
        acts[k] = replica_act_bytes(s, (c->batch + k - 1) / k, tgt_cols);
        for (int st = 0; st <= 3; st++) {
            config_t cz = *c;
            cz.zero = st;
            strategy_mem_t z;
            if (ddp->mem(s, &cz, k, 0, &z, err) != DDP_OK)
                return;
            mem[k][st] = z.params + z.grads + z.optim;
        }
        char t0[16] = "", t3[16] = "";
        if (timed) {
            double ar = predict_all_reduce_s(in, k, P);
            snprintf(t0, sizeof t0, "%.3f", ar * 1e3);
            snprintf(t3, sizeof t3, "%.3f", 1.5 * ar * 1e3);
        }
        fprintf(f, "  %7d %10.2f %10.2f %11s %11s %9.2f %9.2f %9.2f %9.2f\n", k, mib(2 * ring * P),
                mib(3 * ring * P), t0, t3, mib(mem[k][0] + acts[k]), mib(mem[k][1] + acts[k]),
                mib(mem[k][2] + acts[k]), mib(mem[k][3] + acts[k]));
    }
    fprintf(f, "  (memory: MiB per device, parameters + gradients + optimizer state as the ranks "
               "allocate them, and the activations of ceil(batch/k) rows)\n");
    double lim = mem_limit;
    if (lim <= 0) {
        fprintf(f, "  give --mem-limit BYTES for the crossover: the models that fit ZeRO-3 and "
                   "not DDP\n");
        return;
    }
    /* the largest scale of this model each stage holds within the limit */
    int k = c->ngpus >= 2 && c->ngpus <= PREDICT_MAX_DEVICES ? c->ngpus : 2;
    double smax[4];
    for (int st = 0; st <= 3; st++)
        smax[st] = lim > acts[k] ? (lim - acts[k]) / mem[k][st] : 0.0;
    fprintf(f, "  --mem-limit %.2f MiB on %d devices: this model (%zu parameters) scaled by s fits "
               "up to s = ddp %.2f, zero-1 %.2f, zero-2 %.2f, zero-3 %.2f\n",
            mib(lim), k, s->nparams, smax[0], smax[1], smax[2], smax[3]);
    if (smax[3] > smax[0])
        fprintf(f, "  crossover: from %.3g to %.3g parameters a model fits ZeRO-3 and not "
                   "DDP%s\n",
                smax[0] * (double)s->nparams, smax[3] * (double)s->nparams,
                smax[0] < 1.0 && smax[3] >= 1.0 ? " (this one among them)" : "");
}
