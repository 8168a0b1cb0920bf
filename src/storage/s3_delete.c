/*
 * s3_delete.c — deleting many keys: DeleteObjects batches (delete_prefix
 * after its listing, delete_many for the keys it is given), the per-key
 * results of their answers, and the DELETE-per-key fallback.
 *
 * A batch is up to MW_S3_DELETE_BATCH (1 000, S3's most) keys: a POST
 * ?delete whose body lists their object names (escaped), with the
 * Content-MD5 S3 requires, and <Quiet> so the answer lists only failures.
 * Per-key errors in the answer are read: NoSuchKey is a deletion;
 * InternalError, SlowDown, ServiceUnavailable and RequestTimeout keys go
 * out again alone, as the next batch, after a backoff; any other code fails
 * delete_prefix naming the key, or (delete_many) only that key's status.
 * A store that does not implement DeleteObjects (501, 405, 400
 * NotImplemented) gets one DELETE per key from then on (s->no_batch_delete).
 *
 * delete_many keeps a status per key (priv.statuses, by index):
 * MANY_PENDING until the key is known deleted (0) or failed (-errno); keys
 * the fault layer armed (mw_storage__key_fault) fail as if the answer had
 * said so. At the end the operation's status is the first key's failure.
 */
#include <assert.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/metrics.h"
#include "storage/s3_int.h"

/* ------------------------------------------------------------ metrics */

/* memwald_storage_s3_deleted_objects_total{via="batch"|"single"}: objects
 * a delete_prefix removed (DeleteObjects or DELETE);
 * memwald_storage_s3_delete_batches_total: DeleteObjects requests answered;
 * memwald_storage_s3_delete_key_errors_total{kind="retried"|"final"}: keys
 * an answer reported failed (retried alone, or failing the operation). */
static struct {
  bool ok;
  mw_metric_t *by_batch, *by_single, *batches, *key_retried, *key_final;
} dm;

void mw_s3__delete_metrics_init(void) {
  mw_metrics_t *reg = mw_metrics_default();
  static const char *const via[] = {"via"}, *const kind[] = {"kind"};
  mw_metric_family_t *del = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_deleted_objects_total",
      "Objects removed by S3 prefix deletions, by request kind.", via, 1, NULL, 0);
  mw_metric_family_t *bat = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_delete_batches_total",
      "S3 DeleteObjects requests answered.", NULL, 0, NULL, 0);
  mw_metric_family_t *ke = mw_metrics_register(
      reg, MW_METRIC_COUNTER, "memwald_storage_s3_delete_key_errors_total",
      "Keys a DeleteObjects answer reported failed: retried alone, or final.", kind, 1, NULL, 0);
  if (del == NULL || bat == NULL || ke == NULL) return; /* logged by metrics */
  const char *b[] = {"batch"}, *o[] = {"single"}, *r[] = {"retried"}, *f[] = {"final"};
  dm.by_batch = mw_metric_series(del, b);
  dm.by_single = mw_metric_series(del, o);
  dm.batches = mw_metric_series(bat, NULL);
  dm.key_retried = mw_metric_series(ke, r);
  dm.key_final = mw_metric_series(ke, f);
  dm.ok = dm.by_batch && dm.by_single && dm.batches && dm.key_retried && dm.key_final;
}

static void dm_add(mw_metric_t *m, uint64_t n) {
  if (dm.ok && n > 0) mw_counter_add(m, n);
}

/* ------------------------------------------------------------ batches */

