/*
 * lance_schema.h — mw_schema_t <-> Lance `lance.file.Field` lists.
 *
 * Owns: the mapping between our columnar schema (batch.h) and the Field
 * messages that Lance stores in data-file descriptors (global buffer 0) and in
 * dataset manifests (Manifest.fields). One mapping, used by both, so a data
 * file and its manifest can never disagree.
 *
 * What it writes per top-level field (lance-files.md §2.3): type PARENT (0,
 * omitted), name, id, parent_id -1, logical_type ("int64", "string",
 * "fixed_size_list:float:8", ...), nullable, the legacy encoding hint (PLAIN or
 * VAR_BINARY), field metadata in order, and for primary-key fields
 * unenforced_primary_key = true and unenforced_primary_key_position.
 * Field ids are taken from mw_field_t.id; a field with id -1 gets its index.
 *
 * Errors: negative errno; -ENOTSUP (with the field name in *err) for Lance
 * types we do not implement, -EBADMSG for malformed field lists.
 */
#ifndef MW_LANCE_SCHEMA_H
#define MW_LANCE_SCHEMA_H

#include <stddef.h>

#include "common/err.h"
#include "file.pb-c.h"
#include "lance/batch.h"

/* Build a heap array of heap-allocated Field messages (free with
 * mw_lance_fields_free). */
int mw_lance_fields_from_schema(const mw_schema_t *s, Lance__File__Field ***out, size_t *n_out);
void mw_lance_fields_free(Lance__File__Field **fields, size_t n);
/* Rebuild a schema from a (pre-order) field list; nested fields other than
 * fixed_size_list:float:D are refused with -ENOTSUP naming the field. */
int mw_lance_schema_from_fields(Lance__File__Field *const *fields, size_t n, mw_schema_t *out,
                                mw_err_t *err);

#endif
