/*
 * The node test's workload: a tiny static HTTP/1.0 server (no libc beyond the static glibc, no
 * shell in its image). It listens on 0.0.0.0:8080 and answers every request with one line that
 * lets the test check what the pod got: its host name (the pod's name), its uid, the contents
 * of the file named by $SECRET_FILE (a Secret volume), whether it could write $SCRATCH_DIR
 * (an emptyDir under a read-only root) and whether the file named by $TOKEN_FILE (the
 * ServiceAccount token) is there. SIGTERM ends it at once (as PID 1 it has no default
 * handler).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
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

int main(void) {
  signal(SIGTERM, stop);
  signal(SIGINT, stop);
  signal(SIGPIPE, SIG_IGN);
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
    char req[1024];
    (void)read(c, req, sizeof req);
    char body[1024], resp[1200];
    int blen = snprintf(body, sizeof body, "hostname=%s uid=%d secret=%s scratch=%s token=%s\n",
                        host, (int)getuid(), secret, scratch, has_token);
    int rlen = snprintf(resp, sizeof resp,
                        "HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n"
                        "Connection: close\r\n\r\n%s", blen, body);
    (void)write(c, resp, rlen);
    close(c);
  }
}
