/* app/load/data_csv.c: the CSV loader, data_load_csv (load.h: the format).  The file is read
 * whole (at most DATA_MAX_BYTES) and walked twice: pass 1 finds the header, checks each row's
 * field count and counts the rows; then the arrays are allocated and pass 2 parses into them.
 * LF or CRLF, spaces and tabs around fields, blank lines and a UTF-8 BOM are allowed; numbers
 * are plain decimals (strtod in the C locale: the program never calls setlocale), no hex
 * floats, nan, inf or values outside float32.  Each error names the file, line and field. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "app/load/load.h"
#include "common/base/infile.h"
#include "common/base/status.h"
#include "common/base/text.h"

// ----------------------------------------------------------------------------
// lines and fields

typedef struct {
    const char *text;
    size_t len;
    size_t pos;    /* start of the next line */
    size_t lineno; /* 1-based number of the line last returned */
} csv_lines_t;

static bool is_space(char c) { return c == ' ' || c == '\t'; }

/* The next non-blank line (without its LF or CRLF); false at the end. */
static bool csv_next_line(csv_lines_t *it, const char **line, size_t *n)
{
    while (it->pos < it->len) {
        const char *s = it->text + it->pos;
        const char *nl = memchr(s, '\n', it->len - it->pos);
        const char *e = nl ? nl : it->text + it->len;
        it->pos = (size_t)(e - it->text) + (nl != NULL);
        it->lineno++;
        if (e > s && e[-1] == '\r')
            e--;
        size_t m = (size_t)(e - s);
        size_t i = 0;
        while (i < m && (is_space(s[i]) || s[i] == '\r'))
            i++;
        if (i == m)
            continue; /* blank */
        *line = s;
        *n = m;
        return true;
    }
    return false;
}

static size_t csv_count_fields(const char *s, size_t n)
{
    size_t fields = 1;
    for (size_t i = 0; i < n; i++)
        fields += s[i] == ',';
    return fields;
}

typedef enum { NUM_OK = 0, NUM_EMPTY, NUM_NOT_NUMBER, NUM_NOT_FINITE, NUM_RANGE } num_status_t;

/* Trim the field [*s, *s + *n) of spaces and tabs, then parse it as a number. */
static num_status_t csv_parse_field(const char **s, size_t *n, double *out)
{
    const char *p = *s;
    size_t m = *n;
    while (m > 0 && is_space(*p)) {
        p++;
        m--;
    }
    while (m > 0 && is_space(p[m - 1]))
        m--;
    *s = p;
    *n = m;
    if (m == 0)
        return NUM_EMPTY;
    /* strtod cannot run past the field: it stops at ',', '\r', '\n' and the
     * terminating NUL, none of which is part of a number, and the field starts
     * with a non-space so it skips no line break. */
    char *end;
    errno = 0;
    double v = strtod(p, &end);
    if (end != p + m)
        return NUM_NOT_NUMBER;
    if (!isfinite(v))
        return errno == ERANGE ? NUM_RANGE : NUM_NOT_FINITE;
    if (!text_is_decimal(p, m)) /* strtod's hex floats ("0x1p3") are no CSV number */
        return NUM_NOT_NUMBER;
    if (fabs(v) >= DATA_FLOAT32_LIMIT)
        return NUM_RANGE;
    *out = v;
    return NUM_OK;
}

static int csv_field_error(const char *path, size_t lineno, size_t field, num_status_t st,
                           const char *s, size_t n, char *err)
{
    char shown[48];
    text_escape(s, n, shown, sizeof shown);
    switch (st) {
    case NUM_EMPTY:
        return err_set(err, DDP_ERR_INPUT, "%s: line %zu, field %zu is empty", path, lineno, field);
    case NUM_NOT_FINITE:
        return err_set(err, DDP_ERR_INPUT, "%s: line %zu, field %zu: '%s' is not a finite number",
                       path, lineno, field, shown);
    case NUM_RANGE:
        return err_set(err, DDP_ERR_INPUT,
                       "%s: line %zu, field %zu: '%s' is outside the float32 range", path, lineno,
                       field, shown);
    case NUM_NOT_NUMBER:
    case NUM_OK:
        break;
    }
    return err_set(err, DDP_ERR_INPUT, "%s: line %zu, field %zu: '%s' is not a number", path,
                   lineno, field, shown);
}

// ----------------------------------------------------------------------------
// data_load_csv

