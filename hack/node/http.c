/*
 * The node test's workload: a tiny static HTTP/1.0 server (no libc beyond the static glibc, no
 * shell in its image). It listens on 0.0.0.0:8080 and answers every request with one line that
 * lets the test check what the pod got: its host name (the pod's name), its uid, the contents
 * of the file named by $SECRET_FILE (a Secret volume), whether it could write $SCRATCH_DIR
 * (an emptyDir under a read-only root) and whether the file named by $TOKEN_FILE (the
 * ServiceAccount token) is there. `GET /connect/A.B.C.D:PORT` instead answers whether a TCP
 * connection from the pod to that address opened, and `GET /fetch/A.B.C.D:PORT` relays the body
 * of a `GET /` there (pod to Service to pod). SIGTERM ends it at once (as PID 1 it has no
 * default handler).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <errno.h>
#include <sys/time.h>
#include <sys/socket.h>

static void stop(int sig) { (void)sig; _exit(0); }

static void read_file(const char *path, char *out, size_t size) {
  out[0] = '\0';
  if (path == NULL) return;
  int fd = open(path, O_RDONLY);
  if (fd < 0) { snprintf(out, size, "(unreadable)"); return; }
  ssize_t n = read(fd, out, size - 1);
  close(fd);
  out[n > 0 ? n : 0] = '\0';
  for (char *c = out; *c; c++) if (*c == '\n' || *c == ' ') *c = '_';
}

/* Connects to "A.B.C.D:PORT" (up to a space), with 3-second timeouts; -1 when it cannot. */
static int dial(const char *target) {
  char ip[64] = "";
  int port = 0;
  if (sscanf(target, "%63[0-9.]:%d", ip, &port) != 2) return -1;
  struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons((unsigned short)port)};
  if (inet_pton(AF_INET, ip, &to.sin_addr) != 1) return -1;
  int c = socket(AF_INET, SOCK_STREAM, 0);
  struct timeval t = {.tv_sec = 3};
  setsockopt(c, SOL_SOCKET, SO_SNDTIMEO, &t, sizeof t);
  setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &t, sizeof t);
  if (connect(c, (struct sockaddr *)&to, sizeof to) < 0) {
    int e = errno;
    close(c);
    errno = e;
    return -1;
  }
  return c;
}

/* The body of `GET /` at target, or why not, into out. */
static void fetch(const char *target, char *out, size_t size) {
  int c = dial(target);
  if (c < 0) { snprintf(out, size, "fetch-failed=%d\n", errno); return; }
  const char *req = "GET / HTTP/1.0\r\n\r\n";
  (void)write(c, req, strlen(req));
  char buf[2048];
  size_t n = 0;
  ssize_t r;
  while (n < sizeof buf - 1 && (r = read(c, buf + n, sizeof buf - 1 - n)) > 0) n += (size_t)r;
  buf[n] = '\0';
  close(c);
  const char *body = strstr(buf, "\r\n\r\n");
  snprintf(out, size, "fetched %s", body ? body + 4 : "(no body)\n");
}

int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  signal(SIGPIPE, SIG_IGN);
  signal(SIGCHLD, SIG_IGN); /* one child per request, reaped by the kernel */
  char host[256] = "", secret[256], scratch[16] = "no", token[4096];
  gethostname(host, sizeof host - 1);
  read_file(getenv("SECRET_FILE"), secret, sizeof secret);
  read_file(getenv("TOKEN_FILE"), token, sizeof token);
  const char *has_token = token[0] != '\0' && token[0] != '(' ? "yes" : "no";
  const char *dir = getenv("SCRATCH_DIR");
  if (dir != NULL) {
    char path[512];
    snprintf(path, sizeof path, "%s/written", dir);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd >= 0 && write(fd, "ok", 2) == 2) snprintf(scratch, sizeof scratch, "yes");
    if (fd >= 0) close(fd);
  }
  int s = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_port = htons(8080), .sin_addr.s_addr = INADDR_ANY};
  if (s < 0 || bind(s, (struct sockaddr *)&addr, sizeof addr) < 0 || listen(s, 64) < 0) {
    perror("listening on 0.0.0.0:8080");
    return 1;
  }
  fprintf(stderr, "listening on 0.0.0.0:8080 as uid %d\n", (int)getuid());
  for (;;) {
    int c = accept(s, NULL, NULL);
    if (c < 0) continue;
    pid_t child = fork();
    if (child != 0) { /* the parent (or a failed fork: answer nothing) */
      close(c);
      continue;
    }
    signal(SIGTERM, SIG_DFL);
    close(s);
    char req[1024];
    ssize_t got = read(c, req, sizeof req - 1);
    req[got > 0 ? got : 0] = '\0';
    char body[2048], resp[2300];
    int blen;
    if (strncmp(req, "GET /connect/", 13) == 0) {
      int d = dial(req + 13);
      blen = snprintf(body, sizeof body, d < 0 ? "connect-failed=%d\n" : "connected\n", errno);
      if (d >= 0) close(d);
    } else if (strncmp(req, "GET /fetch/", 11) == 0) {
      fetch(req + 11, body, sizeof body);
      blen = (int)strlen(body);
    } else {
      blen = snprintf(body, sizeof body, "hostname=%s uid=%d secret=%s scratch=%s token=%s\n",
                      host, (int)getuid(), secret, scratch, has_token);
    }
    int rlen = snprintf(resp, sizeof resp,
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                        "Connection: close\r\n\r\n%s", blen, body);
    (void)write(c, resp, rlen);
    close(c);
    _exit(0);
  }
}
