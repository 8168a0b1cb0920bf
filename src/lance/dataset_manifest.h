/*
 * dataset_manifest.h — Lance dataset manifests: file names, file framing, the
 * Manifest message, the index section, the MemWAL index entry, a builder for
 * a fresh SSTable manifest, and the base-table metadata memwald needs
 * (lance-files.md §4, §5, §6, §7.5; memwal.md §8.1, §8.2, §9).
 *
 * Owns:
 *   - names: V2 `{u64::MAX - v:020}.manifest`, V1 `{v}.manifest`, parse both;
 *   - framing: [sections: u32 len || protobuf]* u32 len || Manifest ||
 *     u64 pos | u16 0 | u16 2 | "LANC";
 *   - mw_dmanifest_t: the generated Lance__Table__Manifest plus the presence
 *     of the three proto3 `optional` scalars that Lance writes as 0
 *     (index_section, max_fragment_id, transaction_section). The build copy of
 *     table.proto drops `optional` (proto/meson.build), so protoc-c alone would
 *     drop `6: 0`, `11: 0`, `21: 0`; we record presence on decode by walking
 *     the wire and splice the zero fields back in on encode. The same is done
 *     for IndexMetadata.index_version / created_at / base_id.
 *   - mw_table_meta_t: what the daemon reads from a base table's latest
 *     manifest (schema fields, primary key, feature flags, storage version,
 *     the `__lance_mem_wal` index).
 *
 * Feature flags: LanceDB 0.39.0 tables in the vectors carry no reader or
 * writer feature flag at all (0/0, SSTables too). memwald accepts exactly
 * MW_TABLE_FLAGS_SUPPORTED = bit 0 (deletion files present): memwald never
 * reads base data files and writes its own deletion files, so it honours it.
 * Every other bit (stable row ids 1<<1, v2-deprecated 1<<2, table config 1<<3,
 * multiple base paths 1<<4, no transaction files 1<<5, overlays 1<<6,
 * covering indexes 1<<7, mixed file versions 1<<8, unknown bits) is refused
 * with -ENOTSUP naming the bit.
 *
 * Limits: MW_DMANIFEST_* below; top-level fields and fragments are counted on
 * the wire before protobuf-c allocates. Nested lists (files per fragment) are
 * bounded only by the byte limit: protobuf-c may allocate some tens of times
 * the input size for a hostile manifest. Errors: negative errno; -EBADMSG with a reason
 * for malformed bytes, -ENOTSUP for features we do not implement, -EINVAL for
 * a name that is not a manifest name, -ENOENT when nothing matches.
 */
#ifndef MW_LANCE_DATASET_MANIFEST_H
#define MW_LANCE_DATASET_MANIFEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/err.h"
#include "lance/batch.h"
#include "lance/lance_schema.h"
#include "table.pb-c.h"

#define MW_DMANIFEST_MAX_BYTES ((size_t)64 << 20)
#define MW_DMANIFEST_FOOTER_BYTES 16
#define MW_DMANIFEST_MAX_SECTIONS 16
#define MW_DMANIFEST_MAX_FIELDS 4096
#define MW_DMANIFEST_MAX_FRAGMENTS 1000000
#define MW_DMANIFEST_MAX_INDEXES 4096
#define MW_DMANIFEST_NAME_BYTES 48
#define MW_TABLE_MAX_PK_FIELDS 16
#define MW_MEMWAL_MAX_SOURCE_IDS 8
#define MW_MEMWAL_MAX_LIST 1024   /* maintained indexes, config entries, compacted */
#define MW_MEMWAL_MAX_BUCKETS 1024

#define MW_MEMWAL_INDEX_NAME "__lance_mem_wal"
#define MW_MEMWAL_DETAILS_TYPE_URL "/lance.table.MemWalIndexDetails"

