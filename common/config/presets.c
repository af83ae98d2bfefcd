/* common/config/presets.c: the --model presets (a model, loss, optimizer and data). */
#include <stdio.h>
#include <string.h>

#include "common/base/status.h"
#include "common/config/config.h"

typedef struct {
    const char *name;
    const char *about;
    const char *layers;
    act_t act;
    loss_t loss;
    optim_kind_t optim;
    float lr, momentum;
    long samples;
    int batch;
    long epochs;
    long steps;
} preset_t;

static const preset_t presets[] = {
    {"seed-linear", "Linear(10,10)+MSE: the DDP article's demo (docs/options.md)", "10,10",
     ACT_RELU, LOSS_MSE, OPTIM_SGD, 0.001f, 0.0f, 400, 20, 10, 0},
    {"seed-logreg", "Linear(10,1)+BCE: the DP vs DDP article's demo (docs/options.md)",
     "10,1", ACT_RELU, LOSS_BCE, OPTIM_SGD, 0.01f, 0.0f, 100, 10, 10, 0},
    {"mlp-small", "64-512-512-10 GELU classifier, batch 256: trains in seconds on a CPU",
     "64,512,512,10", ACT_GELU, LOSS_CE, OPTIM_ADAM, 0.003f, 0.0f, 8192, 256, 2, 0},
    {"mlp-medium", "1024-2048-2048-1024 regression, batch 256: the CPU performance model",
     "1024,2048,2048,1024", ACT_RELU, LOSS_MSE, OPTIM_SGD, 0.01f, 0.9f, 8192, 256, 1, 0},
    {"mlp-large", "4096-8192x3-4096 (~200M params), batch 2048: sized for GPU benchmarks",
     "4096,8192,8192,8192,4096", ACT_GELU, LOSS_MSE, OPTIM_ADAMW, 0.0001f, 0.0f, 16384, 2048, 1,
     0},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

int config_apply_preset(config_t *c, const char *name, char *err)
{
    for (int i = 0; i < NPRESETS; i++) {
        const preset_t *p = &presets[i];
        if (strcmp(p->name, name) != 0)
            continue;
        snprintf(c->model_name, sizeof c->model_name, "%s", p->name);
        TRY(config_parse_int_list(p->layers, c->dims, MODEL_MAX_LAYERS + 1, &c->ndims, "layers",
                                  true, err));
        c->act = p->act;
        c->loss = p->loss;
        c->optim.kind = p->optim;
        c->optim.lr = p->lr;
        c->optim.momentum = p->momentum;
        c->samples = p->samples;
        c->batch = p->batch;
        c->epochs = p->epochs;
        c->steps = p->steps;
        return DDP_OK;
    }
    char names[256] = "";
    for (int i = 0; i < NPRESETS; i++) {
        strncat(names, presets[i].name, sizeof names - strlen(names) - 3);
        if (i + 1 < NPRESETS)
            strcat(names, ", ");
    }
    return err_set(err, DDP_ERR_INPUT, "--model: unknown preset '%s' (one of: %s)", name, names);
}

void config_presets_usage(FILE *f)
{
    fprintf(f, "\nPresets (--model; the options marked [preset] take their default from it):\n");
    for (int i = 0; i < NPRESETS; i++) {
        const preset_t *p = &presets[i];
        fprintf(f, "  %-12s %s\n", p->name, p->about);
        fprintf(f, "  %-12s --layers %s --act %s --loss %s --optim %s --lr %g", "", p->layers,
                act_name(p->act), loss_name(p->loss), optim_name(p->optim), (double)p->lr);
        if (p->momentum != 0.0f)
            fprintf(f, " --momentum %g", (double)p->momentum);
        fprintf(f, "\n  %-12s --samples %ld --batch %d --epochs %ld\n", "", p->samples, p->batch,
                p->epochs);
    }
}
