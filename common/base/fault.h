/* common/base/fault.h: fault injection for the fault-model tests:
 * DDPBENCH_FAULT=KIND:DEVICE:STEP makes device slot DEVICE (its index in
 * --gpus: the DP device or DDP rank) fail at optimizer step STEP (0-based);
 * the kinds are docs/testing.md's.  Unset or malformed: no fault.  Read once
 * per process; never on by default. */
#ifndef DDPBENCH_FAULT_H
#define DDPBENCH_FAULT_H

#include <stdbool.h>

typedef enum {
    FAULT_NONE = 0,
    FAULT_ERROR,
    FAULT_KILL,
    FAULT_EXIT,
    FAULT_STALL,
    FAULT_WRITE,
    FAULT_PAUSE,
    FAULT_SUM,
    FAULT_LINGER,
    FAULT_ULP
} fault_kind_t;

/* The fault due on this device at this step (FAULT_NONE almost always). */
fault_kind_t fault_at(int device_index, long step);
/* Carry out kill / exit / stall on the calling process (error and write are the caller's). */
void fault_raise(fault_kind_t kind);
#define FAULT_PAUSE_S 2
/* FAULT_PAUSE: arm the pause for this process's next atomic file commit /
 * take it there (true once after arming; base/atomic_file.c sleeps). */
void fault_pause_arm(void);
bool fault_pause_take(void);

#endif
