/* common/train/bookends.c: what every strategy does just before its loop
 * (the starting parameters, the steps it runs, what it trains on) and just
 * after it (the final parameters, each device's skew, the story's copies,
 * the figures), each step's start on the meter, from the schedule (see
 * trainer.h), and the table of each mode's words (strategy.h). */
#include "common/io/checkpoint.h"
#include "common/measure/step_meter.h"
#include "common/train/strategy.h"
#include "common/train/trainer.h"

int trainer_initial_params(const config_t *c, const model_spec_t *spec, float *host, char *err)
{
    if (c->init_path[0])
        return ckpt_load_weights(c->init_path, "--init", spec, host, err);
    model_init_params(spec, c->seed, host);
    return DDP_OK;
}

void trainer_begin(run_result_t *res, const config_t *c, const schedule_t *sch)
{
    res->steps = sch->total_steps - sch->start_step; /* --resume starts later */
    res->warmup_steps = schedule_warmup(sch);
    res->epochs = sch->epochs;
    /* what it trained on, for compare's verdict to tell rounding from a
     * real difference */
    res->optim = c->optim.kind;
    res->lr = c->optim.lr;
    res->precision = c->precision; /* bf16 has its own agreement */
    res->stream_replicas = c->nrank_samples ? 0 : config_stream_ranks(c);
    res->epoch_samples = schedule_epoch_samples(sch);
}

void trainer_step_begin(step_meter_t *m, const schedule_t *sch, long g)
{
    size_t rows = schedule_step_rows(sch, g);
    /* the device's peak again, in the last warm-up step: a second window,
     * apart from the first, for a busy machine to miss (step_meter.h) */
    if (!schedule_timed(sch, g) && schedule_timed(sch, g + 1))
        step_meter_peak(m);
    step_meter_begin(m, g, schedule_timed(sch, g), g == schedule_told_step(sch));
    step_meter_plan(m, &(step_end_t){.samples = (long)schedule_view_rows(sch, g),
                                     .global_samples = (long)rows,
                                     .total = sch->total_steps,
                                     .epoch = schedule_epoch_of(sch, g),
                                     .logs = schedule_logs(sch, g),
                                     .denom = (double)rows});
}

void trainer_end(run_result_t *res, size_t nparams, float *params)
{
    res->nparams = nparams;
    res->params = params;
    step_meter_skew(res);
    step_meter_story_merge(res); /* --explain: every device's copies in the told step */
    result_finish(res);
}

strategy_mem_t strategy_mem_whole(const model_spec_t *s, const config_t *c, bool steps)
{
    double P = (double)s->nparams * sizeof(float);
    int states = c->optim.kind == OPTIM_SGD ? (c->optim.momentum != 0.0f) : 2;
    return (strategy_mem_t){P, P, steps ? states * P : 0.0};
}

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
