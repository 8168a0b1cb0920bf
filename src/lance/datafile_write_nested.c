/*
 * datafile_write_nested.c — the writer's nested columns (lists, structs):
 * one Lance column per leaf, its rows shredded into rep/def levels.
 *
 * Design: a list or struct field has no column of its own: each leaf below it is a
 * column whose levels carry the ancestors' structure (lance-files.md §3.2,
 * Lance's repdef.rs). Along the path top -> leaf every ancestor is a layer;
 * def levels are numbered from the outermost layer down (it gets the highest
 * numbers), 0 = valid all the way:
 *   item/struct with nulls     NULLABLE_ITEM        null = L
 *   list with nulls and empty  NULL_AND_EMPTY_LIST  null = L-1, empty = L
 *   list with nulls            NULLABLE_LIST        null = L
 *   list with empty lists      EMPTYABLE_LIST       empty = L
 *   no nulls (and no empties)  ALL_VALID_ITEM / ALL_VALID_LIST   no level
 * A member of a struct with nulls counts as having nulls (not-null ones
 * too, down to a list): Lance's reader nulls it there and Arrow wants a
 * not-null member's nulls masked by its own struct (docs/sstable.md).
 * Rep levels: the outermost list is max_rep, the innermost 1; the first item
 * of a list gets the level of the outermost list starting there, the others
 * 0. A null or empty list, or a null ancestor above a list, is a "special"
 * level without a value slot; every other level has one (null items and
 * items under null structs get a zero slot). Example, `l: list<int32>` with
 * rows [1, null], null, [] (layers [NULLABLE_ITEM, NULL_AND_EMPTY_LIST]):
 *   rep 1 0 1 1   def 0 1 2 3   values 1 0 (two slots)
 *
 * Pages hold whole rows and one MiniBlock chunk each (at most 32767 levels:
 * the chunk header stores level bytes in a u16), levels raw (Flat{16}),
 * values in the leaf's usual encoding, and with lists the repetition index
 * {rows in the chunk, 0 leftovers}. A page where no level reaches a valid
 * value (lists null or empty, structs or items null) is a ConstantLayout
 * carrying just the levels, RLE'd when they repeat, as Lance writes
 * (levels_page). Every leaf column covers all top-level rows, items or
 * not (issue 26: a list without items once got no pages). The reader
 * (datafile_read_nested.c) maps each page's layers back to these levels.
 */
#include "lance/datafile_internal.h"

#define NESTED_MAX_LEVELS 32767
#define NESTED_CHUNK_BYTES 32768 /* values per nested page (one chunk) */

typedef struct levels {
  mw_buf_t rep, def;   /* u16 each */
  mw_buf_t slot;       /* i64 leaf row per level, -1 for a special */
  mw_buf_t row_start;  /* u64 level index where each top-level row starts, + end */
} levels_t;

static bool any_empty_list(const mw_column_t *c) {
  assert(c->offsets.len >= 4 * (size_t)(c->length + 1)); /* a list column's offsets */
  const int32_t *off = (const int32_t *)(const void *)c->offsets.data;
  for (int64_t r = 0; r < c->length; r++)
    if (mw_column_valid(c, r) && off[r + 1] == off[r]) return true;
  return false;
}

/* Layers and level numbers of a path (from the data: a layer with nulls or
 * empty lists gets levels, as Lance decides per page). */
