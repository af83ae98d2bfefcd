/* gate/ab_child.h: one child run of the A/B gate: an executable started with
 * the job's options and --json, its output read, its JSON turned into the
 * side's figures (ab_round.h).  The child leads its own process group (a
 * DDP child's ranks are in it); the gate's stop (Ctrl-C, SIGTERM) is passed
 * to the whole group, a child past its deadline is stopped and named, and
 * whatever the child left behind in its group (a background process that
 * still holds the pipes) is killed as soon as the child itself has ended,
 * so nothing outlives its round and no round waits on a leftover. */
#ifndef DDPBENCH_AB_CHILD_H
#define DDPBENCH_AB_CHILD_H

#include <stddef.h>

#include "gate/ab_round.h"

typedef struct {
    const char *exe;   /* the executable */
    char **args;       /* its argv, args[0] = exe, NULL-terminated */
    int which;         /* AB_BASE or AB_CAND */
    int round;         /* 0..; -1 the warm-up */
    double deadline_s; /* > 0: stopped past it and reported as hung */
    const char *deadline_why; /* what set the deadline, for the message */
} ab_child_t;


/* Run it to its end and fill s (s->json owned by the caller: cJSON_Delete).
 * DDP_OK; DDP_ERR_RUNTIME naming the side and the round when it failed,
 * hung past its deadline, printed no JSON or lacks the figures;
 * DDP_ERR_INTERRUPTED when the gate was asked to stop (the child stopped and
 * reaped first). */
int ab_child_run(const ab_child_t *c, ab_side_t *s, char *err);

#endif
