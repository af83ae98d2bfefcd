/* common/device/probe.c: a probe's question asked of a forked child (see
 * probe.h). */
#include "common/device/probe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

_Static_assert(sizeof(gpu_probe_msg_t) <= PIPE_BUF, "one atomic write");

static int read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

int gpu_probe_in_child(void (*answer)(gpu_probe_msg_t *m), int limit_ms, char *why,
                       gpu_topology_t *gpus)
{
    memset(gpus, 0, sizeof *gpus);
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0)
        return err_set(why, 0, "CUDA probe: pipe: %s", strerror(errno));
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        close(fds[0]);
        close(fds[1]);
        return err_set(why, 0, "CUDA probe: fork: %s", strerror(e));
    }
    if (pid == 0) {
        /* The child: answer, and leave with _exit so nothing of the
         * parent's (stdio buffers, atexit handlers) runs twice. */
        gpu_probe_msg_t m;
        memset(&m, 0, sizeof m);
        close(fds[0]);
        answer(&m);
        ssize_t w = write(fds[1], &m, sizeof m); /* < PIPE_BUF: one atomic write */
        _exit(w == (ssize_t)sizeof m ? 0 : 1);
    }
    close(fds[1]);

    /* Why poll with a limit: a wedged driver must not hang ddpbench. */
    gpu_probe_msg_t m;
    memset(&m, 0, sizeof m);
    struct pollfd pfd = {.fd = fds[0], .events = POLLIN};
    int pr;
    do
        pr = poll(&pfd, 1, limit_ms);
    while (pr < 0 && errno == EINTR);
    bool got = pr > 0 && read_full(fds[0], &m, sizeof m) == 0;
    close(fds[0]);
    if (!got)
        kill(pid, SIGKILL); /* timed out or broke the pipe: make sure it is gone */

    /* Reap it (no zombie).  ECHILD: someone else's SIGCHLD handler reaped it
     * first; the pipe already said what we need. */
    int st = 0;
    pid_t w;
    do
        w = waitpid(pid, &st, 0);
    while (w < 0 && errno == EINTR);

    if (got) {
        m.why[ERR_LEN - 1] = 0; /* strings from another process */
        snprintf(why, ERR_LEN, "%s", m.why);
        if (m.gpus.count < 0 || m.gpus.count > GPU_INFO_MAX)
            m.gpus.count = 0;
        for (int i = 0; i < GPU_INFO_MAX; i++) {
            m.gpus.gpu[i].name[sizeof m.gpus.gpu[i].name - 1] = 0;
            m.gpus.gpu[i].pci_bus_id[sizeof m.gpus.gpu[i].pci_bus_id - 1] = 0;
        }
        *gpus = m.gpus;
        return m.count > 0 ? m.count : 0;
    }
    if (pr == 0)
        return err_set(why, 0, "CUDA probe: no answer within %d s", limit_ms / 1000);
    if (w == pid && WIFSIGNALED(st))
        return err_set(why, 0, "CUDA probe: the probe process died (signal %d)", WTERMSIG(st));
    return err_set(why, 0, "CUDA probe: the probe process exited without an answer");
}
