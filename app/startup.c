/* app/startup.c: what runs before main.
 *
 * OpenBLAS starts its thread pool in its library constructor, before main;
 * when a thread cannot be created (ulimit -u, or ulimit -v too small for a
 * thread's stack) it prints "pthread_create failed" and raises SIGINT on
 * itself, which looks like Ctrl-C (exit 130).  A function in the program's
 * .preinit_array runs before every shared library's constructor, so it can
 * catch that SIGINT: until main begins, a SIGINT is taken for OpenBLAS's and
 * ends the process with one line and exit 2 (a limit the user set: the
 * message names the limits).  main calls startup_done() first thing, which
 * puts back the disposition SIGINT had (an inherited SIG_IGN stays). */
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "app/app.h"

static struct sigaction g_old;
static volatile sig_atomic_t g_installed;

static void before_main(int sig)
{
    (void)sig;
    static const char msg[] =
        "ddpbench: error: OpenBLAS could not start its threads before ddpbench began (its "
        "pthread_create failed, line above): a limit on processes (ulimit -u) or on address "
        "space (ulimit -v) is too small for them; raise it, or set OPENBLAS_NUM_THREADS=1\n";
    ssize_t w = write(2, msg, sizeof msg - 1);
    (void)w;
    _exit(2);
}

static void startup_catch(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    if (sigaction(SIGINT, NULL, &g_old) != 0 || g_old.sa_handler == SIG_IGN)
        return; /* ignored: OpenBLAS's raise does nothing, nothing to catch */
    sa.sa_handler = before_main;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) == 0)
        g_installed = 1;
}

/* Why .preinit_array: it runs before the shared libraries' constructors
 * (OpenBLAS's among them), where .init_array of the program runs after. */
__attribute__((section(".preinit_array"), used)) static void (*const g_preinit)(void) =
    startup_catch;

void startup_done(void)
{
    if (g_installed)
        sigaction(SIGINT, &g_old, NULL);
    g_installed = 0;
}