static void path_levels(lpath_t *p) {
  assert(p->k < MAX_PATH);
  uint16_t def = 0, rep = 0;
  bool has_nulls[MAX_PATH];
  for (int i = 0; i <= p->k; i++) {
    bool list = mw_field_layout(p->f[i]) == MW_LAYOUT_LIST;
    /* a member of a struct with nulls is null there too (not-null ones
     * included: Arrow needs their nulls masked by their own struct's) */
    has_nulls[i] = p->c[i]->null_count > 0 ||
                   (i > 0 && mw_field_layout(p->f[i - 1]) == MW_LAYOUT_STRUCT && has_nulls[i - 1]);
    bool empty = list && any_empty_list(p->c[i]);
    def += (uint16_t)(has_nulls[i] + empty);
    rep += list;
  }
  p->max_def = def;
  p->max_rep = rep;
  for (int i = 0; i <= p->k; i++) {
    bool list = mw_field_layout(p->f[i]) == MW_LAYOUT_LIST;
    bool nulls = has_nulls[i], empty = list && any_empty_list(p->c[i]);
    p->null_level[i] = p->empty_level[i] = p->rep_level[i] = 0;
    if (list) {
      p->rep_level[i] = rep--;
      if (nulls && empty) p->null_level[i] = (uint16_t)(def - 1), p->empty_level[i] = def;
      else if (nulls) p->null_level[i] = def;
      else if (empty) p->empty_level[i] = def;
      p->layer[i] = nulls && empty ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST
                    : nulls       ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST
                    : empty       ? LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST
                                  : LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST;
    } else {
      if (nulls) p->null_level[i] = def;
      p->layer[i] = nulls ? LAYER_NULLABLE : LAYER_ALL_VALID;
    }
    def = (uint16_t)(def - nulls - empty);
  }
  assert(def == 0); /* every layer's levels given out, down to 0 = valid */
  assert(rep == 0);
}

/* The rep level a new element gets at depth i: the one passed down, or
 * else that of the first list at or below i (0 when there is none). */
static uint16_t rep_at(const lpath_t *p, int i, uint16_t rep_in) {
  assert(i >= 0);
  assert(rep_in <= p->max_rep);
  if (rep_in) return rep_in;
  for (; i <= p->k; i++)
    if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) return p->rep_level[i];
  return 0;
}

/* Whether a null at depth i keeps a leaf slot: it is a struct (or the leaf)
 * with no list between it and the leaf, so the leaf column has a row there.
 * A null list never has one. */
bool mw_df_slot_below(const lpath_t *p, int i) {
  assert(i >= 0);
  assert(i <= p->k);
  for (int j = i; j <= p->k; j++)
    if (mw_field_layout(p->f[j]) == MW_LAYOUT_LIST) return false;
  return true;
}

static int level_push(levels_t *lv, uint16_t rep, uint16_t def, int64_t slot) {
  int rc = mw_buf_append(&lv->rep, &rep, 2);
  if (rc == 0) rc = mw_buf_append(&lv->def, &def, 2);
  if (rc == 0) rc = mw_buf_append(&lv->slot, &slot, 8);
  assert(rc < 0 || lv->slot.len == 4 * lv->def.len); /* one slot (i64) per level (u16) */
  return rc;
}

/* Levels of row `row` of the column at depth i (Dremel shredding). */
static int shred(const lpath_t *p, int i, int64_t row, uint16_t rep_in, levels_t *lv) {
  const mw_column_t *c = p->c[i];
  assert(i <= p->k);
  assert(row < c->length);
  if (i == p->k)
    return level_push(lv, rep_in, mw_column_valid(c, row) ? 0 : p->null_level[i], row);
  if (!mw_column_valid(c, row))
    return level_push(lv, rep_at(p, i, rep_in), p->null_level[i], mw_df_slot_below(p, i) ? row : -1);
  if (mw_field_layout(p->f[i]) == MW_LAYOUT_STRUCT) return shred(p, i + 1, row, rep_in, lv);
  int64_t a, b;
  mw_column_list_range(c, row, &a, &b);
  uint16_t first = rep_at(p, i, rep_in);
  if (a == b) return level_push(lv, first, p->empty_level[i], -1);
  for (int64_t j = a; j < b; j++) {
    int rc = shred(p, i + 1, j, j == a ? first : 0, lv);
    if (rc < 0) return rc;
  }
  return 0;
}

static void levels_free(levels_t *lv) {
  mw_buf_free(&lv->rep);
  mw_buf_free(&lv->def);
  mw_buf_free(&lv->slot);
  mw_buf_free(&lv->row_start);
}

