/* common/train/strategy.c: each strategy's words and shape, as the outputs
 * show its runs (strategy.h): the one table indexed by the mode. */
#include "common/train/strategy.h"

static const strategy_words_t words[] = {
    [MODE_SINGLE] = {.title = "single", .member = "device", .css = "single",
                     .graphs = "on: each full step after the first is one graph launch",
                     .pytorch = "one device", .reference = true},
    [MODE_DP] = {.title = "DP", .member = "device", .lane = "copies", .css = "dpline", .dx = -5,
                 .phase = {[PH_LOSS] = "gather+loss", [PH_COMM_EXPOSED] = "reduce"},
                 .graphs = "on: each full step after the first is one graph launch, of every "
                           "device",
                 .pytorch = "nn.DataParallel", .lead = true},
    [MODE_DDP] = {.title = "DDP", .member = "rank", .lane = "comm", .css = "ddpline", .dx = 5,
                  .graphs = "on: each full step after the first is one graph launch per rank",
                  .pytorch = "DDP", .ranks = true},
    /* not strategies: compare runs the three, comm none */
    [MODE_COMPARE] = {.title = "compare", .member = "device", .css = "single"},
    [MODE_COMM] = {.title = "comm", .member = "rank", .css = "single"},
};

const strategy_words_t *strategy_words(mode_t_ m)
{
    return &words[m <= MODE_COMM ? m : MODE_SINGLE];
}