/* Reader/writer feature flags (table.proto Manifest.reader_feature_flags). */
#define MW_FLAG_DELETION_FILES (UINT64_C(1) << 0)
/* Zone write seeds v1 (seed proposal 002): set in BOTH reader and writer
 * flags by the commit that first references a data file with v1 seeds, and
 * kept by every derived version. Readers that do not know it (LanceDB
 * 0.39.0 / Lance 12) refuse the dataset. memwald accepts it only where it
 * writes v1 seeds itself (mw_table_meta_read_ex). */
#define MW_FLAG_ZONE_WRITE_SEEDS (UINT64_C(1) << 16)
#define MW_TABLE_FLAGS_SUPPORTED MW_FLAG_DELETION_FILES

/* --- names (§4.1) --- */
/* V2 name of `version` ("18446744073709551614.manifest" for 1). Returns the
 * length or -ENOSPC / -EINVAL (version 0 or u64::MAX). */
int mw_dmanifest_name(uint64_t version, char *out, size_t out_len);
/* "<20 digits>.manifest" (V2) or "<1..19 digits>.manifest" (V1) -> version;
 * *v2 (may be NULL) says which. -EINVAL for anything else. */
int mw_dmanifest_name_parse(const char *name, uint64_t *version, bool *v2);
/* Pick the newest version among directory entry names (others ignored).
 * *index = position of that name. -ENOENT if none, -EBADMSG if V1 and V2
 * names are mixed. */
int mw_dmanifest_latest(char *const *names, size_t n, uint64_t *version, size_t *index,
                        mw_err_t *err);

/* A data file name from a UUIDv4's 16 bytes, as Lance's
 * generate_random_filename makes it: the first 3 bytes as 24 binary digits,
 * the other 13 as 26 lowercase hex digits, then ".lance" (56 chars + NUL).
 * The version and variant bits are set here. */
#define MW_DATA_FILE_NAME_BYTES 64
void mw_data_file_name(const uint8_t uuid[16], char out[MW_DATA_FILE_NAME_BYTES]);

/* --- framing (§4.2) --- */
typedef struct mw_section {
  const uint8_t *data; /* borrowed */
  size_t len;
} mw_section_t;

/* Locate the Manifest message in a whole file (magic, pos, and the manifest
 * ending right at the footer are checked). *pos = file offset of its u32 len. */
int mw_dmanifest_unframe(const uint8_t *p, size_t n, mw_section_t *manifest, uint64_t *pos,
                         mw_err_t *err);
/* The section (u32 len || bytes) at file offset `off`, which must end at or
 * before `limit` (the manifest's position). */
int mw_dmanifest_section_at(const uint8_t *p, size_t n, uint64_t off, uint64_t limit,
                            mw_section_t *out, mw_err_t *err);

/* --- the Manifest message --- */
/* The writer every manifest of ours names: library "lance" version "12.0.0"
 * (what LanceDB 0.39.0 writes), data storage format "lance" "2.2". Fills
 * *wv and *fmt and points m at them (all three must outlive the packing). */
void mw_dmanifest_stamp(Lance__Table__Manifest *m, Lance__Table__Manifest__WriterVersion *wv,
                        Lance__Table__Manifest__DataStorageFormat *fmt);
typedef struct mw_dmanifest {
  Lance__Table__Manifest *pb; /* owned; from protoc-c unpack */
  bool has_index_section;
  bool has_max_fragment_id;
  bool has_transaction_section;
} mw_dmanifest_t;

/* Decode the Manifest message bytes (not the framed file). Free with
 * mw_dmanifest_free, also after a failure. */
int mw_dmanifest_decode(const uint8_t *p, size_t n, mw_dmanifest_t *m, mw_err_t *err);
void mw_dmanifest_free(mw_dmanifest_t *m);
/* Append the Manifest message for any generated struct (ours or built on the
 * stack) with the given presence of the three zero-able optionals. */
int mw_dmanifest_pack(const Lance__Table__Manifest *pb, bool has_index_section,
                      bool has_max_fragment_id, bool has_transaction_section, mw_buf_t *out);
