/*
 * creds.c — the credentials file parser and lookups (see creds.h).
 *
 * The file is read whole (bounded), split into lines, each line into
 * words (a word may be double-quoted to hold spaces). Every refusal names
 * FILE:LINE and what was wrong; a file that does not parse is never
 * partly applied (the caller keeps the credentials it had).
 */
#include "net/creds.h"

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "net/tls.h"

#define MAX_WORDS (3 + MW_CREDS_MAX_GRANTS + 1)
#define LINE_BYTES 4096

typedef struct words {
  char *w[MAX_WORDS];
  size_t n;
} words_t;

/* Split line (modified in place) into words; quoted words lose the quotes.
 * -1: an unterminated quote or too many words. */
static int split(char *line, words_t *out) {
  out->n = 0;
  char *p = line;
  for (;;) {
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '\0' || *p == '#') return 0;
    if (out->n == MAX_WORDS) return -1;
    if (*p == '"') {
      char *end = strchr(p + 1, '"');
      if (end == NULL) return -1;
      *end = '\0';
      out->w[out->n++] = p + 1;
      p = end + 1;
      if (*p != '\0' && *p != ' ' && *p != '\t') return -1;
      continue;
    }
    out->w[out->n++] = p;
    while (*p && *p != ' ' && *p != '\t') p++;
    if (*p) *p++ = '\0';
  }
}

static bool valid_name(const char *s, size_t cap) {
  size_t n = strlen(s);
  if (n == 0 || n >= cap) return false;
  for (size_t i = 0; i < n; i++)
    if (!isalnum((unsigned char)s[i]) && !strchr("_-.@", s[i])) return false;
  return true;
}

static int hexval(int ch) {
  if (ch >= '0' && ch <= '9') return ch - '0';
  if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
  if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
  return -1;
}

static int parse_hash(const char *s, unsigned char out[32]) {
  if (strncmp(s, "sha256:", 7) != 0 || strlen(s + 7) != 64) return -1;
  for (size_t i = 0; i < 32; i++) {
    int hi = hexval(s[7 + 2 * i]), lo = hexval(s[8 + 2 * i]);
    if (hi < 0 || lo < 0) return -1;
    out[i] = (unsigned char)(hi << 4 | lo);
  }
  return 0;
}

