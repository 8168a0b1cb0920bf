/*
 * err.h — error values with a human-readable reason.
 *
 * Convention for the whole project: a function returns 0 (or a count) on
 * success and a negative errno on failure. Where a caller needs to tell a
 * person *why* (a parser naming the byte offset or the field, a config loader
 * naming the file and line), the function also takes an optional
 * `mw_err_t *err` and fills it with mw_err_set(). Passing NULL is always
 * allowed.
 *
 * Codes used beyond the usual errno meanings:
 *   -EBADMSG  malformed or corrupt input (a format violation)
 *   -ENOTSUP  valid input that uses a feature we do not implement
 *   -EEXIST   put_if_absent lost the race
 *   -ESTALE   fenced: a peer holds a newer epoch
 */
#ifndef MW_COMMON_ERR_H
#define MW_COMMON_ERR_H

#define MW_ERR_MSG_BYTES 512

typedef struct mw_err {
  int code;                   /* negative errno, 0 when unset */
  char msg[MW_ERR_MSG_BYTES]; /* NUL-terminated reason */
} mw_err_t;

/* Record `code` and a printf-style reason in *err (if err != NULL) and
 * return `code`, so callers can write `return mw_err_set(err, -EBADMSG, ...)`.
 * The first error recorded wins: a later call does not overwrite it, so the
 * innermost, most precise reason reaches the user. */
int mw_err_set(mw_err_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Put a context in front of the recorded reason, e.g. "table /d/t.lance:
 * manifest v3: " + "field 1 'ts': logical type ... not supported", so an
 * outer layer can name the table or file the inner one did not know. With
 * no reason recorded yet, the context (without a trailing ": ") becomes the
 * reason and `code` the code. Returns the recorded code. */
int mw_err_prefix(mw_err_t *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void mw_err_clear(mw_err_t *err);
/* strerror-like text for our codes (thread-safe, static strings). */
const char *mw_strerror(int code);
/* The symbolic name of a negative errno ("EIO", "ENOSPC"), for logs,
 * status and metric labels; "?" when unknown (thread-safe, static). */
const char *mw_errno_name(int code);

#endif
