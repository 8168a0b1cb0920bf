/*
 * memwalctl — talk to memwald's admin socket.
 *
 *   memwalctl [-s SOCKET | -c CONFIG] [--json] COMMAND [ARG...]
 *
 * The socket: -s, else the admin_socket of the configuration -c names
 * (read as memwald reads it, daemon/config.h), else $MEMWALD_ADMIN_SOCKET,
 * else /run/memwald/admin.sock.
 *
 * Sends one line ("COMMAND ARG...\n") to the Unix socket, reads the one JSON
 * reply until the daemon closes (net/admin.h), and prints it: `status` as a
 * table, `metrics` as Prometheus text, anything else as key=value pairs; the
 * raw reply with --json. Exit status: 0 on {"ok":true}, 1 when the daemon
 * answers {"ok":false,...} (its message goes to stderr), 2 for usage errors,
 * 3 when the socket cannot be reached or the reply is not what the protocol
 * says. The reply parser below is a small JSON DOM with a depth and size
 * limit; it never trusts the daemon's bytes.
 *
 * `memwalctl token NAME GRANT...` talks to no daemon: it makes a producer's
 * token (32 random bytes, base64url, "mwt_" first) and prints the
 * credentials_file line that holds its SHA-256 (net/creds.h) on stdout,
 * the token itself once on stderr.
 */
#include <assert.h>
#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "daemon/config.h"
#include "net/creds.h"
#include "net/tls.h"

#ifndef MW_VERSION
#define MW_VERSION "0.1.0"
#endif
#define DEFAULT_SOCKET "/run/memwald/admin.sock"
#define MAX_REPLY_BYTES ((size_t)64 << 20)
#define MAX_DEPTH 64
#define MAX_REQUEST_BYTES 4096

static const char USAGE[] =
    "usage: memwalctl [-s SOCKET | -c CONFIG] [--json] COMMAND [ARG...]\n"
    "\n"
    "Commands (one per call; the daemon replies once, then closes):\n"
    "  status                 tables and shards: state, epoch, manifest version, WAL\n"
    "                         position, replay_after, MemTable rows/bytes, frozen\n"
    "                         MemTables, SSTables, ACTIVE/SEALED; connections, uptime\n"
    "  flush [TABLE [SHARD]]  flush MemTables; replies once committed\n"
    "  compact [TABLE]        flush, then compact every ACTIVE shard's SSTables into\n"
    "                         the base table; replies once committed\n"
    "  seal TABLE SHARD       stop the shard and commit SEALED\n"
    "  unseal TABLE SHARD     commit ACTIVE and claim it again\n"
    "  drop TABLE SHARD       delete a sealed shard's MemWAL directory\n"
    "  drop-table TABLE       two-phase drop of every shard of the table\n"
    "  claim TABLE SHARD      claim (fence the current writer, new epoch)\n"
    "  release TABLE SHARD    flush and stop owning the shard\n"
    "  metrics                Prometheus text exposition\n"
    "  token NAME GRANT...    no daemon: a new producer token; prints the\n"
    "                         credentials_file line (its SHA-256) on stdout and\n"
    "                         the token, once, on stderr. GRANT: TABLE=write,\n"
    "                         TABLE=delete, TABLE=write,delete; TABLE * = all\n"
    "  fault TABLE set K=V,.. | fault TABLE clear\n"
    "                         tests only (daemon started with MEMWALD_TEST_FAULTS=1):\n"
    "                         inject storage faults (docs/protocol.md)\n"
    "\n"
    "Options:\n"
    "  -s, --socket PATH  admin socket (default: -c's admin_socket, else\n"
    "                     $MEMWALD_ADMIN_SOCKET, else " DEFAULT_SOCKET ")\n"
    "  -c, --config FILE  memwald's configuration: use its admin_socket\n"
    "  -j, --json         print the daemon's JSON reply as is\n"
    "  -h, --help         this text;  -V, --version  the version\n"
    "\n"
    "Exit status: 0 ok, 1 the daemon refused (its message on stderr), 2 usage,\n"
    "3 cannot reach the daemon or bad reply.\n";

/* ------------------------------------------------------------------ JSON */

typedef enum { J_NULL, J_BOOL, J_NUM, J_STR, J_ARR, J_OBJ } jtype_t;

typedef struct jv {
  jtype_t t;
  bool b;
  char *s;          /* J_STR: decoded; J_NUM: the literal */
  struct jv *items; /* J_ARR / J_OBJ values */
  char **keys;      /* J_OBJ */
  size_t n;
} jv_t;