int mw_dmanifest_encode(const mw_dmanifest_t *m, mw_buf_t *out);
/* Write a whole file: each section at the running offset, then the manifest
 * message and the footer. The manifest's index_section/transaction_section
 * must already name the right offsets (see mw_base_manifest_file_encode). */
int mw_dmanifest_file_encode(const mw_section_t *sections, size_t n_sections,
                             const uint8_t *manifest, size_t manifest_len, mw_buf_t *out);

/* --- fresh SSTable manifest (lance-files.md §4.3, §7.4) --- */
typedef struct mw_sst_manifest_params {
  Lance__File__Field *const *fields; /* schema incl. _tombstone, pre-order */
  size_t n_fields;
  const char *data_file;             /* name under data/, e.g. "<50 chars>.lance" */
  const int32_t *field_ids;          /* DataFile.fields */
  const int32_t *column_indices;     /* DataFile.column_indices */
  size_t n_columns;
  uint64_t file_size_bytes;
  uint64_t physical_rows;
  bool has_deletion;                 /* BITMAP, read_version 1 */
  uint64_t deletion_id;
  uint64_t num_deleted_rows;
  int64_t timestamp_seconds;
  int32_t timestamp_nanos;
  uint64_t feature_flags;            /* reader AND writer flags (MW_FLAG_ZONE_WRITE_SEEDS), 0 = none */
  /* An IndexSection message (mw_index_section_encode of the SSTable's
   * vector index entries, vindex_file.h), written as the section at offset
   * 0 with manifest.index_section = 0, as LanceDB's flush writes it; NULL =
   * no index section. */
  const uint8_t *index_section;
  size_t index_section_len;
} mw_sst_manifest_params_t;

/* Append the whole `_versions/18446744073709551614.manifest` file. */
int mw_sst_manifest_encode(const mw_sst_manifest_params_t *p, mw_buf_t *out, mw_err_t *err);

/* --- index section (IndexSection = repeated IndexMetadata) --- */
typedef struct mw_index_entry {
  Lance__Table__IndexMetadata *pb; /* owned */
  bool has_index_version;
  bool has_created_at;
  bool has_base_id;
} mw_index_entry_t;

typedef struct mw_index_section {
  mw_index_entry_t *items;
  size_t n;
} mw_index_section_t;

int mw_index_section_decode(const uint8_t *p, size_t n, mw_index_section_t *s, mw_err_t *err);
void mw_index_section_free(mw_index_section_t *s);
/* IndexMetadata message bytes of one entry (presence-exact). */
int mw_index_entry_encode(const mw_index_entry_t *e, mw_buf_t *out);
/* Wrap IndexMetadata messages into an IndexSection message. */
int mw_index_section_encode(const mw_section_t *entries, size_t n, mw_buf_t *out);

/* --- the MemWAL index (§8.1, §8.2) --- */
typedef enum mw_sharding_kind {
  MW_SHARDING_MANUAL = 0,    /* no sharding spec (manual shards) */
  MW_SHARDING_UNSHARDED = 1,
  MW_SHARDING_BUCKET = 2,
  MW_SHARDING_IDENTITY = 3,
} mw_sharding_kind_t;

typedef struct mw_compacted_sstable {
  uint8_t shard_id[16];
  uint64_t generation;
} mw_compacted_sstable_t;

typedef struct mw_memwal_index {
  /* IndexMetadata */
  uint8_t uuid[16];
  uint64_t dataset_version;
  uint64_t created_at_ms;         /* 0 = absent */
  /* MemWalIndexDetails */
  int64_t snapshot_ts_millis;
  uint32_t num_shards;
  bool has_spec;                  /* false: MW_SHARDING_MANUAL */
  uint32_t spec_id;
  char *sharding_field_id;        /* "bucket" for all three kinds */
  mw_sharding_kind_t kind;
  int32_t source_ids[MW_MEMWAL_MAX_SOURCE_IDS];
  size_t n_source_ids;
  int32_t source_field_id;        /* source_ids[0], or -1 */
  char *result_type;              /* "int32", identity: arrow type name */
  mw_kvs_t parameters;            /* ordered, e.g. num_buckets */
  uint32_t num_buckets;           /* bucket: 1..1024, else 0 */
  char **maintained_indexes;
  size_t n_maintained_indexes;
  mw_compacted_sstable_t *compacted;
  size_t n_compacted;
  mw_kvs_t writer_config_defaults; /* ordered as stored */
} mw_memwal_index_t;

