/* app/report/report_verdict.c: the words around compare's equivalence
 * verdict: which samples every mode read and, when parameters differ, the
 * cause: another sample stream, ReLU's kink, or a real difference. */
#include "app/report/report.h"

/* The DistributedSampler's samples an epoch over R replicas (sampler.h). */
static long sampler_total(long n, int R, bool drop_last)
{
    return drop_last && n % R ? n / R * R : (n + R - 1) / R * R;
}

/* Samples an epoch of micro-batches of B rows trains on (schedule.h). */
static long consumed(long n, int R, int B, bool drop_last)
{
    long total = sampler_total(n, R, drop_last);
    return drop_last ? total / B * B : total;
}

/* "DistributedSampler over 3 ranks pads 100 samples to 102, repeating the first 2" */
static void app_sampler(char *buf, size_t len, size_t *used, long n, int R, bool drop_last)
{
    long total = sampler_total(n, R, drop_last);
    if (total > n)
        report_appendf(buf, len, used,
            "DistributedSampler over %d ranks pads %ld samples to %ld, repeating the first %ld "
            "each epoch",
            R, n, total, total - n);
    else if (total < n)
        report_appendf(buf, len, used,
            "DistributedSampler over %d ranks with --drop-last cuts %ld samples to %ld, leaving "
            "%ld out each epoch",
            R, n, total, n - total);
    else
        report_appendf(buf, len, used, "DistributedSampler over %d ranks deals %ld samples evenly", R, n);
}

void report_stream_note(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *ref)
{
    size_t used = 0;
    buf[0] = 0;
    const config_t *c = ctx ? ctx->cfg : NULL;
    if (!c || !ctx->data)
        return;
    long n = (long)ctx->data->n;
    if (c->batch_per_device)
        report_appendf(buf, len, &used,
            "batch: --batch-per-device %d on %d devices makes the global batch %d (%d x %d), "
            "which single runs whole; the gradient is the mean over %d rows, so lr %g moves "
            "the model once per %d samples where one device at batch %d would move it once per "
            "%d (the linear scaling rule would use lr %g for the same progress per sample).\n",
            c->batch_per_device, c->batch / c->batch_per_device, c->batch, c->batch_per_device,
            c->batch / c->batch_per_device, c->batch, c->optim.lr, c->batch,
            c->batch_per_device, c->batch_per_device,
            c->optim.lr * (double)(c->batch / c->batch_per_device));
    if (c->nrank_samples) {
        long sum = 0;
        for (int r = 0; r < c->nrank_samples; r++)
            sum += c->rank_samples[r];
        report_appendf(buf, len, &used,
            "samples: every rank reads its own shard (--rank-samples: %ld of the %ld samples); "
            "single and dp read the ranks' micro-batches end to end, step by step, %ld samples "
            "an epoch, and a rank out of data shadows the others' steps (--join).\n",
            sum, n, ref ? ref->epoch_samples : sum);
    } else if (ref && ref->stream_replicas > 1 && n % ref->stream_replicas != 0) {
        report_appendf(buf, len, &used, "samples: ");
        app_sampler(buf, len, &used, n, ref->stream_replicas, c->drop_last);
        report_appendf(buf, len, &used,
            "; single and dp read the same stream, so every mode trains on the same samples%s.\n",
            c->drop_last ? "" : " (--drop-last would cut it instead)");
    }
    while (used > 0 && buf[used - 1] == '\n')
        buf[--used] = 0;
}

/* "ddp trained on 102 samples an epoch: DistributedSampler ..." for run r */
static void app_run_stream(char *buf, size_t len, size_t *used, const run_result_t *r, long n,
                           bool drop_last)
{
    report_appendf(buf, len, used, "%s trained on %ld samples an epoch: ", mode_name(r->mode),
        r->epoch_samples);
    if (r->stream_replicas == 0)
        report_appendf(buf, len, used, "each rank its own shard");
    else if (r->stream_replicas == 1)
        report_appendf(buf, len, used, "the data as it is, no sampler padding (--sampler-replicas 1)");
    else
        app_sampler(buf, len, used, n, r->stream_replicas, drop_last);
}

void report_differ_cause(char *buf, size_t len, const report_ctx_t *ctx, const run_result_t *r,
                         const run_result_t *ref, bool relu_said)
{
    size_t used = 0;
    buf[0] = 0;
    const config_t *c = ctx ? ctx->cfg : NULL;
    long n = ctx && ctx->data ? (long)ctx->data->n : 0;
    bool other_stream = r->epoch_samples != ref->epoch_samples ||
                        (r->stream_replicas == 0) != (ref->stream_replicas == 0);
    if (other_stream) {
        report_appendf(buf, len, &used, "(not the same samples: ");
        app_run_stream(buf, len, &used, r, n, c && c->drop_last);
        report_appendf(buf, len, &used, "; ");
        app_run_stream(buf, len, &used, ref, n, c && c->drop_last);
        report_appendf(buf, len, &used,
            ". Without --sampler-replicas compare gives single and dp ddp's stream");
        /* would --drop-last cut both streams to the same samples? */
        if (c && !c->drop_last && r->stream_replicas > 0 && ref->stream_replicas > 0 &&
            consumed(n, r->stream_replicas, c->batch, true) ==
                consumed(n, ref->stream_replicas, c->batch, true))
            report_appendf(buf, len, &used, "; --drop-last would make the streams equal here");
        report_appendf(buf, len, &used, ".)");
        return;
    }
    bool relu = c && c->act == ACT_RELU && ctx->spec && ctx->spec->nlayers > 1;
    if (relu) {
        if (!relu_said)
            report_appendf(buf, len, &used,
                "(the same samples: ReLU's kink: a pre-activation within rounding of 0 can take "
                "the other branch in one mode, after which the runs drift apart; the contract "
                "holds for smooth activations: try --act gelu)");
        return;
    }
    report_appendf(buf, len, &used,
        "(the same samples and a smooth model: more than the rounding of another summation "
        "order, so the modes trained differently)");
}
