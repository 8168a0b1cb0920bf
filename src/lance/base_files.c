/*
 * base_files.c — see base_files.h.
 */
#include <stdint.h>
#include "lance/base_files.h"

#include <assert.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lance/dataset_manifest.h"
#include "lance/keyindex.h"

static int emit(mw_base_file_cb cb, void *arg, const char *folder, const char *name, mw_err_t *err) {
  char key[MW_BASE_FILE_KEY_BYTES];
  int len = snprintf(key, sizeof key, "%s%s", folder, name);
  if (len < 0 || (size_t)len >= sizeof key)
    return mw_err_set(err, -ENAMETOOLONG, "file name '%.64s...' is too long", name);
  return cb(arg, key);
}

static bool plain_name(const char *p) {
  return p != NULL && p[0] != '\0' && p[0] != '/' && strstr(p, "..") == NULL;
}

static int fragment_files(const Lance__Table__DataFragment *f, uint64_t version, mw_base_file_cb cb, void *arg,
                          mw_err_t *err) {
  assert(f != NULL);
  if (f->n_overlays > 0)
    return mw_err_set(err, -ENOTSUP, "version %" PRIu64 ": fragment %" PRIu64 " has overlays", version, f->id);
  int rc = 0;
  for (size_t k = 0; rc == 0 && k < f->n_files; k++) {
    const Lance__Table__DataFile *df = f->files[k];
    if (df->base_id != 0 || !plain_name(df->path))
      return mw_err_set(err, -ENOTSUP, "version %" PRIu64 ": data file '%s' is not under data/", version,
                        df->path ? df->path : "");
    rc = emit(cb, arg, "data/", df->path, err);
    char ki[MW_BASE_FILE_KEY_BYTES];
    if (rc == 0 && mw_keyindex_name(df->path, ki, sizeof ki) >= 0) rc = emit(cb, arg, "", ki, err);
  }
  const Lance__Table__DeletionFile *d = f->deletion_file;
  if (rc < 0 || d == NULL) return rc;
  if (d->base_id != 0)
    return mw_err_set(err, -ENOTSUP, "version %" PRIu64 ": deletion file of fragment %" PRIu64
                      " is under another base", version, f->id);
  char dn[96];
  snprintf(dn, sizeof dn, "%" PRIu64 "-%" PRIu64 "-%" PRIu64 ".%s", f->id, d->read_version, d->id,
           d->file_type == LANCE__TABLE__DELETION_FILE__DELETION_FILE_TYPE__BITMAP ? "bin" : "arrow");
  return emit(cb, arg, "_deletions/", dn, err);
}

int mw_base_manifest_files(const uint8_t *file, size_t n, uint64_t version, int64_t *ts_ms,
                           mw_base_file_cb cb, void *arg, mw_err_t *err) {
  assert(file != NULL || n == 0);
  assert(cb != NULL);
  assert(ts_ms != NULL);
  mw_section_t sec;
  uint64_t pos;
  int rc = mw_dmanifest_unframe(file, n, &sec, &pos, err);
  if (rc < 0) return rc;
  mw_dmanifest_t m = {0};
  rc = mw_dmanifest_decode(sec.data, sec.len, &m, err);
  if (rc < 0) goto out;
  const Lance__Table__Manifest *pb = m.pb;
  if (pb->n_base_paths > 0) {
    rc = mw_err_set(err, -ENOTSUP, "version %" PRIu64 " has base paths", version);
    goto out;
  }
  /* -1 (no timestamp: never old) also for a time no clock gives, which
   * seconds * 1000 could not even hold without signed overflow */
  *ts_ms = -1;
  if (pb->timestamp != NULL && pb->timestamp->seconds >= 0 && pb->timestamp->seconds < INT64_MAX / 1000 - 1)
    *ts_ms = (int64_t)pb->timestamp->seconds * 1000 + pb->timestamp->nanos / 1000000;
  for (size_t i = 0; rc == 0 && i < pb->n_fragments; i++) rc = fragment_files(pb->fragments[i], version, cb, arg, err);
  if (rc == 0 && pb->transaction_file != NULL && pb->transaction_file[0] != '\0') {
    if (!plain_name(pb->transaction_file) || strchr(pb->transaction_file, '/') != NULL)
      rc = mw_err_set(err, -ENOTSUP, "version %" PRIu64 ": transaction file '%s'", version, pb->transaction_file);
    else
      rc = emit(cb, arg, "_transactions/", pb->transaction_file, err);
  }
out:
  mw_dmanifest_free(&m);
  return rc;
}