/* Pass 1: header?, columns, rows, every row's field count. */
static int csv_scan(const char *path, const char *text, size_t len, bool *header, size_t *cols,
                    size_t *rows, char *err)
{
    csv_lines_t it = {text, len, 0, 0};
    const char *line;
    size_t n;
    *header = false;
    *cols = 0;
    *rows = 0;
    size_t first_line = 0;
    /* A carriage return not followed by a line feed: old Mac line ends (CR
     * alone, no LF in the file), which would read as one long line of fields
     * run together; else a stray one inside a line. */
    for (const char *cr = memchr(text, '\r', len); cr; cr = memchr(cr + 1, '\r',
                                                                   len - (size_t)(cr + 1 - text))) {
        if ((size_t)(cr + 1 - text) < len && cr[1] == '\n')
            continue;
        size_t lineno = 1;
        for (const char *q = text; q < cr; q++)
            lineno += *q == '\n';
        return err_set(err, DDP_ERR_INPUT,
                       memchr(text, '\n', len)
                           ? "%s: line %zu holds a carriage return inside it, not at its end"
                           : "%s: line %zu ends in a bare carriage return (CR line ends, as old "
                             "Mac files have); ddpbench reads LF or CRLF: convert it (tr '\\r' "
                             "'\\n')",
                       path, lineno);
    }
    if (!csv_next_line(&it, &line, &n))
        return err_set(err, DDP_ERR_INPUT, "%s: no data rows (the file is empty)", path);

    /* The first line is a header when its fields are names, none a number;
     * a line of numbers with one name among them is a data line with a typo
     * (it must not be skipped as a header). */
    *cols = csv_count_fields(line, n);
    first_line = it.lineno;
    const char *p = line, *end = line + n;
    size_t numbers = 0, first_name = 0, field = 0;
    const char *name = NULL;
    size_t name_len = 0;
    for (;;) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *fs = p;
        size_t fn = (size_t)((comma ? comma : end) - p);
        double v;
        num_status_t st = csv_parse_field(&fs, &fn, &v);
        field++;
        if (st == NUM_OK)
            numbers++;
        else if (st == NUM_NOT_NUMBER && !name) {
            name = fs;
            name_len = fn;
            first_name = field;
        }
        if (!comma)
            break;
        p = comma + 1;
    }
    if (name && numbers) {
        char shown[48];
        text_escape(name, name_len, shown, sizeof shown);
        return err_set(err, DDP_ERR_INPUT,
                       "%s: line %zu, field %zu: '%s' is not a number, yet %zu field%s of the "
                       "line %s (a header line holds only names, a data line only numbers)",
                       path, first_line, first_name, shown, numbers, numbers == 1 ? "" : "s",
                       numbers == 1 ? "is one" : "are");
    }
    *header = name != NULL;
    if (!*header)
        *rows = 1;

    while (csv_next_line(&it, &line, &n)) {
        size_t f = csv_count_fields(line, n);
        if (f != *cols)
            return err_set(err, DDP_ERR_INPUT, "%s: line %zu has %zu fields, expected %zu (as on line %zu)",
                           path, it.lineno, f, *cols, first_line);
        ++*rows;
    }
    if (*rows == 0)
        return err_set(err, DDP_ERR_INPUT, "%s: no data rows (only a header line)", path);
    return DDP_OK;
}

/* A class id: integer, 0 <= v <= 2^24. */
static int csv_check_label(const char *path, size_t lineno, double v, char *err)
{
    if (v == floor(v) && v >= 0 && v <= DATA_LABEL_MAX)
        return DDP_OK;
    char num[40];
    data_fmt_num(v, num, sizeof num);
    if (v != floor(v))
        return err_set(err, DDP_ERR_INPUT, "%s: line %zu: target %s is not an integer class id",
                       path, lineno, num);
    if (v < 0)
        return err_set(err, DDP_ERR_INPUT, "%s: line %zu: target %s is a negative class id", path,
                       lineno, num);
    return err_set(err, DDP_ERR_INPUT, "%s: line %zu: target %s is over the largest class id %.0f",
                   path, lineno, num, DATA_LABEL_MAX);
}