typedef struct jp {
  const char *p, *end;
  const char *err;
} jp_t;

static void jv_free(jv_t *v) {
  assert(v != NULL);
  assert(v->t == J_ARR || v->t == J_OBJ || v->n == 0); /* only containers hold items */
  for (size_t i = 0; i < v->n; i++) {
    jv_free(&v->items[i]);
    if (v->keys) free(v->keys[i]);
  }
  free(v->items);
  free(v->keys);
  free(v->s);
}

static void ws(jp_t *j) {
  assert(j->p <= j->end);
  while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r')) j->p++;
}

static int put_utf8(char *o, unsigned cp) {
  assert(o != NULL);
  assert(cp <= 0xffff); /* from four hex digits */
  if (cp < 0x80) return o[0] = (char)cp, 1;
  if (cp < 0x800) return o[0] = (char)(0xc0 | cp >> 6), o[1] = (char)(0x80 | (cp & 0x3f)), 2;
  if (cp < 0x10000)
    return o[0] = (char)(0xe0 | cp >> 12), o[1] = (char)(0x80 | ((cp >> 6) & 0x3f)),
           o[2] = (char)(0x80 | (cp & 0x3f)), 3;
  return o[0] = (char)(0xf0 | cp >> 18), o[1] = (char)(0x80 | ((cp >> 12) & 0x3f)),
         o[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), o[3] = (char)(0x80 | (cp & 0x3f)), 4;
}

static int hex4(const char *p, unsigned *out) {
  assert(p != NULL);
  assert(out != NULL);
  unsigned v = 0;
  for (int i = 0; i < 4; i++) {
    char c = p[i];
    v <<= 4;
    if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
    else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
    else return -1;
  }
  *out = v;
  return 0;
}

static char *jstring(jp_t *j) {
  if (j->p >= j->end || *j->p != '"') return j->err = "expected a string", NULL;
  j->p++;
  /* Size the copy by this string's own span (decoding never grows it), not
   * by the rest of the reply: a 1 024-shard status holds ~12 000 strings,
   * and a rest-of-reply buffer each cost gigabytes of mappings and seconds. */
  const char *q = j->p;
  while (q < j->end && *q != '"') q += (*q == '\\' && q + 1 < j->end) ? 2 : 1;
  size_t cap = (size_t)(q - j->p) + 1;
  assert(cap <= (size_t)(j->end - j->p) + 1);
  char *o = malloc(cap), *w = o;
  if (!o) return j->err = "out of memory", NULL;
  while (j->p < j->end && *j->p != '"') {
    char c = *j->p++;
    if ((unsigned char)c < 0x20) break;
    if (c != '\\') {
      *w++ = c;
      continue;
    }
    if (j->p >= j->end) break;
    char e = *j->p++;
    unsigned cp;
    switch (e) {
    case 'n': *w++ = '\n'; break;
    case 't': *w++ = '\t'; break;
    case 'r': *w++ = '\r'; break;
    case 'b': *w++ = '\b'; break;
    case 'f': *w++ = '\f'; break;
    case '"': case '\\': case '/': *w++ = e; break;
    case 'u':
      if (j->end - j->p < 4 || hex4(j->p, &cp) < 0) goto bad;
      j->p += 4;
      if (cp == 0) cp = 0xfffd; /* keep C strings whole */
      w += put_utf8(w, cp);    /* surrogates pass through as-is: display only */
      break;
    default: goto bad;
    }
  }
  if (j->p >= j->end || *j->p != '"') goto bad;
  j->p++;
  *w = 0;
  return o;
bad:
  free(o);
  j->err = "bad string";
  return NULL;
}