/* The leaf values of slots [a, b) of the levels, as a flat column. */
static int slot_values(const lpath_t *p, const levels_t *lv, size_t a, size_t b, mw_column_t *out) {
  const mw_field_t *leaf = p->f[p->k];
  const int64_t *slot = (const int64_t *)(const void *)lv->slot.data;
  assert(a < b);
  assert(b <= lv->slot.len / 8);
  int rc = mw_column_init(out, leaf);
  for (size_t i = a; i < b && rc == 0; i++)
    if (slot[i] >= 0) rc = mw_column_append_range(out, p->c[p->k], leaf, slot[i], 1);
  return rc;
}

/* Raw u16 levels (Flat{16}) for a nested page. */
static void flat16_levels(Lance__Encodings21__Flat *flat16, CE *ce) {
  *flat16 = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  flat16->bits_per_value = 16;
  *ce = (CE)CE_INIT;
  ce->compression_case = CE_FLAT;
  ce->flat = flat16;
}

/* Levels of a levels-only page as Lance 12 compresses them when they
 * repeat (fewer runs than half the levels, its default RLE threshold):
 * RLE{values: Flat{16}, run_lengths: Flat{8}} in block form,
 *   u64 LE values_bytes | u16 value per run | u8 length per run
 * runs longer than 255 split into 255s and the rest (300 levels of 1:
 * 04 00 00 00 00 00 00 00 | 01 00 01 00 | ff 2d). Otherwise raw u16
 * (Flat{16}; Lance bit-packs those). Sets *ce to the encoding used. */
typedef struct lenc {
  Lance__Encodings21__Flat f16, f8;
  Lance__Encodings21__Rle rle;
  CE raw, ce_v, ce_l, ce_rle;
} lenc_t;

static int levels_encode(const uint16_t *lv, size_t n, mw_buf_t *out, lenc_t *e, CE **ce) {
  assert(lv != NULL);
  assert(n > 0);
  size_t runs = 1;
  for (size_t i = 1; i < n; i++) runs += lv[i] != lv[i - 1];
  flat16_levels(&e->f16, &e->raw);
  mw_buf_reset(out);
  if (!(2 * runs < n)) { /* raw */
    *ce = &e->raw;
    return mw_buf_append(out, lv, 2 * n);
  }
  size_t pieces = 0;
  for (size_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && lv[j] == lv[i]; j++) {}
    pieces += (j - i + 254) / 255;
  }
  uint8_t *p = mw_buf_extend(out, 8 + 3 * pieces);
  if (p == NULL) return -ENOMEM;
  mw_store_u64le(p, 2 * pieces);
  size_t at = 0;
  for (size_t i = 0, j; i < n; i = j) {
    for (j = i; j < n && lv[j] == lv[i]; j++) {}
    for (size_t left = j - i; left > 0; at++) {
      size_t len = left < 255 ? left : 255;
      p[8 + 2 * at] = (uint8_t)lv[i], p[9 + 2 * at] = (uint8_t)(lv[i] >> 8);
      p[8 + 2 * pieces + at] = (uint8_t)len;
      left -= len;
    }
  }
  assert(at == pieces);
  e->f8 = (Lance__Encodings21__Flat)LANCE__ENCODINGS21__FLAT__INIT;
  e->f8.bits_per_value = 8;
  e->ce_v = e->raw;
  e->ce_l = (CE)CE_INIT;
  e->ce_l.compression_case = CE_FLAT, e->ce_l.flat = &e->f8;
  e->rle = (Lance__Encodings21__Rle)LANCE__ENCODINGS21__RLE__INIT;
  e->rle.values = &e->ce_v, e->rle.run_lengths = &e->ce_l;
  e->ce_rle = (CE)CE_INIT;
  e->ce_rle.compression_case = CE_RLE, e->ce_rle.rle = &e->rle;
  *ce = &e->ce_rle;
  return 0;
}