/* The DeleteObjects body of t->batch, and its Content-MD5. */
static int batch_body(mw_s3_t *s, mw_s3_task_t *t) {
  assert(t->nbatch > 0);
  assert(t->nbatch <= MW_S3_DELETE_BATCH);
  mw_buf_reset(&t->batch_xml);
  int rc = mw_s3__append(&t->batch_xml, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
                                     "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
                                     "<Quiet>true</Quiet>");
  const char *k = (const char *)t->batch.data;
  for (size_t i = 0; rc == 0 && i < t->nbatch; i++) {
    mw_buf_t name = MW_BUF_INIT;
    rc = mw_s3__object_name(s, k, &name);
    if (rc == 0) rc = mw_buf_append(&name, "", 1);
    if (rc == 0) rc = mw_s3__append(&t->batch_xml, "<Object><Key>");
    if (rc == 0) rc = mw_s3__xml_escape(&t->batch_xml, (const char *)name.data);
    if (rc == 0) rc = mw_s3__append(&t->batch_xml, "</Key></Object>");
    mw_buf_free(&name);
    k += strlen(k) + 1;
  }
  if (rc == 0) rc = mw_s3__append(&t->batch_xml, "</Delete>");
  if (rc == 0) mw_md5_base64(t->batch_xml.data, t->batch_xml.len, t->batch_md5);
  return rc;
}

/* The next (up to) MW_S3_DELETE_BATCH listed keys into t->batch. */
static int batch_fill(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->i < t->nkeys);
  mw_buf_reset(&t->batch);
  t->nbatch = 0;
  t->batch_i = t->i;
  t->batch_off = t->off;
  int rc = 0;
  while (rc == 0 && t->i < t->nkeys && t->nbatch < MW_S3_DELETE_BATCH) {
    const char *k = (const char *)req->buf.data + t->off;
    size_t n = strlen(k) + 1;
    rc = mw_buf_append(&t->batch, k, n);
    t->off += n;
    t->i++;
    t->nbatch++;
  }
  return rc == 0 ? batch_body(s, t) : rc;
}

/* ---- delete_many: a status per key (priv.statuses, by index) ---- */

#define MANY_PENDING (-EINPROGRESS) /* not known deleted yet */

bool mw_s3__many(const mw_storage_req_t *req) { return req->priv.op == MW_OP_DELETE_MANY; }

/* The index of relative key k among the request's keys (n <= 1 000). */
static size_t many_index(const mw_storage_req_t *req, const char *k) {
  const mw_storage_req_front_t *p = &req->priv;
  for (size_t i = 0; i < p->nmany; i++)
    if (strcmp(p->many[i], k) == 0) return i;
  return SIZE_MAX;
}

static void many_mark(mw_storage_req_t *req, const char *k, int status) {
  size_t i = many_index(req, k);
  assert(i != SIZE_MAX); /* every batch key is one of ours */
  if (i != SIZE_MAX) req->priv.statuses[i] = status;
}

/* The batch's keys with a test fault armed (storage__key_fault): a transient
 * errno joins the next batch (*again, *retry), another is the key's status. */
static int many_faults(mw_s3_t *s, mw_storage_req_t *req, mw_buf_t *again, size_t *retry) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(mw_s3__many(req));
  const char *k = (const char *)t->batch.data;
  int rc = 0;
  for (size_t n = 0; rc == 0 && n < t->nbatch; n++, k += strlen(k) + 1) {
    size_t i = many_index(req, k);
    if (i == SIZE_MAX || req->priv.statuses[i] != 0) continue;
    int inj = mw_storage__key_fault(req, i, S3_RESPONSE);
    if (inj == 0) continue;
    if (mw_s3__transient_errno(inj)) {
      req->priv.statuses[i] = MANY_PENDING;
      rc = mw_buf_append(again, k, strlen(k) + 1);
      (*retry)++;
      continue;
    }
    req->priv.statuses[i] = inj;
    mw_storage__set_error(req, "s3://%s/%s%s%s: DeleteObjects: %s (test fault)", s->bucket,
                          s->prefix,
                          s->prefix[0] ? "/" : "", k, strerror(-inj));
  }
  return rc;
}

/* At finish: every key still pending gets `status`; the operation's status is
 * then the first key's failure (index order), req->nkeys the deleted ones. */