static int jvalue(jp_t *j, jv_t *v, int depth) {
  assert(j->p <= j->end);
  assert(depth >= 0);
  memset(v, 0, sizeof *v);
  if (depth > MAX_DEPTH) return j->err = "nested too deeply", -1;
  ws(j);
  if (j->p >= j->end) return j->err = "unexpected end", -1;
  char c = *j->p;
  if (c == '{' || c == '[') {
    bool obj = c == '{';
    v->t = obj ? J_OBJ : J_ARR;
    j->p++;
    ws(j);
    if (j->p < j->end && *j->p == (obj ? '}' : ']')) return j->p++, 0;
    size_t cap = 0;
    for (;;) {
      if (v->n == cap) {
        cap = cap ? cap * 2 : 8;
        jv_t *ni = realloc(v->items, cap * sizeof *ni);
        char **nk = obj ? realloc(v->keys, cap * sizeof *nk) : NULL;
        if (!ni || (obj && !nk)) {
          if (ni) v->items = ni;
          if (nk) v->keys = nk;
          return j->err = "out of memory", -1;
        }
        v->items = ni;
        if (obj) v->keys = nk;
      }
      if (obj) {
        ws(j);
        char *k = jstring(j);
        if (!k) return -1;
        v->keys[v->n] = k;
        ws(j);
        if (j->p >= j->end || *j->p != ':') {
          v->items[v->n++] = (jv_t){0};
          return j->err = "expected ':'", -1;
        }
        j->p++;
      }
      int rc = jvalue(j, &v->items[v->n], depth + 1);
      v->n++;
      if (rc < 0) return -1;
      ws(j);
      if (j->p < j->end && *j->p == ',') {
        j->p++;
        continue;
      }
      if (j->p < j->end && *j->p == (obj ? '}' : ']')) return j->p++, 0;
      return j->err = "expected ',' or a closing bracket", -1;
    }
  }
  if (c == '"') {
    v->t = J_STR;
    return (v->s = jstring(j)) ? 0 : -1;
  }
  if (j->end - j->p >= 4 && memcmp(j->p, "true", 4) == 0) return v->t = J_BOOL, v->b = true, j->p += 4, 0;
  if (j->end - j->p >= 5 && memcmp(j->p, "false", 5) == 0) return v->t = J_BOOL, j->p += 5, 0;
  if (j->end - j->p >= 4 && memcmp(j->p, "null", 4) == 0) return v->t = J_NULL, j->p += 4, 0;
  const char *s = j->p;
  while (j->p < j->end && strchr("+-0123456789.eE", *j->p)) j->p++;
  if (j->p == s || j->p - s > 64) return j->err = "unexpected character", -1;
  v->t = J_NUM;
  v->s = strndup(s, (size_t)(j->p - s));
  return v->s ? 0 : -1;
}

static const jv_t *jget(const jv_t *o, const char *k) {
  assert(k != NULL);
  if (!o || o->t != J_OBJ) return NULL;
  for (size_t i = 0; i < o->n; i++)
    if (strcmp(o->keys[i], k) == 0) return &o->items[i];
  return NULL;
}

/* Scalar as text (numbers as written, null as "-"). */
static const char *jtext(const jv_t *v) {
  if (!v || v->t == J_NULL) return "-";
  if (v->t == J_BOOL) return v->b ? "true" : "false";
  if (v->t == J_STR || v->t == J_NUM) return v->s;
  return v->t == J_ARR ? "[...]" : "{...}";
}

/* ------------------------------------------------------------------ output */

#define N_COLS 13
static const char *const COL_HEAD[N_COLS] = {"TABLE", "SHARD", "KEY", "STATE", "STATUS",
                                             "EPOCH", "VERSION", "WAL", "REPLAY_AFTER",
                                             "MT_ROWS", "MT_BYTES", "FROZEN", "SSTABLES"};
static const char *const COL_KEY[N_COLS] = {NULL, "id", "key", "state", "status",
                                            "epoch", "manifest_version", "wal_position", "replay_after",
                                            "memtable_rows", "memtable_bytes", "frozen", "sstables"};

static void print_status(const jv_t *r) {
  assert(r != NULL);
  assert(r->t == J_OBJ);
  printf("memwald %s, up %ss, %s connection(s)", jtext(jget(r, "version")), jtext(jget(r, "uptime_s")),
         jtext(jget(r, "connections")));
  const jv_t *heap = jget(r, "heap_live_bytes"); /* absent from older daemons */
  if (heap && heap->t == J_NUM) printf(", heap %.1f MiB live", strtod(heap->s, NULL) / 1048576.0);
  printf("\n");
  const jv_t *tables = jget(r, "tables");
  size_t w[N_COLS];
  for (int c = 0; c < N_COLS; c++) w[c] = strlen(COL_HEAD[c]);
  for (int pass = 0; pass < 2; pass++) {
    if (pass == 1) {
      for (int c = 0; c < N_COLS; c++) printf("%-*s%s", c + 1 < N_COLS ? (int)w[c] : 0, COL_HEAD[c], c + 1 < N_COLS ? "  " : "\n");
    }
    for (size_t t = 0; tables && tables->t == J_ARR && t < tables->n; t++) {
      const jv_t *tab = &tables->items[t];
      const jv_t *shards = jget(tab, "shards");
      if (pass == 1 && (!shards || shards->t != J_ARR || shards->n == 0))
        printf("%-*s  (no shards)\n", (int)w[0], jtext(jget(tab, "name")));
      for (size_t s = 0; shards && shards->t == J_ARR && s < shards->n; s++) {
        for (int c = 0; c < N_COLS; c++) {
          const char *v = c == 0 ? jtext(jget(tab, "name")) : jtext(jget(&shards->items[s], COL_KEY[c]));
          if (pass == 0 && strlen(v) > w[c]) w[c] = strlen(v);
          if (pass == 1) printf("%-*s%s", c + 1 < N_COLS ? (int)w[c] : 0, v, c + 1 < N_COLS ? "  " : "\n");
        }
      }
    }
  }
}

