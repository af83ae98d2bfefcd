/* tests/fuzz_replay.h: the main() a fuzz target gets when built without
 * libFuzzer (-DFUZZ_STANDALONE): it replays the files named on the command
 * line through LLVMFuzzerTestOneInput, so any compiler can rerun a crash.
 * Include it last, after the target defines LLVMFuzzerTestOneInput. */
#ifndef DDPBENCH_FUZZ_REPLAY_H
#define DDPBENCH_FUZZ_REPLAY_H

#ifdef FUZZ_STANDALONE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (!f) {
            perror(argv[i]);
            return 1;
        }
        uint8_t *buf = NULL;
        size_t size = 0, cap = 0, got;
        do {
            if (size == cap) {
                cap = cap ? 2 * cap : 65536;
                uint8_t *nb = realloc(buf, cap);
                if (!nb) {
                    fprintf(stderr, "%s: out of memory\n", argv[i]);
                    return 1;
                }
                buf = nb;
            }
            got = fread(buf + size, 1, cap - size, f);
            size += got;
        } while (got > 0);
        fclose(f);
        LLVMFuzzerTestOneInput(buf, size);
        free(buf);
        printf("%s: ok\n", argv[i]);
    }
    return 0;
}
#endif

#endif