/* A page of levels [la, lb) (rows [ra, rb)) where no level reaches a
 * valid value (every list null or empty, every struct or item null): a
 * ConstantLayout with no value, the rep levels in page buffer 0 (empty
 * without lists) and the def levels in buffer 1, each RLE or raw
 * (levels_encode), as Lance writes such a page ("complex all null"). */
static int levels_page(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb, int64_t ra,
                       int64_t rb, Lance__Encodings21__RepDefLayer *layers) {
  size_t nlev = lb - la;
  assert(nlev > 0);
  assert(p->max_def > 0); /* nothing valid: something is null or empty */
  lenc_t er, ed;
  CE *ce_rep = NULL, *ce_def = NULL;
  mw_buf_reset(&w->raw);
  int rc = p->max_rep ? levels_encode((const uint16_t *)(const void *)lv->rep.data + la, nlev, &w->raw, &er, &ce_rep) : 0;
  if (rc == 0) rc = levels_encode((const uint16_t *)(const void *)lv->def.data + la, nlev, &w->zbuf, &ed, &ce_def);
  if (rc < 0) return rc;
  Lance__Encodings21__ConstantLayout cl = LANCE__ENCODINGS21__CONSTANT_LAYOUT__INIT;
  cl.n_layers = (size_t)p->k + 1;
  cl.layers = layers;
  cl.rep_compression = ce_rep;
  cl.def_compression = ce_def;
  cl.num_rep_values = p->max_rep ? nlev : 0;
  cl.num_def_values = nlev;
  wbuf_t bufs[2] = {{w->raw.data, w->raw.len}, {w->zbuf.data, w->zbuf.len}};
  return mw_df_page_write(w, PL_CONSTANT, &cl, ra, rb - ra, bufs, 2);
}

/* The one MiniBlock chunk of a nested page into w->data (its word into
 * w->words): header, rep and def levels [la, lb), the values `vals`. */
static int nested_chunk(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb,
                        const mw_column_t *vals) {
  const mw_field_t *leaf = p->f[p->k];
  bool has_rep = p->max_rep > 0, has_def = p->max_def > 0;
  size_t nlev = lb - la, lbytes = 2 * nlev;
  assert(nlev <= NESTED_MAX_LEVELS); /* the level bytes fit the header's u16 */
  size_t vbn = mw_df_vb_size(leaf, vals, 0, vals->length);
  if (vbn > UINT32_MAX) return mw_err_set(w->err, -EFBIG, "field '%s': chunk of %zu value bytes", leaf->name, vbn);
  size_t hdr = 2 + 2 * (has_rep + has_def) + 4;
  size_t total = pad8(hdr) + (has_rep ? pad8(lbytes) : 0) + (has_def ? pad8(lbytes) : 0) + pad8(vbn);
  mw_buf_reset(&w->data);
  mw_buf_reset(&w->words);
  uint8_t *d = mw_buf_extend(&w->data, total);
  if (d == NULL) return -ENOMEM;
  memset(d, PAD_CHUNK, total);
  size_t at = 0;
  d[at++] = (uint8_t)nlev, d[at++] = (uint8_t)(nlev >> 8);
  if (has_rep) d[at++] = (uint8_t)lbytes, d[at++] = (uint8_t)(lbytes >> 8);
  if (has_def) d[at++] = (uint8_t)lbytes, d[at++] = (uint8_t)(lbytes >> 8);
  mw_store_u32le(d + at, (uint32_t)vbn);
  at = pad8(hdr);
  if (has_rep) memcpy(d + at, lv->rep.data + 2 * la, lbytes), at += pad8(lbytes);
  if (has_def) memcpy(d + at, lv->def.data + 2 * la, lbytes), at += pad8(lbytes);
  memset(d + at, 0, vbn);
  mw_df_vb_fill(d + at, leaf, vals, 0, vals->length);
  assert(at + pad8(vbn) == total); /* header, levels and values as planned */
  assert(total % 8 == 0);
  return mw_buf_put_u32le(&w->words, (uint32_t)((total / 8 - 1) << 4));
}

