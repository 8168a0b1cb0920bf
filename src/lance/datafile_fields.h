/*
 * datafile_fields.h — how a manifest's DataFile maps the table's fields onto
 * the columns of one Lance data file: DataFile.fields (field ids) and
 * DataFile.column_indices, as LanceDB 0.39.0 (Lance 12) writes them and as
 * it checks them before it reads a fragment.
 *
 * Owns: the one mapping every manifest memwald writes uses (an SSTable's
 * manifest, compaction's base fragment), and the check `memwal-inspect
 * verify` runs on every DataFile of a table.
 *
 * What LanceDB's writer records, per file version (measured on tables it
 * made with list, struct, list of struct, struct with a list,
 * fixed_size_list and list of fixed_size_list columns,
 * tests/lance/data/layout, tools/gen-layout-fixtures.mjs):
 *   2.1 and 2.2  the leaves (fields that are neither a list nor a struct; a
 *                fixed_size_list is a leaf, it has no child field) in
 *                pre-order; column_indices 0..L-1. Lists and structs have
 *                no column and are not listed.
 *   2.0          every field in pre-order, column i.
 * What its reader demands of a 2.1+ data file (lance dataset's
 * validate_column_indices, then the fragment reader): as many column
 * indices as field ids; a leaf (or packed struct, or blob) has an index,
 * -1 is refused; a list or struct has none, anything but -1 is refused
 * ("Non-leaf field 'tags' (id=5) ... has column_index=5, but non-leaf
 * fields should have column_index=-1 in file format 2.1+"); an index past
 * the file's columns is refused ("column index N but there are only M
 * columns"). An index that names another field's column is not refused: it
 * decodes that column as the field (a wrong type fails late, the same type
 * reads the wrong values); a field of the file left out of DataFile.fields
 * reads as nulls. The check refuses both, comparing with the file's own
 * schema (its footer's field ids).
 *
 * Packed structs and blob fields (one column for a whole subtree) are not
 * written by memwald: -ENOTSUP naming the field.
 *
 * Errors: negative errno with the reason in *err: -EBADMSG for a mapping
 * LanceDB refuses or would misread, -ENOTSUP for what memwald does not
 * implement (a legacy v1 or unknown file version, packed structs, blobs),
 * -EFBIG when the arrays are too small.
 */
#ifndef MW_LANCE_DATAFILE_FIELDS_H
#define MW_LANCE_DATAFILE_FIELDS_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "lance/batch.h"

/* Entries of a DataFile mapping at most: every field of the largest schema. */
#define MW_DF_FIELDS_MAX (4 * MW_MAX_FIELDS)

/* DataFile.fields (ids) and column_indices (cols) of a data file of Lance
 * file version major.minor (2.0, 2.1, 2.2; the 2.0 footer's 0.3 too)
 * holding every field of s, as LanceDB's writer records them. Fields with
 * id -1 are numbered as lance_schema.h numbers them. Returns the number of
 * entries (arrays of cap). */
int mw_datafile_fields(const mw_schema_t *s, uint32_t major, uint32_t minor, int32_t *ids,
                       int32_t *cols, size_t cap, mw_err_t *err);

/* One DataFile of a manifest. */
typedef struct mw_df_ref {
  const int32_t *ids;  /* DataFile.fields */
  size_t n_ids;
  const int32_t *cols; /* DataFile.column_indices */
  size_t n_cols;
  uint32_t major, minor; /* DataFile.file_major_version, file_minor_version */
} mw_df_ref_t;

/* The data file it names, as its footer describes it. */
typedef struct mw_df_file {
  const mw_schema_t *schema; /* its own fields, with their ids */
  uint32_t n_columns;
  uint32_t major, minor;     /* footer version (0.3 = 2.0) */
} mw_df_file_t;

/* Check `ref` against the table's schema `table` and the file: 0 when
 * LanceDB reads every field of the file as the file holds it; else the
 * first problem (-EBADMSG) in *err. Field ids the table no longer has are
 * skipped, as LanceDB skips them. */
int mw_datafile_fields_check(const mw_schema_t *table, const mw_df_ref_t *ref,
                             const mw_df_file_t *file, mw_err_t *err);

#endif
