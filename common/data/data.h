/* common/data/data.h: datasets on the host: n rows of in_dim float features
 * and tgt_cols float targets (class ids for ce as exact integers in one
 * column), synthetic from the seed or loaded from .npy and CSV (app/load/). */
#ifndef DDPBENCH_DATA_H
#define DDPBENCH_DATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/base/kinds.h"

/* Upper bounds that keep a hostile file from asking for absurd memory. */
#define DATA_MAX_ROWS ((size_t)1 << 31)
#define DATA_MAX_COLS ((size_t)1 << 24)
#define DATA_MAX_BYTES ((size_t)16 << 30) /* 16 GiB of floats in all */

typedef struct {
    size_t n;          /* rows */
    int in_dim;        /* feature columns */
    int tgt_cols;      /* target columns (1 for class labels) */
    bool labels;       /* targets are integer class ids stored as floats */
    float *x;          /* [n, in_dim] row-major */
    float *y;          /* [n, tgt_cols] */
    char source[256];  /* "synthetic binary", or the file name(s) */
    int header_lines;  /* CSV: the header line skipped (0 or 1) */
} dataset_t;

/* Synthetic data, features ~ N(0,1):
 *  SYNTH_REGRESSION: y = teacher(x) + noise*N(0,1), tgt_cols = out_dim, where the
 *                    teacher is an MLP in -> 32 (tanh) -> out_dim
 *  SYNTH_BINARY:     y = [w.x > 0] from a random linear teacher (separable; with one
 *                    output every point is moved 1.0 away from the plane: a margin)
 *  SYNTH_CLASSES:    y = argmax(teacher(x)) over out_dim classes (labels = true)
 * The teacher, data and noise come from independent streams of seed. */
int data_synthetic(dataset_t *d, synth_kind_t kind, size_t n, int in_dim, int out_dim,
                   uint64_t seed, float noise, char *err);

/* Check a loaded dataset against the model and loss: in_dim == model input,
 * targets match the output (mse/bce: tgt_cols == out; ce: one label column with
 * integer ids in [0, out)), bce targets in [0,1], every value finite. */
int data_check(const dataset_t *d, int model_in, int model_out, loss_t loss, char *err);

/* Copy rows idx[0..rows) into x [rows, in_dim] and y [rows, tgt_cols] (host). */
void data_gather(const dataset_t *d, const uint32_t *idx, int rows, float *x, float *y);

void data_free(dataset_t *d);

#endif