/* Nulls inside valid vectors of an FSL leaf's values (item nulls under
 * null rows are dropped). */
static bool fsl_item_nulls(const mw_field_t *leaf, const mw_column_t *vals) {
  assert(vals->length >= 0);
  for (int64_t r = 0; leaf->type == MW_T_FSL && vals->item_null_count > 0 && r < vals->length; r++)
    for (int64_t k = 0; mw_column_valid(vals, r) && k < leaf->fsl_dim; k++)
      if (!mw_bit_get(vals->item_validity.data, r * leaf->fsl_dim + k)) return true;
  return false;
}

/* One page of levels [la, lb) holding rows [ra, rb). */
static int nested_page(writer_t *w, const lpath_t *p, const levels_t *lv, size_t la, size_t lb,
                       int64_t ra, int64_t rb) {
  const mw_field_t *leaf = p->f[p->k];
  size_t slots = 0, valid = 0;
  const int64_t *slot = (const int64_t *)(const void *)lv->slot.data;
  const uint16_t *def = (const uint16_t *)(const void *)lv->def.data;
  for (size_t i = la; i < lb; i++) slots += slot[i] >= 0, valid += def[i] == 0;
  assert(lb > la);
  assert(lb - la <= NESTED_MAX_LEVELS);
  assert(rb > ra);
  Lance__Encodings21__RepDefLayer layers[MAX_PATH];
  for (int i = 0; i <= p->k; i++) layers[i] = p->layer[p->k - i]; /* inner first */
  if (valid == 0) return levels_page(w, p, lv, la, lb, ra, rb, layers);
  mw_column_t vals;
  int rc = slot_values(p, lv, la, lb, &vals);
  assert(rc < 0 || vals.length == (int64_t)slots);
  if (rc == 0 && fsl_item_nulls(leaf, &vals))
    rc = mw_err_set(w->err, -ENOTSUP, "field '%s': null items inside vectors", leaf->name);
  if (rc == 0) rc = nested_chunk(w, p, lv, la, lb, &vals);
  mw_column_free(&vals);
  if (rc < 0) return rc;
  bool has_rep = p->max_rep > 0, has_def = p->max_def > 0;
  Lance__Encodings21__Flat flat16;
  CE ce16;
  flat16_levels(&flat16, &ce16);
  vcomp_t vc;
  mw_df_value_compression(leaf, &vc);
  Lance__Encodings21__MiniBlockLayout mb = LANCE__ENCODINGS21__MINI_BLOCK_LAYOUT__INIT;
  mb.rep_compression = has_rep ? &ce16 : NULL;
  mb.def_compression = has_def ? &ce16 : NULL;
  mb.value_compression = &vc.ce;
  mb.n_layers = (size_t)p->k + 1;
  mb.layers = layers;
  mb.num_buffers = 1;
  mb.repetition_index_depth = has_rep ? 1 : 0;
  mb.num_items = slots;
  mb.has_large_chunk = 1;
  uint8_t idx[16]; /* the repetition index: rows in the chunk, 0 leftovers */
  mw_store_u64le(idx, (uint64_t)(rb - ra));
  mw_store_u64le(idx + 8, 0);
  wbuf_t bufs[3] = {{w->words.data, w->words.len}, {w->data.data, w->data.len}, {idx, sizeof idx}};
  return mw_df_page_write(w, PL_MINIBLOCK, &mb, ra, rb - ra, bufs, has_rep ? 3 : 2);
}

/* Value bytes slot `row` of the leaf adds to a nested chunk. */
static size_t slot_value_bytes(const lpath_t *p, int64_t row) {
  const mw_field_t *leaf = p->f[p->k];
  assert(row >= 0);
  assert(row < p->c[p->k]->length);
  if (is_bool(leaf)) return 1;
  if (is_var(leaf)) return off_width(leaf) + var_bytes(p->c[p->k], row, row + 1);
  return mw_type_width(leaf);
}

