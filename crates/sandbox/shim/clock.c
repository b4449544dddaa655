/* glassbox's wall-clock shim: preloaded into every dynamically linked program of a trigger
 * run, it moves the wall clock (CLOCK_REALTIME and its kin, gettimeofday, time, timespec_get)
 * forward by the seconds written in OFFSET_FILE. The monotonic and boot clocks are moved by the
 * sandbox's time namespace, not here (the kernel moves them for every program, statically
 * linked ones too, and for /proc/uptime).
 *
 * Written here rather than taken from Debian's libfaketime (0.9.10): with the monotonic clock
 * left to the time namespace (FAKETIME_DONT_FAKE_MONOTONIC) its clock_nanosleep turns an
 * absolute monotonic sleep into an invalid one (Python's time.sleep fails with EINVAL), and
 * with the monotonic clock faked its missing sem_clockwait makes every Python timeout on a
 * lock wait for decades; both are fixed upstream only after the release the registries carry.
 * This shim moves the wall clock alone, and gives the offset back to the calls that take an
 * absolute wall-clock time computed from the moved clock (a deadline), so that waits last
 * what they were meant to.
 *
 * What it cannot move: a statically linked program (Go, musl static builds), a program that
 * reads the clock by a raw syscall or its own vDSO lookup, and a child started with an
 * environment without LD_PRELOAD. docs/triggers.md says so; the sandbox's tests show each. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdlib.h>
#include <sys/time.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define OFFSET_FILE "/run/glassbox/clock/offset"

/* The offset in seconds; read once (0 until read, and if the file is missing). */
static volatile long long offset_s;
static volatile int loaded;

static void load(void) {
  if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
    return;
  long long v = 0;
  int fd = open(OFFSET_FILE, O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    char b[32];
    ssize_t n = read(fd, b, sizeof b - 1);
    close(fd);
    if (n > 0) {
      b[n] = 0;
      v = strtoll(b, NULL, 10);
    }
  }
  offset_s = v;
  __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
}

static long long offset(void) {
  load();
  return offset_s;
}

__attribute__((constructor)) static void init(void) { load(); }

static int realtime_clock(clockid_t c) {
  return c == CLOCK_REALTIME || c == CLOCK_REALTIME_COARSE || c == CLOCK_TAI ||
         c == CLOCK_REALTIME_ALARM;
}

/* The real wall clock, in seconds. */
static long long real_now(void);

/* An absolute wall-clock time the program computed from the moved clock, moved back: a
 * time later than the real clock by more than half the offset can only have come from the
 * moved clock (a deadline from the real one, or a monotonic time, is far smaller). */
static const struct timespec *back(const struct timespec *t, struct timespec *out) {
  long long o = offset();
  if (t == NULL || o == 0 || t->tv_sec < real_now() + o / 2)
    return t;
  *out = *t;
  out->tv_sec -= o;
  return out;
}

