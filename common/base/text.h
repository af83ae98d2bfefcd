/* common/base/text.h: untrusted bytes shown in a one-line message.
 *
 * A loader that quotes what it read back to the user (a CSV field, an .npy
 * header key, a safetensors tensor name) passes it through here first, so a
 * hostile file cannot put control characters or a newline into the one-line
 * error, nor make it arbitrarily long. */
#ifndef DDPBENCH_TEXT_H
#define DDPBENCH_TEXT_H

#include <stddef.h>

/* The first bytes of s[0..n) that fit in out[size] (size >= 5), each byte
 * outside printable ASCII as '?', and "..." when cut short.  Returns out. */
const char *text_printable(const char *s, size_t n, char *out, size_t size);

#endif
