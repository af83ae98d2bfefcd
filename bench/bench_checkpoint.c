/* bench/bench_checkpoint.c: a checkpoint of mlp-medium's parameters and SGD momentum
 * (67.1 MB) written and read, against a raw write + fsync of the same bytes, the median of
 * 5 rounds in DIR (argument, default /tmp); no goal (docs/benchmarks.md). */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench_util.h"
#include "common/io/checkpoint.h"
#include "common/io/safetensors.h"
#include "common/measure/timing.h"

int main(int argc, char **argv)
{
    const char *dir = argc > 1 ? argv[1] : "/tmp";
    char err[ERR_LEN], path[1024], raw[1024];
    snprintf(path, sizeof path, "%s/bench_ckpt_%ld.safetensors", dir, (long)getpid());
    snprintf(raw, sizeof raw, "%s/bench_ckpt_%ld.raw", dir, (long)getpid());
    int dims[] = {1024, 2048, 2048, 1024};
    model_spec_t spec;
    if (model_spec_init(&spec, dims, 4, ACT_RELU, err) != DDP_OK)
        return 1;
    size_t n = spec.nparams;
    float *p = malloc(n * sizeof(float)), *m = malloc(n * sizeof(float));
    float *back = malloc(n * sizeof(float));
    if (!p || !m || !back)
        return 1;
    model_init_params(&spec, 1, p);
    for (size_t i = 0; i < n; i++)
        m[i] = p[i] * 0.5f;
    /* The tensors as the checkpoint writes them: 6 parameters, then 6 momentum buffers. */
    st_out_t t[12];
    char names[12][64];
    for (int a = 0; a < 2; a++)
        for (int l = 0; l < 3; l++)
            for (int b = 0; b < 2; b++) {
                int i = a * 6 + l * 2 + b;
                char pn[32];
                ckpt_param_name(l, b, pn, sizeof pn);
                snprintf(names[i], sizeof names[i], "%s%s", a ? "optim.momentum_buffer." : "", pn);
                const float *base = a ? m : p;
                t[i] = (st_out_t){names[i], b ? 1 : 2,
                                  {(uint64_t)dims[l + 1], (uint64_t)dims[l]},
                                  base + (b ? spec.b_off[l] : spec.w_off[l])};
            }
    double raw_s[5], write_s[5], read_s[5];
    for (int round = 0; round < 5; round++) {
        double t0 = now_s();
        int fd = open(raw, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, p, n * 4) != (ssize_t)(n * 4) ||
            write(fd, m, n * 4) != (ssize_t)(n * 4) || fsync(fd) != 0 || close(fd) != 0) {
            perror(raw);
            return 1;
        }
        double t1 = now_s();
        if (st_write(path, t, 12, NULL, 0, false, err) != DDP_OK) {
            fprintf(stderr, "bench_checkpoint: %s\n", err);
            return 1;
        }
        double t2 = now_s();
        st_file_t sf;
        if (st_open(&sf, path, err) != DDP_OK)
            return 1;
        for (int i = 0; i < 12; i++) {
            float *dst = back + (t[i].data - (i < 6 ? p : m)); /* one arena's worth, reused */
            const st_tensor_t *tt = st_find(&sf.h, names[i]);
            if (!tt || st_read_f32(&sf, tt, dst, err) != DDP_OK)
                return 1;
        }
        st_close(&sf);
        double t3 = now_s();
        raw_s[round] = t1 - t0;
        write_s[round] = t2 - t1;
        read_s[round] = t3 - t2;
    }
    double best_raw = paired_median(raw_s, 5), best_write = paired_median(write_s, 5),
           best_read = paired_median(read_s, 5);
    unlink(path);
    unlink(raw);
    double mb = 2.0 * (double)n * 4 / 1e6;
    printf("checkpoint of %.1f MB in %s (median of 5):\n", mb, dir);
    printf("  raw write+fsync      %8.1f ms  %7.0f MB/s\n", best_raw * 1e3, mb / best_raw);
    printf("  st_write (atomic)    %8.1f ms  %7.0f MB/s\n", best_write * 1e3, mb / best_write);
    printf("  st_open+read         %8.1f ms  %7.0f MB/s\n", best_read * 1e3, mb / best_read);
    printf("  write / raw          %8.2f   (no goal set: reported only)\n", best_write / best_raw);
    free(p), free(m), free(back);
    return 0;
}
