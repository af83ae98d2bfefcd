/* common/base/fault.h: fault injection for the fault-model tests.
 *
 * DDPBENCH_FAULT=KIND:DEVICE:STEP makes device slot DEVICE (the index in
 * --gpus, i.e. the DP device or DDP rank) fail at optimizer step STEP
 * (0-based) in one of these ways:
 *   error  the device's work returns a runtime error ("injected fault")
 *   kill   the process raises SIGKILL on itself (a crashed DDP rank)
 *   exit   the process exits with status 7 (a rank that quits early)
 *   stall  the device stops and sleeps (a hung rank; --timeout must fire)
 *   write  a checkpoint write is killed between writing and renaming
 *   pause  a checkpoint write pauses FAULT_PAUSE_S seconds between writing
 *          and renaming (a slow disk: a signal then lands in the write)
 *   linger under mpirun, the rank sleeps FAULT_PAUSE_S seconds after
 *          MPI_Finalize, before it exits (STEP: 0): a slow exit on a busy
 *          host, which mpirun's ending of the job then catches
 *   sum    --mode comm: the rank adds a wrong value to the collectives it
 *          checks at size index STEP (a planted wrong sum, which the check
 *          must catch)
 *   ulp    --check-replicas: after step STEP the device's copy of the
 *          parameters is one ulp up in the largest weight of its middle layer
 *          (replica_nudge: a replica that drifted, which the check must
 *          catch; a DP replica until the next replicate)
 * Unset or malformed: no fault.  Read once per process; never on by default. */
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
