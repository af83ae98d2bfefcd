/* ddp/ddp.c: the DistributedDataParallel strategy (not built yet). */
#include "strategy.h"

int ddp_run(const config_t *cfg, const dataset_t *data, run_result_t *res, char *err)
{
    (void)cfg, (void)data;
    result_init(res);
    return err_set(err, DDP_ERR_INPUT, "--mode ddp: not built yet");
}
