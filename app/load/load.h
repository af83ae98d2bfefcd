/* app/load/load.h: the dataset a configuration names: its --data file
 * (.npy with --targets, or CSV) or the synthetic set that fits --loss, checked
 * against the model's input and output widths.  The loaders treat files as
 * hostile: every size is checked before allocation and every failure is one
 * line naming the file and the problem (DDP_ERR_INPUT). */
#ifndef DDPBENCH_LOAD_H
#define DDPBENCH_LOAD_H

#include "common/config/config.h"
#include "common/data/data.h"
#include "common/nn/model.h"

/* NumPy: x_path holds a 2-D (or 1-D: one feature) float32/float64 array, C order,
 * little endian; y_path a float32/float64 [n] or [n,k], or an int64/int32 [n]
 * array (integer ids, labels = true).  want_labels: targets must be integer
 * valued (ce) and are stored as labels. */
int data_load_npy(dataset_t *d, const char *x_path, const char *y_path, bool want_labels,
                  char *err);

/* CSV: plain decimal numbers separated by commas, one row per line, an
 * optional header line (a first line of names, none of them a number; a
 * first line that mixes names and numbers is refused as a typo), the last
 * target_cols columns are targets.  want_labels as above (target_cols must
 * then be 1). */
int data_load_csv(dataset_t *d, const char *path, int target_cols, bool want_labels,
                  char *err);

/* For both loaders: 2^24, the largest run of integers a float holds exactly (the largest
 * class id); FLT_MAX plus half an ulp, where a double rounds to infinity as a float (so
 * "3.40282347e+38" is fine); the shortest %g form that reads back as v, for messages ("0.5",
 * not "0.500000"; data_npy.c). */
#define DATA_LABEL_MAX 16777216.0
#define DATA_FLOAT32_LIMIT 0x1.ffffffp+127
void data_fmt_num(double v, char *out, size_t size);

/* The shape of that dataset before it is loaded, in d without its values:
 * the model's widths and the synthetic set's rows (0 for a file's, unknown
 * until it is read). */
void data_shape(const config_t *c, const model_spec_t *spec, dataset_t *d);

/* Load or generate the dataset the config names and check it against the model. */
int data_load(const config_t *c, const model_spec_t *spec, dataset_t *d, char *err);

#endif
