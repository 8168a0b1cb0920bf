/*
 * rows.c — see rows.h. splitmix64 for reproducible data.
 */
#include "rows.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lance/datafile.h"

static char deadline_msg[160];

static void on_deadline(int sig) {
  (void)sig;
  ssize_t w = write(2, deadline_msg, strlen(deadline_msg)); /* async-signal-safe */
  (void)w;
  _exit(3);
}

void er_deadline(const char *tool, unsigned seconds) {
  snprintf(deadline_msg, sizeof deadline_msg,
           "%s: no result within %u s (an awaited engine event never came)\n", tool, seconds);
  signal(SIGALRM, on_deadline);
  alarm(seconds);
}

void er_model_init(er_model_t *m, uint64_t seed, int64_t max_key) {
  memset(m, 0, sizeof *m);
  m->rnd = seed ? seed : 42;
  m->max_key = max_key;
  m->last = calloc((size_t)max_key, sizeof *m->last);
  m->set = calloc((size_t)max_key, sizeof *m->set);
}

void er_model_free(er_model_t *m) {
  free(m->last);
  free(m->set);
  memset(m, 0, sizeof *m);
}

uint64_t er_rand(er_model_t *m) {
  uint64_t z = (m->rnd += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

static double frand(er_model_t *m) { return (double)(er_rand(m) >> 11) / 9007199254740992.0; }

void er_row_gen(er_model_t *m, er_row_t *r, int64_t id, double tomb_frac) {
  memset(r, 0, sizeof *r);
  r->id = id;
  if (frand(m) < tomb_frac) {
    r->tomb = r->name_null = r->v_null = r->vec_null = true;
    return;
  }
  r->name_null = frand(m) < 0.1;
  if (!r->name_null) snprintf(r->name, sizeof r->name, "e_%" PRId64 "_%" PRIx64, id, er_rand(m) >> 44);
  r->v_null = frand(m) < 0.1;
  if (!r->v_null) r->v = (frand(m) * 2e6 - 1e6) / 7.0;
  r->vec_null = frand(m) < 0.1;
  if (!r->vec_null)
    for (int k = 0; k < 8; k++) r->vec[k] = (float)(frand(m) * 2 - 1);
}

int er_row_append(mw_batch_t *b, const er_row_t *r) {
  const mw_field_t *f = b->schema->fields;
  int rc = mw_column_append_fixed(&b->cols[0], &r->id, 8);
  rc |= r->name_null ? mw_column_append_null(&b->cols[1], &f[1])
                     : mw_column_append_bytes(&b->cols[1], r->name, strlen(r->name));
  rc |= r->v_null ? mw_column_append_null(&b->cols[2], &f[2]) : mw_column_append_fixed(&b->cols[2], &r->v, 8);
  rc |= r->vec_null ? mw_column_append_null(&b->cols[3], &f[3])
                    : mw_column_append_fixed(&b->cols[3], r->vec, 32);
  rc |= mw_column_append_bool(&b->cols[4], r->tomb);
  if (rc != 0) return -1;
  b->n_rows++;
  return 0;
}

int er_batch(er_model_t *m, const mw_schema_t *schema, int64_t n, double tomb_frac, mw_batch_t *out) {
  if (mw_batch_init(out, schema) < 0) return -1;
  for (int64_t i = 0; i < n; i++) {
    er_row_t r;
    int64_t id = (int64_t)(er_rand(m) % (uint64_t)m->max_key);
    er_row_gen(m, &r, id, tomb_frac);
    if (er_row_append(out, &r) < 0) return -1;
    m->last[id] = r;
    m->set[id] = true;
  }
  return 0;
}

int er_model_write(const er_model_t *m, FILE *f) {
  for (int64_t k = 0; k < m->max_key; k++) {
    if (!m->set[k]) continue;
    const er_row_t *r = &m->last[k];
    if (r->tomb) {
      fprintf(f, "{\"id\":\"%" PRId64 "\",\"_deleted\":true}\n", k);
      continue;
    }
    fprintf(f, "{\"id\":\"%" PRId64 "\",\"name\":", k);
    if (r->name_null) fputs("null", f);
    else fprintf(f, "\"%s\"", r->name);
    if (r->v_null) fputs(",\"v\":null", f);
    else fprintf(f, ",\"v\":%.17g", r->v);
    fputs(",\"vec\":", f);
    if (r->vec_null) fputs("null", f);
    else
      for (int j = 0; j < 8; j++) fprintf(f, "%c%.9g", j ? ',' : '[', (double)r->vec[j]);
    fputs(r->vec_null ? "}\n" : "]}\n", f);
  }
  return ferror(f) ? -1 : 0;
}

void er_row_read(const mw_batch_t *b, int64_t r, er_row_t *out) {
  memset(out, 0, sizeof *out);
  const mw_column_t *c = b->cols;
  memcpy(&out->id, c[0].values.data + 8 * r, 8);
  out->name_null = !mw_column_valid(&c[1], r);
  if (!out->name_null) {
    size_t n;
    const uint8_t *p = mw_column_bytes(&c[1], r, &n);
    if (n >= sizeof out->name) n = sizeof out->name - 1;
    memcpy(out->name, p, n);
  }
  out->v_null = !mw_column_valid(&c[2], r);
  if (!out->v_null) memcpy(&out->v, c[2].values.data + 8 * r, 8);
  out->vec_null = !mw_column_valid(&c[3], r);
  if (!out->vec_null) memcpy(out->vec, c[3].values.data + 32 * r, 32);
  out->tomb = mw_bit_get(c[4].values.data, r);
}

_Atomic int er_flipped_files;

int er_flip_row_count(mw_buf_t *file) {
  mw_datafile_t df;
  const uint8_t *p = NULL;
  size_t len = 0;
  int rc = mw_datafile_open(&df, file->data, file->len, NULL, NULL);
  uint64_t n = df.n_rows;
  if (rc == 0) rc = mw_datafile_global_buffer(&df, 0, &p, &len, NULL);
  mw_datafile_close(&df);
  if (rc < 0) return -1;
  uint8_t v[10], k = 0; /* the varint of n, then the same-length varint of n ^ 1 */
  for (uint64_t x = n; k == 0 || x > 0; x >>= 7) v[k++] = (uint8_t)((x & 0x7f) | (x > 0x7f ? 0x80 : 0));
  if (len < (size_t)k + 1 || p[len - k - 1] != 0x10 || memcmp(p + len - k, v, k) != 0) return -1;
  uint8_t *at = file->data + (p - file->data) + len - k;
  at[0] ^= 1; /* the lowest bit of n is in the first varint byte */
  er_flipped_files++;
  return 0;
}

bool er_row_equal(const er_row_t *a, const er_row_t *b) {
  if (a->id != b->id || a->tomb != b->tomb || a->name_null != b->name_null ||
      a->v_null != b->v_null || a->vec_null != b->vec_null)
    return false;
  if (!a->name_null && strcmp(a->name, b->name) != 0) return false;
  if (!a->v_null && memcmp(&a->v, &b->v, 8) != 0) return false;
  if (!a->vec_null && memcmp(a->vec, b->vec, 32) != 0) return false;
  return true;
}
