/* app/startup.c: what runs before main.  OpenBLAS's library constructor starts its threads
 * before main and, when it cannot, raises SIGINT on itself (docs/faults.md, "Threads"): a
 * function in .preinit_array runs before every shared library's constructor, so until main
 * calls startup_done() a SIGINT is taken for OpenBLAS's (one line, exit 2); startup_done()
 * puts back SIGINT's disposition (an inherited SIG_IGN stays). */
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