/* Under the table: why each parked shard is parked, each fault episode,
 * and the storage of each table that has failed or has faults injected. */
static void print_faults(const jv_t *r) {
  assert(r != NULL);
  assert(r->t == J_OBJ);
  const jv_t *tables = jget(r, "tables");
  for (size_t t = 0; tables && tables->t == J_ARR && t < tables->n; t++) {
    const jv_t *tab = &tables->items[t];
    const jv_t *shards = jget(tab, "shards");
    for (size_t k = 0; shards && shards->t == J_ARR && k < shards->n; k++) {
      const jv_t *sh = &shards->items[k];
      const jv_t *reason = jget(sh, "reason"), *f = jget(sh, "fault");
      if (reason && reason->t == J_STR && reason->s[0])
        printf("%s %s %s: %s\n", jtext(jget(tab, "name")), jtext(jget(sh, "key")),
               jtext(jget(sh, "state")), reason->s);
      if (f && f->t == J_OBJ)
        printf("%s %s fault: %s %s for %s ms, %s failed retr%s, next retry in %s ms: %s\n",
               jtext(jget(tab, "name")), jtext(jget(sh, "key")), jtext(jget(f, "op")),
               jtext(jget(f, "errno")), jtext(jget(f, "for_ms")), jtext(jget(f, "retries")),
               strcmp(jtext(jget(f, "retries")), "1") == 0 ? "y" : "ies",
               jtext(jget(f, "next_retry_ms")), jtext(jget(f, "error")));
    }
  }
  const jv_t *st = jget(r, "storage");
  for (size_t i = 0; st && st->t == J_ARR && i < st->n; i++) {
    const jv_t *e = &st->items[i];
    const jv_t *inj = jget(e, "fault_injected");
    if (strcmp(jtext(jget(e, "ops_failed")), "0") == 0 && !inj) continue;
    printf("storage %s: %s, %s ok, %s failed, %s consecutive failures, last error %s %s ms ago%s\n",
           jtext(jget(e, "table")), jtext(jget(e, "backend")), jtext(jget(e, "ops_ok")),
           jtext(jget(e, "ops_failed")), jtext(jget(e, "consecutive_failures")),
           jtext(jget(e, "last_error")), jtext(jget(e, "last_error_ms_ago")),
           inj ? " (TEST faults injected)" : "");
  }
}

static void print_result(const char *cmd, const jv_t *r) {
  assert(cmd != NULL);
  assert(r != NULL);
  if (strcmp(cmd, "status") == 0 && r->t == J_OBJ) {
    print_status(r);
    print_faults(r);
    return;
  }
  if (strcmp(cmd, "metrics") == 0) {
    const jv_t *t = jget(r, "text");
    fputs(t && t->t == J_STR ? t->s : "", stdout);
    return;
  }
  if (r->t != J_OBJ || r->n == 0) {
    printf("ok\n");
    return;
  }
  for (size_t i = 0; i < r->n; i++) printf("%s=%s%s", r->keys[i], jtext(&r->items[i]), i + 1 < r->n ? " " : "\n");
}

/* ------------------------------------------------------------------ main */