int mw_s3__many_finish(mw_storage_req_t *req, int status) {
  mw_storage_req_front_t *p = &req->priv;
  int first = 0;
  req->nkeys = 0;
  for (size_t i = 0; i < p->nmany; i++) {
    if (p->statuses[i] == MANY_PENDING) p->statuses[i] = status < 0 ? status : -EIO;
    if (p->statuses[i] == 0) req->nkeys++;
    else if (first == 0) first = p->statuses[i];
  }
  assert(status >= 0 || first < 0);
  return first;
}

/* What the <Error>s of one DeleteObjects answer came to. */
typedef struct tally {
  mw_buf_t again;  /* keys to send again ("k\0k\0", relative) */
  size_t failed;   /* keys with an error but NoSuchKey */
  size_t retry;    /* of those, keys to send again */
  int final;       /* the first failure of delete_prefix (-errno), or 0 */
} tally_t;

/* One <Error> (its content [v, v + n)): NoSuchKey is a deletion, a
 * transient code sends the key again, any other fails the key (delete_many)
 * or the operation (the first one: t->final, reason set). */
static int batch_error(mw_s3_t *s, mw_storage_req_t *req, const char *v, size_t n, tally_t *tl) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  const mw_s3_task_t *t = a->task;
  size_t plen = s->prefix[0] ? strlen(s->prefix) + 1 : 0;
  char key[MW_STORAGE_KEY_MAX_BYTES * 2 + 8], code[64] = "", msg[160] = "";
  const char *c = v, *f;
  size_t fn;
  if (!mw_s3__xml_next(&c, v + n, "Key", &f, &fn) ||
      mw_s3__xml_text(f, fn, key, sizeof key) <= 0 || strlen(key) < plen)
    return -EBADMSG;
  c = v;
  if (mw_s3__xml_next(&c, v + n, "Code", &f, &fn) && mw_s3__xml_text(f, fn, code, sizeof code) < 0)
    code[0] = 0;
  c = v;
  if (mw_s3__xml_next(&c, v + n, "Message", &f, &fn) && mw_s3__xml_text(f, fn, msg, sizeof msg) < 0)
    msg[0] = 0;
  if (strcmp(code, "NoSuchKey") == 0) return 0; /* gone already: deleted */
  tl->failed++;
  if (mw_s3__transient_key_code(code)) {
    if (mw_s3__many(req)) many_mark(req, key + plen, MANY_PENDING);
    tl->retry++;
    return mw_buf_append(&tl->again, key + plen, strlen(key + plen) + 1);
  }
  int kerr = strcmp(code, "AccessDenied") == 0 ? -EACCES : -EIO;
  const char *att = a->attempts == 1 ? "" : "s";
  if (mw_s3__many(req)) { /* that key fails; the request goes on */
    many_mark(req, key + plen, kerr);
    mw_storage__set_error(req, "s3://%s/%s: DeleteObjects: %s%s%s (%u attempt%s)", s->bucket, key,
                          code[0] ? code : "error", msg[0] ? ": " : "", msg, a->attempts, att);
  } else if (tl->final == 0) {
    tl->final = kerr;
    mw_storage__set_error(req, "s3://%s/%s: DeleteObjects: %s%s%s (key %zu of %zu in the "
                          "request; %u attempt%s)", s->bucket, key, code[0] ? code : "error",
                          msg[0] ? ": " : "", msg, tl->failed, t->nbatch, a->attempts, att);
  }
  return 0;
}

/* A DeleteObjects answer (2xx): every <Error> in it. Keys with a transient
 * code become the next batch (*retry = how many); the first other failure
 * is *final (-errno, reason set). NoSuchKey counts as deleted. */
