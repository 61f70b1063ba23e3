/* Preloaded (LD_PRELOAD) into a command under test: before each sleeping system call
   (clock_nanosleep: time.sleep; select: select.select) spin WIDEN_US microseconds in user
   space. A signal that lands there is taken by its C-level handler after the interpreter's
   last look and before the sleep begins, as when the thread is preempted there under load
   (docs/decisions/170-ctrl-c-sleep-race.md). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <sys/select.h>
#include <time.h>

static void spin(void) {
    const char *text = getenv("WIDEN_US");
    long us = text ? atol(text) : 0;
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

int clock_nanosleep(clockid_t c, int f, const struct timespec *r, struct timespec *m) {
    static int (*real)(clockid_t, int, const struct timespec *, struct timespec *);
    if (!real) real = dlsym(RTLD_NEXT, "clock_nanosleep");
    spin();
    return real(c, f, r, m);
}

int select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *t) {
    static int (*real)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
    if (!real) real = dlsym(RTLD_NEXT, "select");
    spin();
    return real(n, r, w, e, t);
}