void mw_memwal_index_init(mw_memwal_index_t *x);
void mw_memwal_index_free(mw_memwal_index_t *x);
/* From an IndexMetadata named __lance_mem_wal. -ENOTSUP for several specs,
 * several sharding fields, an expression, index_catchup or inline snapshots,
 * or an unknown transform. */
int mw_memwal_index_decode(const Lance__Table__IndexMetadata *pb, mw_memwal_index_t *x,
                           mw_err_t *err);
/* MemWalIndexDetails message bytes. */
int mw_memwal_details_encode(const mw_memwal_index_t *x, mw_buf_t *out);
/* IndexMetadata message bytes: uuid, name, dataset_version, Any{details},
 * index_version 0 (written), created_at. */
int mw_memwal_index_entry_encode(const mw_memwal_index_t *x, mw_buf_t *out);
/* Transaction{read_version, uuid, create_index{new_indices: [entry]}} bytes,
 * as Lance writes into transaction_section for the CreateIndex commit. */
int mw_create_index_txn_encode(uint64_t read_version, const char *uuid_text,
                               const uint8_t *entry, size_t entry_len, mw_buf_t *out);
/* Whole base manifest file: index section at 0 (if given), then the
 * transaction section (if given), then `m` with both positions set. */
int mw_base_manifest_file_encode(mw_dmanifest_t *m, const uint8_t *index_section,
                                 size_t index_len, const uint8_t *txn, size_t txn_len,
                                 mw_buf_t *out);

/* --- base-table metadata --- */
typedef struct mw_table_meta {
  uint64_t version;
  mw_dmanifest_t manifest;      /* raw fields: manifest.pb->fields / n_fields */
  mw_schema_t schema;           /* the same fields via lance_schema.h (ids, PK positions) */
  int32_t pk_field_ids[MW_TABLE_MAX_PK_FIELDS]; /* in key order */
  size_t n_pk;
  uint64_t reader_feature_flags;
  uint64_t writer_feature_flags;
  char data_storage_version[16]; /* "2.2"; "" when absent */
  bool has_memwal;
  mw_memwal_index_t memwal;
  mw_index_section_t indexes;   /* every index entry, for carrying through */
} mw_table_meta_t;

/* Parse a whole base manifest file. -ENOTSUP for feature flags outside
 * MW_TABLE_FLAGS_SUPPORTED (naming the bit) and for column types memwald
 * cannot write (mw_lance_schema_from_fields). Free with mw_table_meta_free,
 * also after a failure. */
int mw_table_meta_read(const uint8_t *file, size_t n, mw_table_meta_t *t, mw_err_t *err);
/* The same, accepting the feature flag bits in `accept_flags` as well
 * (MW_FLAG_ZONE_WRITE_SEEDS when the table is configured to write v1
 * seeds). A flag that is set but not accepted is refused with -ENOTSUP
 * naming it. */
int mw_table_meta_read_ex(const uint8_t *file, size_t n, uint64_t accept_flags,
                          mw_table_meta_t *t, mw_err_t *err);
/* "zone write seeds (FLAG_ZONE_WRITE_SEEDS)" for bit 16, and so on; "unknown"
 * for bits Lance 12 does not define. */
const char *mw_feature_flag_name(int bit);
void mw_table_meta_free(mw_table_meta_t *t);
/* Index of the field with Lance id `id` in t->manifest.pb->fields, or -ENOENT. */
int mw_table_meta_field(const mw_table_meta_t *t, int32_t id);

#endif
