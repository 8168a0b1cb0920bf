/*
 * pbwire.h — the protobuf wire format's writing side, by hand: a varint, and
 * a length-delimited field (tag, length, bytes). Owns nothing; for the few
 * messages memwald composes field by field (IndexMetadata of an SSTable's
 * index, the IVF protobuf, manifest stamps) where protobuf-c's generated
 * structs would be more code than the bytes. The reading side is
 * shard_manifest.h's mw_pb_next walker.
 *
 * Errors: 0, or -ENOMEM from the buffer (mw_buf_append).
 */
#ifndef MW_LANCE_PBWIRE_H
#define MW_LANCE_PBWIRE_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define MW_PB_VARINT_MAX_BYTES 10 /* 64 bits, 7 a byte */
#define MW_PB_WIRE_LEN 2         /* wire type of a length-delimited field */

/* v as a base-128 varint, least significant group first. */
int mw_pb_put_varint(mw_buf_t *b, uint64_t v);

/* Field `field` (>= 1) as wire type 2: tag, n as a varint, then p[0..n). */
int mw_pb_put_len(mw_buf_t *b, uint32_t field, const void *p, size_t n);

#endif