static int batch_answer(mw_s3_t *s, mw_storage_req_t *req, size_t *retry, int *final) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  const char *p = (const char *)a->resp.data, *end = p + a->resp.len, *v;
  size_t n;
  *retry = 0;
  *final = 0;
  if (p == NULL || memmem(p, a->resp.len, "DeleteResult", 12) == NULL) return -EBADMSG;
  tally_t tl = {.again = MW_BUF_INIT};
  int rc = 0;
  if (mw_s3__many(req)) { /* each key of the batch is deleted unless the answer says otherwise */
    const char *k = (const char *)t->batch.data;
    for (size_t i = 0; i < t->nbatch; i++, k += strlen(k) + 1) many_mark(req, k, 0);
  }
  const char *q = p;
  while (rc == 0 && mw_s3__xml_next(&q, end, "Error", &v, &n)) rc = batch_error(s, req, v, n, &tl);
  if (rc == 0 && tl.failed > t->nbatch) rc = -EBADMSG;
  size_t faulted = 0;
  if (rc == 0 && mw_s3__many(req)) rc = many_faults(s, req, &tl.again, &faulted);
  *retry = tl.retry + faulted;
  *final = tl.final;
  if (rc == 0) {
    assert(tl.retry <= tl.failed);
    t->removed += t->nbatch - tl.failed;
    dm_add(dm.by_batch, t->nbatch - tl.failed);
    dm_add(dm.key_retried, *retry);
    dm_add(dm.key_final, tl.failed - *retry);
  }
  if (rc == 0 && *retry > 0 && *final == 0) { /* the failed keys are the next batch */
    mw_buf_free(&t->batch);
    t->batch = tl.again;
    t->nbatch = *retry;
    return batch_body(s, t);
  }
  mw_buf_free(&tl.again);
  return rc;
}

/* After the listing, or a batch done: the next batch, or the end. */
void mw_s3__delete_next(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->i <= t->nkeys);
  if (t->i >= t->nkeys) return mw_s3__finish(s, req, 0);
  if (s->no_batch_delete) return mw_s3__next_exchange(s, req, P_DEL_EACH);
  int rc = batch_fill(s, req);
  if (rc < 0) {
    mw_s3__set_reason(s, req, strerror(-rc));
    return mw_s3__finish(s, req, rc);
  }
  mw_s3__next_exchange(s, req, P_DEL_BATCH);
}

/* A DELETE of the next key, or the batch in t->batch. */
int mw_s3__delete_build(mw_storage_req_t *req, mw_s3_spec_t *sp) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t != NULL);
  if (mw_s3_req(req)->phase == P_DEL_EACH) {
    sp->method = "DELETE";
    assert(t->off < req->buf.len);
    sp->key = (const char *)req->buf.data + t->off;
    return 0;
  }
  assert(mw_s3_req(req)->phase == P_DEL_BATCH);
  assert(t->nbatch > 0);
  assert(t->nbatch <= MW_S3_DELETE_BATCH);
  sp->method = "POST";
  sp->key = NULL;
  sp->body = t->batch_xml.data;
  sp->body_len = t->batch_xml.len;
  sp->xml_body = true;
  sp->content_md5 = t->batch_md5;
  snprintf(sp->query, sizeof sp->query, "delete=");
  return 0;
}

/* ------------------------------------------------------------ answers */

/* A DeleteObjects answered: the keys it failed go out again, or fail; a
 * store without DeleteObjects gets one DELETE per key from this batch on. */
static int batch_done(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->nbatch > 0);
  assert(t->nbatch <= MW_S3_DELETE_BATCH);
  if (an->ok) {
    dm_add(dm.batches, 1);
    size_t retry = 0;
    int final = 0;
    int rc = batch_answer(s, req, &retry, &final);
    if (rc < 0) return rc;
    if (final < 0) return mw_s3__end(s, req, final);
    if (retry > 0) {
      char what[96];
      snprintf(what, sizeof what, "%zu key%s answered with a transient error", retry,
               retry == 1 ? "" : "s");
      mw_s3__retry_or_fail(s, req, -EAGAIN, what);
      return MW_S3_MOVED;
    }
    mw_s3__delete_next(s, req);
    return MW_S3_MOVED;
  }
  int http = an->http;
  if (http == 501 || http == 405 || (http == 400 && strcmp(an->code, "NotImplemented") == 0)) {
    /* no DeleteObjects here: the rest one key at a time, from this batch on */
    mw_log_notice("storage: s3://%s: the store refused DeleteObjects (HTTP %d%s%s); deleting "
                  "one key per request", s->bucket, http, an->code[0] ? " " : "", an->code);
    s->no_batch_delete = true;
    t->i = t->batch_i;
    t->off = t->batch_off;
    return mw_s3__go(s, req, P_DEL_EACH);
  }
  return 0;
}

