/*
 * err.c — see err.h. The message is formatted once, at the failure site, so
 * it can name the exact offset, field, file or line.
 */
#include "common/err.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int mw_err_set(mw_err_t *err, int code, const char *fmt, ...) {
  assert(code <= 0);
  if (err == NULL || err->code != 0) return code;
  err->code = code;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  va_end(ap);
  return code;
}

int mw_err_prefix(mw_err_t *err, int code, const char *fmt, ...) {
  assert(code <= 0);
  if (err == NULL) return code;
  char pre[MW_ERR_MSG_BYTES];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(pre, sizeof pre, fmt, ap);
  va_end(ap);
  if (n < 0) return err->code ? err->code : code;
  if (err->code == 0) {
    size_t len = strlen(pre);
    if (len >= 2 && pre[len - 2] == ':' && pre[len - 1] == ' ') pre[len - 2] = 0;
    err->code = code;
    snprintf(err->msg, sizeof err->msg, "%s", pre);
    return code;
  }
  /* pre + old reason, cut to the message size */
  char old[MW_ERR_MSG_BYTES];
  memcpy(old, err->msg, sizeof old);
  size_t pn = strlen(pre) < sizeof err->msg - 1 ? strlen(pre) : sizeof err->msg - 1;
  memcpy(err->msg, pre, pn);
  size_t on = strnlen(old, sizeof old);
  if (on > sizeof err->msg - 1 - pn) on = sizeof err->msg - 1 - pn;
  memcpy(err->msg + pn, old, on);
  err->msg[pn + on] = 0;
  assert(err->code < 0);
  return err->code;
}

void mw_err_clear(mw_err_t *err) {
  if (err == NULL) return;
  err->code = 0;
  err->msg[0] = '\0';
}

const char *mw_strerror(int code) {
  switch (code) {
    case 0: return "ok";
    case -EBADMSG: return "malformed input";
    case -ENOTSUP: return "not supported";
    case -EEXIST: return "already exists";
    case -ESTALE: return "fenced by a newer epoch";
    case -ENOENT: return "not found";
    case -ENOMEM: return "out of memory";
    case -EFBIG: return "too large";
    case -ENOSPC: return "no space left on device";
    case -EIO: return "I/O error";
    case -EINVAL: return "invalid argument";
    case -EAGAIN: return "try again";
    case -ECANCELED: return "cancelled";
    default: break;
  }
  /* strerror() is not thread-safe in general, but glibc returns static
   * strings for known codes, which is all we pass here. */
  return strerror(-code);
}

const char *mw_errno_name(int code) {
  const char *n = code < 0 ? strerrorname_np(-code) : NULL;
  return n ? n : "?";
}
