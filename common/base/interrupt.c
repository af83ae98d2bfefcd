/* common/base/interrupt.c: the stop request of SIGINT/SIGTERM/SIGHUP (see
 * interrupt.h). */
#include "common/base/interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

/* Why atomic: written by a signal handler on any thread, read by every loop. */
static atomic_int g_sig;

static void set_default(int sig)
{
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(sig, &dfl, NULL);
}

static void on_stop(int sig)
{
    int none = 0;
    if (atomic_compare_exchange_strong(&g_sig, &none, sig))
        alarm(INTERRUPT_GRACE_S); /* a run stuck where no step ends still stops */
    set_default(sig); /* a second signal ends the process */
}

/* SIGALRM ignored when the process started: one from outside stays ignored */
static bool g_alrm_ignored;

/* The grace is over and the run did not stop: end the way the signal would
 * have (only async-signal-safe calls here).  No stop request before it: the
 * SIGALRM came from outside, and it does what it would do unhandled (ends the
 * process, status 142, or nothing where it was ignored). */
static void on_grace_over(int unused)
{
    (void)unused;
    if (!atomic_load(&g_sig)) {
        if (!g_alrm_ignored) {
            set_default(SIGALRM);
            raise(SIGALRM); /* blocked in its handler: delivered as this returns */
        }
        return;
    }
    static const char msg[] = "ddpbench: stopped: no step ended within the grace after the "
                              "signal; ending now\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    int sig = atomic_load(&g_sig);
    set_default(sig);
    raise(sig);
}

bool interrupt_ignored(int sig)
{
    struct sigaction old;
    return sigaction(sig, NULL, &old) == 0 && old.sa_handler == SIG_IGN;
}

void interrupt_install(void)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sa.sa_flags = SA_RESTART; /* reads and writes go on; the loop stops at its step's end */
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (!interrupt_ignored(sigs[i]))
            sigaction(sigs[i], &sa, NULL);
    g_alrm_ignored = interrupt_ignored(SIGALRM);
    sa.sa_handler = on_grace_over;
    sigaction(SIGALRM, &sa, NULL);
}

/* Why atomic: set once by the rank before its loops; the flag it points to
 * is written by another process (a plain int in shared memory: read with
 * an atomic load, which every process uses on it). */
static _Atomic(const int *) g_follow;

int interrupt_pending(void)
{
    int sig = atomic_load(&g_sig);
    const int *f = atomic_load(&g_follow);
    return sig ? sig : f ? __atomic_load_n(f, __ATOMIC_ACQUIRE) : 0;
}

int interrupt_exit_status(void)
{
    int sig = interrupt_pending();
    return 128 + (sig ? sig : SIGINT);
}

void interrupt_follow(const int *flag) { atomic_store(&g_follow, flag); }

void interrupt_hold(bool hold)
{
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(hold ? SIG_BLOCK : SIG_UNBLOCK, &set, NULL);
}

void interrupt_note(int sig)
{
    int none = 0;
    atomic_compare_exchange_strong(&g_sig, &none, sig);
}