static int request(const char *path, const char *line, char **reply, size_t *len) {
  assert(path != NULL);
  assert(reply != NULL);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    fprintf(stderr, "memwalctl: socket path too long: %s\n", path);
    return -1;
  }
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
    int e = errno;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISSOCK(st.st_mode))
      fprintf(stderr, "memwalctl: %s is not a socket (it is a %s): give memwald's admin_socket "
              "with -s SOCKET or -c CONFIG\n", path, S_ISDIR(st.st_mode) ? "directory" : S_ISREG(st.st_mode)
              ? "regular file" : "special file");
    else if (e == ECONNREFUSED)
      fprintf(stderr, "memwalctl: cannot connect to %s: nothing accepts on it (memwald not "
              "running, or it stopped without removing the socket)\n", path);
    else
      fprintf(stderr, "memwalctl: cannot connect to %s: %s (is memwald running? -s SOCKET or "
              "-c CONFIG)\n", path, strerror(e));
    if (fd >= 0) close(fd);
    return -1;
  }
  size_t n = strlen(line), off = 0;
  while (off < n) {
    ssize_t k = write(fd, line + off, n - off);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) {
      fprintf(stderr, "memwalctl: write to %s: %s\n", path, strerror(errno));
      close(fd);
      return -1;
    }
    off += (size_t)k;
  }
  size_t cap = 4096;
  char *buf = malloc(cap + 1);
  *len = 0;
  for (;;) {
    if (!buf) break;
    if (*len == cap) {
      if (cap >= MAX_REPLY_BYTES) break;
      char *nb = realloc(buf, cap * 2 + 1);
      if (!nb) break;
      buf = nb;
      cap *= 2;
    }
    ssize_t k = read(fd, buf + *len, cap - *len);
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) {
      fprintf(stderr, "memwalctl: read from %s: %s\n", path, strerror(errno));
      free(buf);
      close(fd);
      return -1;
    }
    if (k == 0) {
      close(fd);
      buf[*len] = 0;
      *reply = buf;
      return 0;
    }
    *len += (size_t)k;
  }
  fprintf(stderr, "memwalctl: reply too large or out of memory\n");
  free(buf);
  close(fd);
  return -1;
}

/* `token NAME GRANT...`: see the top of the file. */
static int make_token(int argc, char **argv) {
  assert(argc >= 1);
  assert(strcmp(argv[0], "token") == 0);
  static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
  if (argc < 3 || strpbrk(argv[1], " \t\r\n") != NULL) {
    fputs("memwalctl: token NAME GRANT... (GRANT: TABLE=write, TABLE=delete, TABLE=write,delete)\n", stderr);
    return 2;
  }
  unsigned char raw[33];
  char tok[64] = "mwt_", line[4096];
  if (mw_tls_random(raw, sizeof raw) < 0) {
    fputs("memwalctl: token: no random bytes from OpenSSL\n", stderr);
    return 3;
  }
  size_t n = 4;
  for (size_t i = 0; i < sizeof raw; i += 3) { /* 33 bytes: 44 characters, no padding */
    unsigned v = (unsigned)raw[i] << 16 | (unsigned)raw[i + 1] << 8 | raw[i + 2];
    for (int k = 3; k >= 0; k--) tok[n++] = B64[(v >> (6 * k)) & 63];
  }
  tok[n] = '\0';
  unsigned char h[32];
  mw_tls_sha256(tok, n, h);
  int w = snprintf(line, sizeof line, "token %s sha256:", argv[1]);
  for (int i = 0; i < 32; i++) w += snprintf(line + w, sizeof line - (size_t)w, "%02x", h[i]);
  for (int i = 2; i < argc && (size_t)w < sizeof line; i++) w += snprintf(line + w, sizeof line - (size_t)w, " %s", argv[i]);
  mw_creds_t *cs = NULL;
  mw_err_t err = {0};
  if ((size_t)w >= sizeof line || mw_creds_parse(line, (size_t)w, "token", &cs, &err) < 0) {
    fprintf(stderr, "memwalctl: %s\n", (size_t)w >= sizeof line ? "token: too long" : err.msg);
    return 2;
  }
  mw_creds_free(cs);
  printf("%s\n", line);
  fprintf(stderr, "token for \"%s\" (shown once; memwald keeps only its hash): %s\n", argv[1], tok);
  return 0;
}

/* The admin socket's path: -s, else the admin_socket of -c CONFIG, else
 * $MEMWALD_ADMIN_SOCKET, else DEFAULT_SOCKET. NULL after printing why the
 * configuration names none. */