#define REAL(ret, name, args)                                                                \
  static ret(*real_##name) args;                                                             \
  static ret(*get_##name(void)) args {                                                       \
    if (!real_##name)                                                                        \
      real_##name = (ret(*) args)dlsym(RTLD_NEXT, #name);                                    \
    return real_##name;                                                                      \
  }

REAL(int, clock_gettime, (clockid_t, struct timespec *))
REAL(int, gettimeofday, (struct timeval *, void *))
REAL(time_t, time, (time_t *))
REAL(int, timespec_get, (struct timespec *, int))
REAL(int, clock_nanosleep, (clockid_t, int, const struct timespec *, struct timespec *))
REAL(int, pthread_cond_timedwait, (pthread_cond_t *, pthread_mutex_t *, const struct timespec *))
REAL(int, pthread_cond_clockwait,
     (pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *))
REAL(int, pthread_mutex_timedlock, (pthread_mutex_t *, const struct timespec *))
REAL(int, pthread_rwlock_timedrdlock, (pthread_rwlock_t *, const struct timespec *))
REAL(int, pthread_rwlock_timedwrlock, (pthread_rwlock_t *, const struct timespec *))
REAL(int, sem_timedwait, (sem_t *, const struct timespec *))
REAL(int, sem_clockwait, (sem_t *, clockid_t, const struct timespec *))
REAL(int, timerfd_settime, (int, int, const struct itimerspec *, struct itimerspec *))

static long long real_now(void) {
  struct timespec t;
  if (get_clock_gettime()(CLOCK_REALTIME, &t) != 0)
    return 0;
  return t.tv_sec;
}

int clock_gettime(clockid_t c, struct timespec *t) {
  int r = get_clock_gettime()(c, t);
  if (r == 0 && realtime_clock(c))
    t->tv_sec += offset();
  return r;
}

int gettimeofday(struct timeval *tv, void *tz) {
  int r = get_gettimeofday()(tv, tz);
  if (r == 0)
    tv->tv_sec += offset();
  return r;
}

time_t time(time_t *out) {
  time_t t = get_time()(NULL);
  if (t != (time_t)-1)
    t += offset();
  if (out != NULL)
    *out = t;
  return t;
}

int timespec_get(struct timespec *t, int base) {
  int r = get_timespec_get()(t, base);
  if (r == TIME_UTC)
    t->tv_sec += offset();
  return r;
}

int clock_nanosleep(clockid_t c, int flags, const struct timespec *req, struct timespec *rem) {
  struct timespec moved;
  if ((flags & TIMER_ABSTIME) && realtime_clock(c))
    req = back(req, &moved);
  return get_clock_nanosleep()(c, flags, req, rem);
}

/* A condition variable's clock is its attribute's, which the call does not say: a
 * deadline from the moved wall clock is told from a monotonic one by its size. */
int pthread_cond_timedwait(pthread_cond_t *c, pthread_mutex_t *m, const struct timespec *t) {
  struct timespec moved;
  return get_pthread_cond_timedwait()(c, m, back(t, &moved));
}

int pthread_cond_clockwait(pthread_cond_t *c, pthread_mutex_t *m, clockid_t k,
                           const struct timespec *t) {
  struct timespec moved;
  return get_pthread_cond_clockwait()(c, m, k, realtime_clock(k) ? back(t, &moved) : t);
}

int pthread_mutex_timedlock(pthread_mutex_t *m, const struct timespec *t) {
  struct timespec moved;
  return get_pthread_mutex_timedlock()(m, back(t, &moved));
}

int pthread_rwlock_timedrdlock(pthread_rwlock_t *l, const struct timespec *t) {
  struct timespec moved;
  return get_pthread_rwlock_timedrdlock()(l, back(t, &moved));
}

int pthread_rwlock_timedwrlock(pthread_rwlock_t *l, const struct timespec *t) {
  struct timespec moved;
  return get_pthread_rwlock_timedwrlock()(l, back(t, &moved));
}

int sem_timedwait(sem_t *s, const struct timespec *t) {
  struct timespec moved;
  return get_sem_timedwait()(s, back(t, &moved));
}

int sem_clockwait(sem_t *s, clockid_t k, const struct timespec *t) {
  struct timespec moved;
  return get_sem_clockwait()(s, k, realtime_clock(k) ? back(t, &moved) : t);
}

/* A timer descriptor's clock is its creation's: as for a condition variable, an absolute
 * time from the moved wall clock is told by its size. */
int timerfd_settime(int fd, int flags, const struct itimerspec *n, struct itimerspec *old) {
  struct itimerspec moved;
  if ((flags & TFD_TIMER_ABSTIME) && n != NULL) {
    moved = *n;
    struct timespec v;
    const struct timespec *b = back(&n->it_value, &v);
    moved.it_value = *b;
    n = &moved;
  }
  return get_timerfd_settime()(fd, flags, n, old);
}
