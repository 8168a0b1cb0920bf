/*
 * lance_schema.h — mw_schema_t <-> Lance `lance.file.Field` lists, and the
 * Lance logical-type strings.
 *
 * Owns: the mapping between our columnar schema (batch.h) and the Field
 * messages that Lance stores in data-file descriptors (global buffer 0) and in
 * dataset manifests (Manifest.fields). One mapping, used by both, so a data
 * file and its manifest can never disagree. Also which fields are Lance
 * columns: every field that is not a list or struct (a "leaf") is one column
 * of a 2.x data file, in pre-order; lists and structs have none.
 *
 * What it writes per field (lance-files.md §2.3), in pre-order (a field, then
 * its children): type PARENT (0, omitted), name, id, parent_id (-1 at the top,
 * else the parent's id), logical_type ("int64", "timestamp:us:UTC",
 * "fixed_size_list:halffloat:8", "list", "struct", ...; types.h lists them),
 * nullable, the legacy encoding hint (VAR_BINARY for strings and binaries,
 * none for structs, PLAIN otherwise, as lance-core field.rs sets it), field
 * metadata in order, and for primary-key fields unenforced_primary_key = true
 * and unenforced_primary_key_position. Field ids are taken from
 * mw_field_t.id; fields with id -1 are numbered in pre-order.
 *
 * Errors: negative errno; -ENOTSUP (with the field name and logical type in
 * *err) for Lance types we do not implement, -EBADMSG for malformed field
 * lists (unknown parents, children out of pre-order, bad parameters).
 */
#ifndef MW_LANCE_SCHEMA_H
#define MW_LANCE_SCHEMA_H

#include <stddef.h>

#include "common/err.h"
#include "file.pb-c.h"
#include "lance/batch.h"

#define MW_LANCE_LOGICAL_MAX_BYTES 128

/* Build a heap array of heap-allocated Field messages (free with
 * mw_lance_fields_free), every field of the tree in pre-order. */
int mw_lance_fields_from_schema(const mw_schema_t *s, Lance__File__Field ***out, size_t *n_out);
void mw_lance_fields_free(Lance__File__Field **fields, size_t n);
/* Rebuild a schema from a pre-order field list. */
int mw_lance_schema_from_fields(Lance__File__Field *const *fields, size_t n, mw_schema_t *out,
                                mw_err_t *err);

/* Lance logical type of a field ("timestamp:ms:-"). -EINVAL if it does not
 * fit in out_len. */
int mw_lance_logical(const mw_field_t *f, char *out, size_t out_len);

/* The leaf fields (Lance columns) in pre-order: leaves[i] is column i and
 * ids[i] its field id (arrays of cap entries; either may be NULL). Returns
 * the number of leaves, or -EFBIG when it exceeds cap. */
int mw_lance_leaves(const mw_schema_t *s, const mw_field_t **leaves, int32_t *ids, size_t cap);

#endif
