/* Measures the two recorder mechanisms glassbox could use, on the same command, side by side:
 *   notify  - seccomp user notification: the supervisor reads the path and answers CONTINUE
 *             (one round trip per recorded call, no result);
 *   ptrace  - seccomp RET_TRACE + ptrace: a seccomp stop to read the path, then a syscall-exit
 *             stop to read the result (two stops per recorded call);
 *   ptrace1 - seccomp RET_TRACE + ptrace with the entry stop only (no result).
 * Only the open family is recorded, as in benchmark (a). Prints the CPU seconds (user+sys) of
 * the supervisor and the traced tree together. Build: cc -O2 -o mech mech.c
 * Usage: mech notify|ptrace|ptrace1|none -- COMMAND [ARGS...] */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

static long recorded;

static int install(unsigned int action, unsigned int flags) {
  struct sock_filter f[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_open, 4, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat, 3, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_creat, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, action),
  };
  struct sock_fprog p = {.len = sizeof f / sizeof f[0], .filter = f};
  prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
  return syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, flags, &p);
}

static void readstr(pid_t pid, unsigned long addr, char *buf, size_t n) {
  struct iovec l = {buf, n - 1}, r = {(void *)addr, n - 1};
  ssize_t got = process_vm_readv(pid, &l, 1, &r, 1, 0);
  buf[got > 0 ? got : 0] = 0;
}

static void sendfd(int s, int fd) {
  char c = 0;
  struct iovec io = {&c, 1};
  union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } u;
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
  struct cmsghdr *c1 = CMSG_FIRSTHDR(&m);
  c1->cmsg_level = SOL_SOCKET; c1->cmsg_type = SCM_RIGHTS; c1->cmsg_len = CMSG_LEN(sizeof(int));
  memcpy(CMSG_DATA(c1), &fd, sizeof fd);
  sendmsg(s, &m, 0);
}

static int recvfd(int s) {
  char c;
  struct iovec io = {&c, 1};
  union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr a; } u;
  struct msghdr m = {.msg_iov = &io, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
  if (recvmsg(s, &m, 0) <= 0) return -1;
  int fd;
  memcpy(&fd, CMSG_DATA(CMSG_FIRSTHDR(&m)), sizeof fd);
  return fd;
}

static void run_notify(char **argv) {
  int sv[2];
  socketpair(AF_UNIX, SOCK_STREAM, 0, sv);
  pid_t pid = fork();
  if (pid == 0) {
    int fd = install(SECCOMP_RET_USER_NOTIF, SECCOMP_FILTER_FLAG_NEW_LISTENER);
    sendfd(sv[1], fd);
    close(fd);
    execvp(argv[0], argv);
    _exit(127);
  }
  int fd = recvfd(sv[0]);
  if (getenv("SYNC")) {
    unsigned long long fl = 1; /* SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP */
    if (ioctl(fd, _IOW('!', 4, unsigned long long), fl) < 0) perror("set flags");
  }
  struct seccomp_notif req;
  struct seccomp_notif_resp resp;
  char path[4096];
  for (;;) {
    memset(&req, 0, sizeof req);
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_RECV, &req) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    unsigned long a = req.data.nr == SYS_open || req.data.nr == SYS_creat ? req.data.args[0] : req.data.args[1];
    readstr(req.pid, a, path, sizeof path);
    ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id);
    recorded++;
    memset(&resp, 0, sizeof resp);
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    ioctl(fd, SECCOMP_IOCTL_NOTIF_SEND, &resp);
    if (waitpid(pid, NULL, WNOHANG) == pid) break;
  }
  waitpid(pid, NULL, 0);
}

static void run_ptrace(char **argv, int want_exit) {
  pid_t pid = fork();
  if (pid == 0) {
    ptrace(PTRACE_TRACEME, 0, 0, 0);
    raise(SIGSTOP);
    install(SECCOMP_RET_TRACE, 0);
    execvp(argv[0], argv);
    _exit(127);
  }
  int st;
  waitpid(pid, &st, 0);
  ptrace(PTRACE_SETOPTIONS, pid, 0,
         PTRACE_O_TRACESECCOMP | PTRACE_O_TRACESYSGOOD | PTRACE_O_EXITKILL | PTRACE_O_TRACECLONE |
             PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK | PTRACE_O_TRACEEXEC);
  ptrace(PTRACE_CONT, pid, 0, 0);
  char path[4096];
  for (;;) {
    pid_t t = waitpid(-1, &st, __WALL);
    if (t < 0) break;
    if (WIFEXITED(st) || WIFSIGNALED(st)) {
      if (t == pid) break;
      continue;
    }
    int sig = 0;
    if (WIFSTOPPED(st)) {
      int ev = st >> 16;
      if (ev == PTRACE_EVENT_SECCOMP) {
        struct user_regs_struct r;
        ptrace(PTRACE_GETREGS, t, 0, &r);
        unsigned long a = r.orig_rax == SYS_open || r.orig_rax == SYS_creat ? r.rdi : r.rsi;
        readstr(t, a, path, sizeof path);
        recorded++;
        if (want_exit) { ptrace(PTRACE_SYSCALL, t, 0, 0); continue; }
      } else if (WSTOPSIG(st) == (SIGTRAP | 0x80)) {
        struct user_regs_struct r;
        ptrace(PTRACE_GETREGS, t, 0, &r); /* r.rax is the result */
      } else if (ev == 0 && WSTOPSIG(st) != SIGTRAP && WSTOPSIG(st) != SIGSTOP) {
        sig = WSTOPSIG(st);
      }
    }
    ptrace(PTRACE_CONT, t, 0, sig);
  }
}

int main(int argc, char **argv) {
  if (argc < 4) { fprintf(stderr, "usage: mech notify|ptrace|ptrace1|none -- CMD...\n"); return 2; }
  char **cmd = argv + 3;
  if (!strcmp(argv[1], "notify")) run_notify(cmd);
  else if (!strcmp(argv[1], "ptrace")) run_ptrace(cmd, 1);
  else if (!strcmp(argv[1], "ptrace1")) run_ptrace(cmd, 0);
  else { pid_t p = fork(); if (!p) { execvp(cmd[0], cmd); _exit(127); } waitpid(p, NULL, 0); }
  struct rusage s, c;
  getrusage(RUSAGE_SELF, &s);
  getrusage(RUSAGE_CHILDREN, &c);
  double cpu = s.ru_utime.tv_sec + s.ru_stime.tv_sec + c.ru_utime.tv_sec + c.ru_stime.tv_sec +
               (s.ru_utime.tv_usec + s.ru_stime.tv_usec + c.ru_utime.tv_usec + c.ru_stime.tv_usec) / 1e6;
  fprintf(stderr, "%s cpu=%.3f recorded=%ld\n", argv[1], cpu, recorded);
  return 0;
}