/* "TABLE=write,delete" -> grant. */
static int parse_grant(const char *s, mw_cred_grant_t *g, char *why, size_t wn) {
  const char *eq = strchr(s, '=');
  size_t tl = eq ? (size_t)(eq - s) : 0;
  if (eq == NULL || tl == 0 || tl >= sizeof g->table) {
    snprintf(why, wn, "'%.100s': a grant is TABLE=write, TABLE=delete or TABLE=write,delete", s);
    return -1;
  }
  memcpy(g->table, s, tl);
  g->table[tl] = '\0';
  if (strcmp(g->table, "*") != 0 && !valid_name(g->table, sizeof g->table)) {
    snprintf(why, wn, "'%.100s': bad table name", g->table);
    return -1;
  }
  g->perms = 0;
  char perms[64];
  snprintf(perms, sizeof perms, "%s", eq + 1);
  char *save = NULL;
  for (char *p = strtok_r(perms, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
    if (strcmp(p, "write") == 0) g->perms |= MW_PERM_WRITE;
    else if (strcmp(p, "delete") == 0) g->perms |= MW_PERM_DELETE;
    else {
      snprintf(why, wn, "'%.60s': unknown permission '%.40s' (write, delete)", s, p);
      return -1;
    }
  }
  if (g->perms == 0) {
    snprintf(why, wn, "'%.100s': no permission named (write, delete)", s);
    return -1;
  }
  return 0;
}

/* One line's words -> cred. 0, or -1 with why. */
static int parse_entry(const words_t *w, mw_cred_t *c, char *why, size_t wn) {
  memset(c, 0, sizeof *c);
  bool token = strcmp(w->w[0], "token") == 0, cert = strcmp(w->w[0], "cert") == 0;
  if (!token && !cert) return snprintf(why, wn, "'%.40s': expected token or cert", w->w[0]), -1;
  if (w->n < 4)
    return snprintf(why, wn, "expected %s NAME %s GRANT...", w->w[0], token ? "sha256:HEX" : "SUBJECT"), -1;
  if (w->n - 3 > MW_CREDS_MAX_GRANTS) return snprintf(why, wn, "more than %d grants", MW_CREDS_MAX_GRANTS), -1;
  if (!valid_name(w->w[1], sizeof c->name))
    return snprintf(why, wn, "'%.80s': a name is 1..63 of A-Z a-z 0-9 _ - . @", w->w[1]), -1;
  snprintf(c->name, sizeof c->name, "%s", w->w[1]);
  c->kind = token ? MW_CRED_TOKEN : MW_CRED_CERT;
  if (token && parse_hash(w->w[2], c->hash) < 0)
    return snprintf(why, wn, "'%.80s': expected sha256: and 64 hex digits (memwalctl token makes one)", w->w[2]), -1;
  if (cert && (strlen(w->w[2]) == 0 || strlen(w->w[2]) >= sizeof c->subject))
    return snprintf(why, wn, "the subject must be 1..%zu bytes", sizeof c->subject - 1), -1;
  if (cert) snprintf(c->subject, sizeof c->subject, "%s", w->w[2]);
  for (size_t i = 3; i < w->n; i++) {
    if (parse_grant(w->w[i], &c->grants[c->n_grants], why, wn) < 0) return -1;
    for (size_t k = 0; k < c->n_grants; k++)
      if (strcmp(c->grants[k].table, c->grants[c->n_grants].table) == 0)
        return snprintf(why, wn, "table '%.100s' granted twice", c->grants[k].table), -1;
    c->n_grants++;
  }
  return 0;
}

static int add(mw_creds_t *cs, const mw_cred_t *c) {
  if (cs->n >= MW_CREDS_MAX_ENTRIES) return -E2BIG;
  mw_cred_t *v = realloc(cs->v, (cs->n + 1) * sizeof *v);
  if (v == NULL) return -ENOMEM;
  cs->v = v;
  cs->v[cs->n++] = *c;
  return 0;
}

/* Line `ln` (NUL-terminated copy) into cs. */
static int parse_line(mw_creds_t *cs, char *line, int ln, const char *name, mw_err_t *err) {
  words_t w;
  char why[300];
  if (split(line, &w) < 0)
    return mw_err_set(err, -EINVAL, "%s:%d: an unterminated quote or more than %d words", name, ln, MAX_WORDS);
  if (w.n == 0) return 0;
  mw_cred_t c;
  if (parse_entry(&w, &c, why, sizeof why) < 0) return mw_err_set(err, -EINVAL, "%s:%d: %s", name, ln, why);
  for (size_t i = 0; i < cs->n; i++) {
    if (strcmp(cs->v[i].name, c.name) == 0)
      return mw_err_set(err, -EINVAL, "%s:%d: name '%s' used twice", name, ln, c.name);
    if (c.kind == MW_CRED_CERT && cs->v[i].kind == MW_CRED_CERT && strcmp(cs->v[i].subject, c.subject) == 0)
      return mw_err_set(err, -EINVAL, "%s:%d: subject \"%s\" listed twice", name, ln, c.subject);
  }
  int rc = add(cs, &c);
  if (rc < 0) return mw_err_set(err, rc, "%s:%d: more than %d principals", name, ln, MW_CREDS_MAX_ENTRIES);
  return 0;
}

int mw_creds_parse(const char *text, size_t len, const char *name, mw_creds_t **out, mw_err_t *err) {
  assert(out != NULL);
  assert(name != NULL);
  *out = NULL;
  if (len > MW_CREDS_MAX_FILE_BYTES)
    return mw_err_set(err, -EFBIG, "%s: larger than %zu bytes", name, MW_CREDS_MAX_FILE_BYTES);
  mw_creds_t *cs = calloc(1, sizeof *cs);
  if (cs == NULL) return mw_err_set(err, -ENOMEM, "out of memory");
  char line[LINE_BYTES];
  int ln = 0, rc = 0;
  for (size_t at = 0; at < len && rc == 0;) {
    const char *nl = memchr(text + at, '\n', len - at);
    size_t n = nl ? (size_t)(nl - (text + at)) : len - at;
    ln++;
    if (n >= sizeof line) rc = mw_err_set(err, -EINVAL, "%s:%d: line longer than %zu bytes", name, ln, sizeof line - 1);
    else if (memchr(text + at, '\0', n)) rc = mw_err_set(err, -EINVAL, "%s:%d: a NUL byte", name, ln);
    else {
      memcpy(line, text + at, n);
      line[n] = '\0';
      if (n > 0 && line[n - 1] == '\r') line[n - 1] = '\0';
      rc = parse_line(cs, line, ln, name, err);
    }
    at += n + 1;
  }
  if (rc < 0) {
    mw_creds_free(cs);
    return rc;
  }
  *out = cs;
  return 0;
}

int mw_creds_load(const char *path, mw_creds_t **out, mw_err_t *err) {
  assert(path != NULL);
  assert(out != NULL);
  FILE *f = fopen(path, "rb");
  if (f == NULL) return mw_err_set(err, -errno, "credentials_file %s: %s", path, strerror(errno));
  char *text = malloc(MW_CREDS_MAX_FILE_BYTES + 1);
  size_t n = text ? fread(text, 1, MW_CREDS_MAX_FILE_BYTES + 1, f) : 0;
  int rc = text == NULL ? mw_err_set(err, -ENOMEM, "out of memory")
           : ferror(f)  ? mw_err_set(err, -EIO, "credentials_file %s: read error", path)
                        : mw_creds_parse(text, n, path, out, err);
  fclose(f);
  free(text);
  return rc;
}

int mw_creds_add_token(mw_creds_t **cs, const char *name, const char *token, unsigned perms) {
  assert(cs != NULL);
  assert(name != NULL);
  assert(token != NULL);
  if (*cs == NULL && (*cs = calloc(1, sizeof **cs)) == NULL) return -ENOMEM;
  mw_cred_t c;
  memset(&c, 0, sizeof c);
  snprintf(c.name, sizeof c.name, "%s", name);
  c.kind = MW_CRED_TOKEN;
  mw_tls_sha256(token, strlen(token), c.hash);
  snprintf(c.grants[0].table, sizeof c.grants[0].table, "*");
  c.grants[0].perms = perms;
  c.n_grants = 1;
  return add(*cs, &c);
}

void mw_creds_free(mw_creds_t *cs) {
  if (cs == NULL) return;
  free(cs->v);
  free(cs);
}

const mw_cred_t *mw_creds_by_token(const mw_creds_t *cs, const char *tok, size_t n) {
  if (cs == NULL || n == 0 || n > MW_CREDS_MAX_TOKEN_BYTES) return NULL;
  unsigned char h[32];
  mw_tls_sha256(tok, n, h);
  const mw_cred_t *hit = NULL;
  for (size_t i = 0; i < cs->n; i++) { /* every entry, no early exit */
    unsigned char d = (unsigned char)(cs->v[i].kind != MW_CRED_TOKEN);
    for (size_t k = 0; k < 32; k++) d |= (unsigned char)(cs->v[i].hash[k] ^ h[k]);
    if (d == 0 && hit == NULL) hit = &cs->v[i];
  }
  return hit;
}

const mw_cred_t *mw_creds_by_subject(const mw_creds_t *cs, const char *subject) {
  if (cs == NULL || subject == NULL || !subject[0]) return NULL;
  for (size_t i = 0; i < cs->n; i++)
    if (cs->v[i].kind == MW_CRED_CERT && strcmp(cs->v[i].subject, subject) == 0) return &cs->v[i];
  return NULL;
}

const mw_cred_t *mw_creds_by_name(const mw_creds_t *cs, const char *name) {
  if (cs == NULL || name == NULL) return NULL;
  for (size_t i = 0; i < cs->n; i++)
    if (strcmp(cs->v[i].name, name) == 0) return &cs->v[i];
  return NULL;
}

unsigned mw_cred_perms(const mw_cred_t *cred, const char *table) {
  assert(table != NULL);
  if (cred == NULL) return 0;
  unsigned any = 0;
  for (size_t i = 0; i < cred->n_grants; i++) {
    if (strcmp(cred->grants[i].table, table) == 0) return cred->grants[i].perms;
    if (strcmp(cred->grants[i].table, "*") == 0) any = cred->grants[i].perms;
  }
  return any;
}

const char *mw_perms_name(unsigned perms) {
  static const char *const names[4] = {"none", "write", "delete", "write,delete"};
  return names[perms & MW_PERM_ALL];
}
