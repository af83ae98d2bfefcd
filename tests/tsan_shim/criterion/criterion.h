/* tests/tsan_shim/criterion/criterion.h: a small stand-in for Criterion,
 * used only by the ThreadSanitizer builds of the test suites (SAN=thread puts
 * this directory first on the include path and links no libcriterion).
 *
 * Why: Criterion's sandbox maps a shared arena at a random address in a range
 * that TSan reserves for itself, so a TSan-built Criterion binary aborts
 * before running any test ("Could not initialize inheritable arena",
 * Snaipe/Criterion#274).  This header keeps the test sources unchanged: it
 * provides Test(suite, name, .timeout/.init/.fini/.disabled/.exit_code/
 * .signal/.description), the cr_assert and cr_expect families the suites use,
 * cr_skip_test and cr_log_*, and a main() that runs every test in a fresh
 * process (fork + exec of itself, like Criterion: each test sees a clean
 * environment, and no thread is ever started in a forked copy of a threaded
 * parent, which TSan does not support).  It accepts Criterion's --jobs N and
 * --filter suite/name options (tests run one at a time).  Extend it when a
 * suite needs more of Criterion. */
#ifndef DDPBENCH_TSAN_SHIM_CRITERION_H
#define DDPBENCH_TSAN_SHIM_CRITERION_H

#include <errno.h>
#include <fnmatch.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

// ---------------------------------------------------------------------------
// registration

struct shim_test {
    const char *suite_name, *test_name;
    void (*fn)(void);
    /* Criterion's .field = value extras */
    void (*init)(void);
    void (*fini)(void);
    int signal;
    int exit_code;
    bool disabled;
    const char *description;
    double timeout;
    void *data;
};

#define SHIM_MAX_TESTS 512
static struct shim_test *shim_tests[SHIM_MAX_TESTS];
static int shim_ntests;
static int shim_failed; /* cr_expect failures in this test process */

static inline void shim_register(struct shim_test *t)
{
    if (shim_ntests < SHIM_MAX_TESTS)
        shim_tests[shim_ntests++] = t;
}