/* Pass 2: parse every data row into x and y. */
static int csv_parse(const char *path, const char *text, size_t len, bool header, size_t cols,
                     size_t in_dim, bool labels, float *x, float *y, char *err)
{
    csv_lines_t it = {text, len, 0, 0};
    const char *line;
    size_t n;
    size_t tgt = cols - in_dim;
    if (header)
        csv_next_line(&it, &line, &n);
    for (size_t row = 0; csv_next_line(&it, &line, &n); row++) {
        const char *p = line, *end = line + n;
        for (size_t c = 0; c < cols; c++) {
            const char *comma = memchr(p, ',', (size_t)(end - p));
            const char *fs = p;
            size_t fn = (size_t)((comma ? comma : end) - p);
            double v = 0;
            num_status_t st = csv_parse_field(&fs, &fn, &v);
            if (st != NUM_OK)
                return csv_field_error(path, it.lineno, c + 1, st, fs, fn, err);
            if (c < in_dim) {
                x[row * in_dim + c] = (float)v;
            } else {
                if (labels) {
                    int rc = csv_check_label(path, it.lineno, v, err);
                    if (rc)
                        return rc;
                    v = fabs(v); /* v >= 0 here; this turns -0 into +0 */
                }
                y[row * tgt + (c - in_dim)] = (float)v;
            }
            p = comma ? comma + 1 : end;
        }
    }
    return DDP_OK;
}

/* The text of path (its byte order mark skipped) into d; the caller frees
 * the text, and d on failure. */
static int csv_load_text(dataset_t *d, const char *path, const char *body, size_t len,
                         int target_cols, bool want_labels, char *err)
{
    const char *nul = memchr(body, '\0', len);
    if (nul) {
        size_t lineno = 1;
        for (const char *p = body; p < nul; p++)
            lineno += *p == '\n';
        return err_set(err, DDP_ERR_INPUT, "%s: line %zu contains a NUL byte: not a text file",
                       path, lineno);
    }
    bool header;
    size_t cols, rows;
    TRY(csv_scan(path, body, len, &header, &cols, &rows, err));
    if ((size_t)target_cols >= cols)
        return err_set(err, DDP_ERR_INPUT,
                       "--target-cols %d leaves no feature columns in %s (%zu column%s)",
                       target_cols, path, cols, cols == 1 ? "" : "s");
    size_t in_dim = cols - (size_t)target_cols;
    if (in_dim > DATA_MAX_COLS)
        return err_set(err, DDP_ERR_INPUT, "%s: %zu feature columns, over the limit of %zu",
                       path, in_dim, DATA_MAX_COLS);
    if (rows > DATA_MAX_ROWS)
        return err_set(err, DDP_ERR_INPUT, "%s: %zu rows, over the limit of %zu", path, rows,
                       DATA_MAX_ROWS);
    /* A data line holds at least one non-space byte and cols - 1 commas, so
     * rows * cols <= 2 * len: no overflow. */
    if (rows * cols > DATA_MAX_BYTES / sizeof(float))
        return err_set(err, DDP_ERR_INPUT,
                       "%s: %zu x %zu values need %zu bytes, over the limit of %zu", path, rows,
                       cols, rows * cols * sizeof(float), DATA_MAX_BYTES);
    d->x = malloc(rows * in_dim * sizeof(float));
    d->y = malloc(rows * (size_t)target_cols * sizeof(float));
    if (!d->x || !d->y)
        return err_set(err, DDP_ERR_INPUT, "%s: out of memory for %zu x %zu values", path, rows,
                       cols);
    TRY(csv_parse(path, body, len, header, cols, in_dim, want_labels, d->x, d->y, err));
    d->n = rows;
    d->in_dim = (int)in_dim;
    d->tgt_cols = target_cols;
    d->labels = want_labels;
    d->header_lines = header ? 1 : 0;
    snprintf(d->source, sizeof d->source, "%s", path);
    return DDP_OK;
}

int data_load_csv(dataset_t *d, const char *path, int target_cols, bool want_labels, char *err)
{
    memset(d, 0, sizeof *d);
    if (!path || !*path)
        return err_set(err, DDP_ERR_INPUT, "no CSV file given");
    if (target_cols < 1)
        return err_set(err, DDP_ERR_INPUT, "--target-cols %d: must be at least 1 for %s",
                       target_cols, path);
    if (want_labels && target_cols != 1)
        return err_set(err, DDP_ERR_INPUT,
                       "--target-cols %d: class labels need exactly one target column in %s",
                       target_cols, path);

    char *text;
    size_t len;
    int rc = infile_read(path, DATA_MAX_BYTES, &text, &len, err);
    if (rc != DDP_OK)
        return err_prefix(err, rc, "%s", path);
    const char *body = text;
    if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0) { /* UTF-8 byte order mark */
        body += 3;
        len -= 3;
    }
    rc = csv_load_text(d, path, body, len, target_cols, want_labels, err);
    free(text);
    if (rc != DDP_OK)
        data_free(d);
    return rc;
}
