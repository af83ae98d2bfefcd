/* app/cmdline/cmdline.h: the program's command line: the run's options
 * (common/config), the gate's (gate/options.h) and the program's own below,
 * each table filling its own part, in one parse and one --help. */
#ifndef DDPBENCH_CMDLINE_H
#define DDPBENCH_CMDLINE_H

#include "common/config/opt_table.h"
#include "gate/options.h"

/* What the program alone reads of the command line. */
typedef struct {
    char scenario[32];                  /* --scenario NAME: a failure reproduced, explained */
    double mem_limit;                   /* --mem-limit BYTES: each device's memory (0: none) */
    char emit_pytorch[CONFIG_PATH_LEN]; /* --emit-pytorch FILE.py: the PyTorch twin */
    char hardware[CONFIG_PATH_LEN];     /* --hardware NAME|FILE: a GPU box modelled (predict/) */
    char workload[CONFIG_PATH_LEN];     /* --workload NAME|FILE: its model, nothing trained */
} app_opts_t;

extern const opt_table_t app_options;

/* The program's command line over run, gate and app. */
void cmdline_init(config_line_t *l, config_t *run, gate_opts_t *gate, app_opts_t *app);

#endif