#define Test(suite, name, ...)                                                             \
    static void shim_fn_##suite##_##name(void);                                            \
    static struct shim_test shim_t_##suite##_##name = {                                    \
        .suite_name = #suite, .test_name = #name, .fn = shim_fn_##suite##_##name,          \
        __VA_ARGS__};                                                                      \
    __attribute__((constructor)) static void shim_reg_##suite##_##name(void)               \
    {                                                                                      \
        shim_register(&shim_t_##suite##_##name);                                           \
    }                                                                                      \
    static void shim_fn_##suite##_##name(void)

#define TestSuite(...) /* suite-wide options are not supported: set them per test */

// ---------------------------------------------------------------------------
// assertions

/* No format attribute: the default message is an empty format string. */
static inline void shim_check(int ok, int fatal, const char *file, int line, const char *expr,
                              const char *fmt, ...)
{
    if (ok)
        return;
    fprintf(stderr, "[----] %s:%d: Assertion Failed\n[----]   ", file, line);
    if (fmt && fmt[0]) {
        va_list ap;
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    } else {
        fprintf(stderr, "The expression %s is false.", expr);
    }
    fputc('\n', stderr);
    fflush(NULL);
    shim_failed = 1;
    if (fatal)
        _exit(1);
}

/* "" FMT joins a literal format with the empty default when none is given. */
#define SHIM_CHECK(fatal, cond, expr, ...)                                                 \
    shim_check(!!(cond), fatal, __FILE__, __LINE__, expr, "" __VA_ARGS__)

#define cr_assert(cond, ...) SHIM_CHECK(1, cond, #cond, __VA_ARGS__)
#define cr_expect(cond, ...) SHIM_CHECK(0, cond, #cond, __VA_ARGS__)
#define cr_assert_not(cond, ...) SHIM_CHECK(1, !(cond), "!(" #cond ")", __VA_ARGS__)
#define cr_expect_not(cond, ...) SHIM_CHECK(0, !(cond), "!(" #cond ")", __VA_ARGS__)

#define SHIM_OP(fatal, op, a, b, ...)                                                      \
    SHIM_CHECK(fatal, (a)op(b), "(" #a ") " #op " (" #b ")", __VA_ARGS__)
#define cr_assert_eq(a, b, ...) SHIM_OP(1, ==, a, b, __VA_ARGS__)
#define cr_assert_neq(a, b, ...) SHIM_OP(1, !=, a, b, __VA_ARGS__)
#define cr_assert_lt(a, b, ...) SHIM_OP(1, <, a, b, __VA_ARGS__)
#define cr_assert_leq(a, b, ...) SHIM_OP(1, <=, a, b, __VA_ARGS__)
#define cr_assert_gt(a, b, ...) SHIM_OP(1, >, a, b, __VA_ARGS__)
#define cr_assert_geq(a, b, ...) SHIM_OP(1, >=, a, b, __VA_ARGS__)
#define cr_expect_eq(a, b, ...) SHIM_OP(0, ==, a, b, __VA_ARGS__)
#define cr_expect_neq(a, b, ...) SHIM_OP(0, !=, a, b, __VA_ARGS__)
#define cr_expect_lt(a, b, ...) SHIM_OP(0, <, a, b, __VA_ARGS__)
#define cr_expect_leq(a, b, ...) SHIM_OP(0, <=, a, b, __VA_ARGS__)
#define cr_expect_gt(a, b, ...) SHIM_OP(0, >, a, b, __VA_ARGS__)
#define cr_expect_geq(a, b, ...) SHIM_OP(0, >=, a, b, __VA_ARGS__)

#define cr_assert_null(p, ...) SHIM_CHECK(1, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_assert_not_null(p, ...) SHIM_CHECK(1, (p) != NULL, #p " != NULL", __VA_ARGS__)
#define cr_expect_null(p, ...) SHIM_CHECK(0, (p) == NULL, #p " == NULL", __VA_ARGS__)
#define cr_expect_not_null(p, ...) SHIM_CHECK(0, (p) != NULL, #p " != NULL", __VA_ARGS__)

#define cr_assert_float_eq(a, b, eps, ...)                                                 \
    SHIM_CHECK(1, fabs((double)(a) - (double)(b)) <= (eps), "|" #a " - " #b "| <= " #eps,  \
               __VA_ARGS__)
#define cr_assert_float_neq(a, b, eps, ...)                                                \
    SHIM_CHECK(1, fabs((double)(a) - (double)(b)) > (eps), "|" #a " - " #b "| > " #eps,    \
               __VA_ARGS__)
#define cr_expect_float_eq(a, b, eps, ...)                                                 \
    SHIM_CHECK(0, fabs((double)(a) - (double)(b)) <= (eps), "|" #a " - " #b "| <= " #eps,  \
               __VA_ARGS__)

#define cr_assert_str_eq(a, b, ...) SHIM_CHECK(1, strcmp(a, b) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_str_neq(a, b, ...) SHIM_CHECK(1, strcmp(a, b) != 0, #a " != " #b, __VA_ARGS__)
#define cr_assert_str_empty(s, ...) SHIM_CHECK(1, (s)[0] == '\0', #s " is empty", __VA_ARGS__)
#define cr_assert_str_not_empty(s, ...)                                                    \
    SHIM_CHECK(1, (s)[0] != '\0', #s " is not empty", __VA_ARGS__)
#define cr_expect_str_eq(a, b, ...) SHIM_CHECK(0, strcmp(a, b) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_arr_eq(a, b, n, ...)                                                     \
    SHIM_CHECK(1, memcmp(a, b, n) == 0, #a " == " #b, __VA_ARGS__)
#define cr_assert_arr_neq(a, b, n, ...)                                                    \
    SHIM_CHECK(1, memcmp(a, b, n) != 0, #a " != " #b, __VA_ARGS__)

#define cr_assert_fail(...) SHIM_CHECK(1, 0, "cr_assert_fail", __VA_ARGS__)
#define cr_expect_fail(...) SHIM_CHECK(0, 0, "cr_expect_fail", __VA_ARGS__)
#define cr_fatal(...) cr_assert_fail(__VA_ARGS__)
#define cr_fail(...) cr_expect_fail(__VA_ARGS__)

#define SHIM_EXIT_SKIP 77
#define cr_skip_test(...)                                                                  \
    do {                                                                                   \
        fprintf(stderr, "[SKIP] " __VA_ARGS__);                                            \
        fputc('\n', stderr);                                                               \
        fflush(NULL);                                                                      \
        _exit(SHIM_EXIT_SKIP);                                                             \
    } while (0)

#define cr_log_info(...) (fprintf(stderr, "[----] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_warn(...) (fprintf(stderr, "[WARN] " __VA_ARGS__), fputc('\n', stderr))
#define cr_log_error(...) (fprintf(stderr, "[ERR ] " __VA_ARGS__), fputc('\n', stderr))

// ---------------------------------------------------------------------------
// the runner

/* Child side: run one test in this fresh process. */
static inline int shim_run_one(struct shim_test *t)
{
    if (t->timeout > 0)
        alarm((unsigned)ceil(t->timeout));
    if (t->init)
        t->init();
    t->fn();
    if (t->fini)
        t->fini();
    fflush(NULL);
    return shim_failed ? 1 : 0;
}

/* Parent side: judge how a test's process ended. */
static inline const char *shim_verdict(const struct shim_test *t, int status, char *why,
                                       size_t n)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        if (t->signal && sig == t->signal)
            return "PASS";
        if (sig == SIGALRM)
            snprintf(why, n, "timed out after %.0f s", t->timeout);
        else
            snprintf(why, n, "crashed with signal %d (%s)", sig, strsignal(sig));
        return "FAIL";
    }
    int code = WEXITSTATUS(status);
    if (t->signal) {
        snprintf(why, n, "expected signal %d, exited with %d", t->signal, code);
        return "FAIL";
    }
    if (code == SHIM_EXIT_SKIP)
        return "SKIP";
    if (code == t->exit_code)
        return "PASS";
    snprintf(why, n, "exit status %d", code);
    return "FAIL";
}

int main(int argc, char **argv)
{
    const char *filter = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--shim-run") == 0 && i + 1 < argc) {
            for (int k = 0; k < shim_ntests; k++) {
                char id[256];
                snprintf(id, sizeof id, "%s/%s", shim_tests[k]->suite_name,
                         shim_tests[k]->test_name);
                if (strcmp(id, argv[i + 1]) == 0)
                    return shim_run_one(shim_tests[k]);
            }
            fprintf(stderr, "no test %s\n", argv[i + 1]);
            return 2;
        }
        if (strncmp(argv[i], "--filter=", 9) == 0)
            filter = argv[i] + 9;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc)
            filter = argv[++i];
        else if (strcmp(argv[i], "--jobs") == 0 || strcmp(argv[i], "-j") == 0)
            i++; /* tests run one at a time */
    }
    int tested = 0, passing = 0, failing = 0, skipped = 0;
    for (int k = 0; k < shim_ntests; k++) {
        struct shim_test *t = shim_tests[k];
        char id[256], why[160] = "";
        snprintf(id, sizeof id, "%s/%s", t->suite_name, t->test_name);
        if (t->disabled || (filter && fnmatch(filter, id, 0) != 0))
            continue;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            perror("fork");
            return 1;
        }
        if (pid == 0) {
            /* A fresh image: nothing inherited from this process but the
             * environment and the open files. */
            char *args[] = {argv[0], "--shim-run", id, NULL};
            execv("/proc/self/exe", args);
            perror("exec");
            _exit(127);
        }
        int status = 0;
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
            ;
        const char *v = shim_verdict(t, status, why, sizeof why);
        tested++;
        if (strcmp(v, "PASS") == 0)
            passing++;
        else if (strcmp(v, "SKIP") == 0)
            skipped++;
        else
            failing++;
        if (strcmp(v, "PASS") != 0)
            fprintf(stderr, "[%s] %s::%s%s%s\n", v, t->suite_name, t->test_name, why[0] ? ": " : "",
                    why);
    }
    fprintf(stderr, "[====] Synthesis: Tested: %d | Passing: %d | Failing: %d | Skipped: %d\n",
            tested, passing, failing, skipped);
    return failing ? 1 : 0;
}

#endif
