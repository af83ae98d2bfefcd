/* app/report/report_trace.c: --trace FILE, the recorders of trace.h as Chrome
 * trace event JSON: one process per (run, device), threads "compute" and
 * "comm", each run's clock from its first event.  Written through
 * base/atomic_file.h: a reader never sees half a trace. */

#include "common/base/atomic_file.h"
#include "app/report/report.h"

int report_trace_check(const char *path, char *err)
{
    int rc = afile_check(path, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--trace %s", path);
}

/* A JSON string (names come from fixed tables and /proc, but escape anyway). */
static void put_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static double run_origin(const run_result_t *r)
{
    double t0 = 0.0;
    bool any = false;
    for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
        const trace_rec_t *t = r->trace[d];
        for (uint32_t i = 0; t && i < t->n; i++)
            if (!any || t->ev[i].t_begin < t0) {
                t0 = t->ev[i].t_begin;
                any = true;
            }
    }
    return t0;
}

static void event_name(char *buf, size_t n, mode_t_ mode, const trace_event_t *e)
{
    trace_kind_t k = (trace_kind_t)e->kind;
    if (k < (trace_kind_t)PH_COUNT)
        snprintf(buf, n, "%s", report_phase_label(mode, (phase_t)k));
    else if (k == TR_STEP)
        snprintf(buf, n, "step %d", e->step);
    else if (k == TR_ALLREDUCE || k == TR_REDUCE_SCATTER)
        snprintf(buf, n, "%s bucket %d", trace_kind_name(k), e->bucket);
    else if (e->peer >= 0)
        snprintf(buf, n, "%s %s %d", trace_kind_name(k), k == TR_GATHER || k == TR_REDUCE ? "from" : "to",
                 e->peer);
    else
        snprintf(buf, n, "%s", trace_kind_name(k));
}

static uint64_t write_events(FILE *f, const run_result_t *runs, int n, bool *first)
{
    uint64_t dropped = 0;
    for (int ri = 0; ri < n; ri++) {
        const run_result_t *r = &runs[ri];
        double t0 = run_origin(r);
        for (int d = 0; d < r->ndev && d < MAX_DEVICES; d++) {
            const trace_rec_t *t = r->trace[d];
            if (!t)
                continue;
            dropped += t->dropped;
            int pid = ri * 1000 + d + 1;
            char name[256], dev[160];
            report_device_name(dev, sizeof dev, r->backend, &r->dev[d]);
            snprintf(name, sizeof name, "%s: %s", mode_name(r->mode), dev);
            fprintf(f, "%s\n{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":%d,\"tid\":0,"
                       "\"args\":{\"name\":",
                    *first ? "" : ",", pid);
            put_str(f, name);
            fprintf(f, "}},\n{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":%d,\"tid\":0,"
                       "\"args\":{\"sort_index\":%d}}",
                    pid, pid);
            static const char *const lanes[LANE_COUNT] = {"compute", "comm"};
            for (int l = 0; l < LANE_COUNT; l++)
                fprintf(f, ",\n{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":%d,\"tid\":%d,"
                           "\"args\":{\"name\":\"%s\"}}",
                        pid, l, lanes[l]);
            *first = false;
            for (uint32_t i = 0; i < t->n; i++) {
                const trace_event_t *e = &t->ev[i];
                char en[96];
                event_name(en, sizeof en, r->mode, e);
                const char *cat = e->kind < PH_COUNT ? "phase" : e->kind == TR_STEP ? "step" : "comm";
                fprintf(f, ",\n{\"ph\":\"X\",\"name\":");
                put_str(f, en);
                fprintf(f, ",\"cat\":\"%s\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
                           "\"args\":{\"step\":%d",
                        cat, pid, e->lane, (e->t_begin - t0) * 1e6,
                        (e->t_end - e->t_begin) * 1e6, e->step);
                if (e->bucket >= 0)
                    fprintf(f, ",\"bucket\":%d", e->bucket);
                if (e->peer >= 0)
                    fprintf(f, ",\"peer\":%d", e->peer);
                if (e->bytes)
                    fprintf(f, ",\"bytes\":%llu", (unsigned long long)e->bytes);
                if (e->t_ready > 0.0) /* a bucket: launched when backward made it ready */
                    fprintf(f, ",\"ready_ts\":%.3f", (e->t_ready - t0) * 1e6);
                fputs("}}", f);
            }
        }
    }
    return dropped;
}

int report_trace_write(const char *path, const run_result_t *runs, int n, char *err)
{
    afile_t a;
    int rc = afile_open(&a, path, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "--trace %s", path);
    FILE *f = afile_stream(&a);
    if (f) {
        fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
        bool first = true;
        uint64_t dropped = write_events(f, runs, n, &first);
        fprintf(f, "\n],\"otherData\":{\"tool\":\"ddpbench\",\"version\":\"%s\","
                   "\"steps_recorded_per_run\":%d,\"dropped_events\":%llu}}\n",
                DDPBENCH_VERSION, TRACE_MAX_STEPS, (unsigned long long)dropped);
    }
    rc = afile_commit(&a, false, err);
    return rc == DDP_OK ? rc : err_prefix(err, rc, "--trace %s", path);
}