static const char *socket_path(const char *sock, const char *config) {
  static mw_config_t cfg; /* large: off the stack */
  if (sock == NULL && config != NULL) {
    mw_err_t err = {0};
    if (mw_config_load(&cfg, config, NULL, 0, &err) < 0) {
      fprintf(stderr, "memwalctl: -c %s: %s\n", config, err.msg);
      return NULL;
    }
    if (cfg.admin_socket[0] == '\0') {
      fprintf(stderr, "memwalctl: -c %s: admin_socket is empty (the admin socket is off)\n", config);
      return NULL;
    }
    sock = cfg.admin_socket;
  }
  if (sock == NULL) sock = getenv("MEMWALD_ADMIN_SOCKET");
  if (sock == NULL || *sock == '\0') sock = DEFAULT_SOCKET;
  assert(*sock != '\0');
  return sock;
}

/* argv[0..argc) joined by spaces, with a newline, into line[cap]: the
 * request. Its length, or -1 after printing why an argument cannot go. */
static int request_line(int argc, char **argv, char *line, size_t cap) {
  assert(argc > 0);
  assert(cap >= MAX_REQUEST_BYTES + 2);
  size_t n = 0;
  for (int i = 0; i < argc; i++) {
    size_t l = strlen(argv[i]);
    if (l == 0 || strpbrk(argv[i], " \t\r\n")) {
      fprintf(stderr, "memwalctl: argument \"%s\" is empty or holds whitespace\n", argv[i]);
      return -1;
    }
    if (n + l + 2 > MAX_REQUEST_BYTES) {
      fputs("memwalctl: request too long\n", stderr);
      return -1;
    }
    if (n) line[n++] = ' ';
    memcpy(line + n, argv[i], l);
    n += l;
  }
  line[n++] = '\n';
  line[n] = 0;
  assert(n <= MAX_REQUEST_BYTES);
  return (int)n;
}

/* The daemon's reply to cmd: checked ({"ok":bool,...}), then printed (or
 * echoed with --json). The exit status: 0 ok, 1 the daemon said no, 3 the
 * reply is not one. */
static int answer(const char *sock, const char *cmd, const char *reply, size_t len, bool json) {
  assert(reply != NULL);
  assert(cmd != NULL);
  jp_t jp = {reply, reply + len, NULL};
  jv_t v;
  int rc = jvalue(&jp, &v, 0);
  ws(&jp);
  if (rc < 0 || jp.p != jp.end || v.t != J_OBJ || !jget(&v, "ok") || jget(&v, "ok")->t != J_BOOL) {
    fprintf(stderr, "memwalctl: bad reply from %s (%s): %.200s\n", sock, jp.err ? jp.err : "not a reply object",
            reply);
    jv_free(&v);
    return 3;
  }
  bool ok = jget(&v, "ok")->b;
  int status = 0;
  if (json) fwrite(reply, 1, len, stdout);
  if (!ok) {
    const jv_t *e = jget(&v, "error");
    fprintf(stderr, "memwalctl: %s: %s\n", cmd, e && e->t == J_STR ? e->s : "failed");
    status = 1;
  } else if (!json) {
    const jv_t *r = jget(&v, "result");
    static const jv_t empty = {.t = J_OBJ};
    print_result(cmd, r ? r : &empty);
  }
  jv_free(&v);
  return status;
}

int main(int argc, char **argv) {
  assert(argc >= 1);
  assert(argv != NULL);
  const char *sock = NULL, *config = NULL;
  bool json = false;
  static const struct option lo[] = {{"socket", 1, 0, 's'}, {"config", 1, 0, 'c'}, {"json", 0, 0, 'j'},
                                     {"help", 0, 0, 'h'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
  int ch;
  while ((ch = getopt_long(argc, argv, "+s:c:jhV", lo, NULL)) != -1) {
    switch (ch) {
    case 's': sock = optarg; break;
    case 'c': config = optarg; break;
    case 'j': json = true; break;
    case 'h': fputs(USAGE, stdout); return 0;
    case 'V': printf("memwalctl %s\n", MW_VERSION); return 0;
    default: fputs(USAGE, stderr); return 2;
    }
  }
  if (optind >= argc) {
    fputs("memwalctl: no command\n\n", stderr);
    fputs(USAGE, stderr);
    return 2;
  }
  if (strcmp(argv[optind], "token") == 0) return make_token(argc - optind, argv + optind);
  if ((sock = socket_path(sock, config)) == NULL) return 2;
  char line[MAX_REQUEST_BYTES + 2];
  if (request_line(argc - optind, argv + optind, line, sizeof line) < 0) return 2;
  char *reply = NULL;
  size_t len = 0;
  if (request(sock, line, &reply, &len) < 0) return 3;
  int status = answer(sock, argv[optind], reply, len, json);
  free(reply);
  return status;
}