/* Every page of one leaf column. A page is one MiniBlock chunk, so its
 * values stay under NESTED_CHUNK_BYTES (a row's worth more at most when one
 * row is larger): LanceDB decodes a whole chunk for each range of rows it
 * takes, and with deletions over a chunk of 14 MB it asked for 58 GB and
 * aborted (gendiff seed 1036). */
static int write_leaf_path(writer_t *w, lpath_t *p) {
  levels_t lv = {MW_BUF_INIT, MW_BUF_INIT, MW_BUF_INIT, MW_BUF_INIT};
  path_levels(p);
  int64_t rows = p->c[0]->length;
  int rc = 0;
  for (int64_t r = 0; r < rows && rc == 0; r++) {
    uint64_t at = lv.rep.len / 2;
    rc = mw_buf_append(&lv.row_start, &at, 8);
    if (rc == 0) rc = shred(p, 0, r, 0, &lv);
  }
  uint64_t end = lv.rep.len / 2;
  if (rc == 0) rc = mw_buf_append(&lv.row_start, &end, 8);
  assert(rc < 0 || lv.row_start.len == 8 * (size_t)(rows + 1)); /* each row's start, and the end */
  const uint64_t *rs = (const uint64_t *)(const void *)lv.row_start.data;
  const int64_t *slot = (const int64_t *)(const void *)lv.slot.data;
  size_t limit = w->max_page_bytes < NESTED_CHUNK_BYTES ? w->max_page_bytes : NESTED_CHUNK_BYTES;
  int64_t ra = 0;
  while (ra < rows && rc == 0) {
    /* whole rows while the levels and the values fit one chunk */
    int64_t rb = ra;
    size_t bytes = 0;
    while (rb < rows && rs[rb + 1] - rs[ra] <= NESTED_MAX_LEVELS) {
      size_t row_bytes = 0;
      for (uint64_t i = rs[rb]; i < rs[rb + 1]; i++)
        if (slot[i] >= 0) row_bytes += slot_value_bytes(p, slot[i]);
      if (rb > ra && bytes + row_bytes > limit) break;
      bytes += row_bytes;
      rb++;
    }
    if (rb == ra) rb = ra + 1; /* one row over the level limit: refused below */
    if (rs[rb] - rs[ra] > NESTED_MAX_LEVELS) {
      rc = mw_err_set(w->err, -EFBIG, "field '%s': row %lld has %llu levels (limit %d)",
                      p->f[0]->name, (long long)ra, (unsigned long long)(rs[rb] - rs[ra]), NESTED_MAX_LEVELS);
      break;
    }
    rc = nested_page(w, p, &lv, (size_t)rs[ra], (size_t)rs[rb], ra, rb);
    ra = rb;
  }
  assert(rc < 0 || ra == rows); /* the pages hold every row once */
  levels_free(&lv);
  return rc;
}

/* The leaf columns of nested field f, in pre-order, each flushed as one
 * Lance column (*col counts them). */
int mw_df_write_nested(writer_t *w, lpath_t *p, int depth, size_t *col) {
  const mw_field_t *f = p->f[depth];
  const mw_column_t *c = p->c[depth];
  mw_layout_t l = mw_field_layout(f);
  assert(depth < MAX_PATH);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) {
    p->k = depth;
    assert(*col < w->n_cols);
    int rc = p->c[0]->length ? write_leaf_path(w, p) : 0;
    if (rc == 0) rc = mw_df_flush_column_meta(w, (*col)++);
    return rc;
  }
  if (depth + 1 >= MAX_PATH) return mw_err_set(w->err, -EINVAL, "field '%s' nested too deep", f->name);
  for (uint32_t i = 0; i < f->n_children; i++) {
    p->f[depth + 1] = &f->children[i];
    p->c[depth + 1] = &c->children[i];
    int rc = mw_df_write_nested(w, p, depth + 1, col);
    if (rc < 0) return rc;
  }
  return 0;
}

