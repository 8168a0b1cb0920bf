/*
 * batch_int.h — what the columnar model's files share (private to
 * schema.c, column.c, column_append.c and batch.c; the API is batch.h).
 */
#ifndef MW_LANCE_BATCH_INT_H
#define MW_LANCE_BATCH_INT_H

#include <stddef.h>

/* snprintf into out + *at, keeping *at <= len - 1: text that does not fit
 * is cut, never overrun (type texts, utf8 paths). */
void mw_text_put(char *out, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