/* One key's DELETE is over: the next key, or the end. */
static int each_next(mw_s3_t *s, mw_storage_req_t *req) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  t->off += strlen((const char *)req->buf.data + t->off) + 1;
  t->i++;
  assert(t->i < t->nkeys || t->off == req->buf.len);
  if (t->i < t->nkeys) return mw_s3__go(s, req, P_DEL_EACH);
  return mw_s3__end(s, req, 0);
}

/* One key's DELETE answered (404 but NoSuchBucket: deleted already). */
static int each_done(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t->off < req->buf.len); /* the key this DELETE was for */
  if (!an->ok && (an->http != 404 || strcmp(an->code, "NoSuchBucket") == 0)) return 0;
  if (mw_s3__many(req)) {
    int inj = mw_storage__key_fault(req, t->i, S3_RESPONSE);
    if (inj < 0 && mw_s3__transient_errno(inj)) {
      mw_s3__retry_or_fail(s, req, inj, "answer lost (test fault)");
      return MW_S3_MOVED;
    }
    req->priv.statuses[t->i] = inj;
    if (inj < 0)
      mw_storage__set_error(req, "s3://%s/%s: DELETE: %s (test fault)", s->bucket,
                            (const char *)req->buf.data + t->off, strerror(-inj));
  }
  dm_add(dm.by_single, 1);
  t->removed++;
  return each_next(s, req);
}

int mw_s3__delete_answer(mw_s3_t *s, mw_storage_req_t *req, const mw_s3_answer_t *an) {
  mw_storage_req_s3_t *a = mw_s3_req(req);
  mw_s3_task_t *t = a->task;
  assert(t != NULL); /* submit made it */
  assert(t->i <= t->nkeys);
  if (a->phase == P_DEL_BATCH) return batch_done(s, req, an);
  assert(a->phase == P_DEL_EACH);
  assert(t->i < t->nkeys);
  return each_done(s, req, an);
}

void mw_s3__delete_each_refused(mw_s3_t *s, mw_storage_req_t *req, int err) {
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(err < 0);
  assert(mw_s3__many(req));
  req->priv.statuses[t->i] = err;
  each_next(s, req);
}

/* delete_many: the keys into req->buf ("k\0k\0", as a listing leaves
 * them), all pending, and the first batch (every key: n <= 1 000). */
int mw_s3__many_start(mw_s3_t *s, mw_storage_req_t *req) {
  mw_storage_req_front_t *p = &req->priv;
  mw_s3_task_t *t = mw_s3_req(req)->task;
  assert(t != NULL);
  assert(p->nmany > 0);
  assert(p->nmany <= MW_S3_DELETE_BATCH);
  _Static_assert(MW_STORAGE_DELETE_MANY_MAX <= MW_S3_DELETE_BATCH, "one DeleteObjects a call");
  mw_buf_reset(&req->buf);
  int rc = 0;
  for (size_t i = 0; rc == 0 && i < p->nmany; i++) {
    p->statuses[i] = MANY_PENDING;
    rc = mw_buf_append(&req->buf, p->many[i], strlen(p->many[i]) + 1);
  }
  t->nkeys = p->nmany;
  t->i = t->off = 0;
  if (rc == 0 && !s->no_batch_delete) rc = batch_fill(s, req);
  return rc;
}
