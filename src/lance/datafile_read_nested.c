/*
 * datafile_read_nested.c — the reader's nested columns (lists, structs):
 * assembly from rep/def levels (lance-files.md §3.2).
 *
 * Design: each leaf column is read page by page into its levels and its value
 * slots (the page's values, decoded as for a flat column), then assembled
 * (Dremel) into the field's column tree along the leaf's path; the first
 * leaf of a subtree builds the shared lists and structs, later leaves only
 * their own branch, which is moved into place. Layers come from each page
 * (Lance chooses them per page); their level numbers are rebuilt the way
 * datafile_write_nested.c assigns them. A page's levels and value slots
 * are untrusted: a level that names no layer, a slot past the values or a
 * row count other than the page's is -EBADMSG.
 *
 * Sample: `l: list<int32>` rows [1, null], null, [] as one MiniBlock page
 * (layers inner first [NULLABLE_ITEM, NULL_AND_EMPTY_LIST]: item null = 1,
 * list null = 2, empty = 3):
 *   rep 1 0 1 1 | def 0 1 2 3 | values 1 0
 *   -> row 0 [1, null] (rep 1 starts a row, rep 0 continues it), row 1
 *      null (def 2), row 2 [] (def 3); two value slots, the null item's 0.
 */
#include "lance/datafile_internal.h"

#include "google/protobuf/any.pb-c.h"
#include "lance/fullzip.h"

typedef struct rlevels {
  const lpath_t *p;            /* fields; c[] points into the tree being built */
  mw_column_t *node[MAX_PATH]; /* the columns being assembled, top .. leaf */
  /* this page's level map */
  uint16_t null_level[MAX_PATH], empty_level[MAX_PATH], rep_level[MAX_PATH];
  uint16_t max_rep, max_def;
} rlevels_t;

/* The page's layers (inner first) -> the level map of the path. */
static int page_level_map(rctx_t *x, rlevels_t *r, const Lance__Encodings21__RepDefLayer *layers,
                          size_t n_layers) {
  const lpath_t *p = r->p;
  if (n_layers != (size_t)p->k + 1) return BAD(x, "%zu layers for a path of %d fields", x->col, x->page, n_layers, p->k + 1);
  uint16_t def = 0, rep = 0;
  for (size_t j = 0; j < n_layers; j++) {
    Lance__Encodings21__RepDefLayer l = layers[j];
    bool list = mw_field_layout(p->f[p->k - (int)j]) == MW_LAYOUT_LIST;
    bool list_layer = l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_ALL_VALID_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST ||
                      l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST;
    if (list != list_layer || (!list && l != LAYER_ALL_VALID && l != LAYER_NULLABLE))
      return BAD(x, "layer %zu (%d) does not fit field '%s'", x->col, x->page, j, (int)l, p->f[p->k - (int)j]->name);
    def += l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST ? 2
           : l == LAYER_NULLABLE || l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST ||
                     l == LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST ? 1 : 0;
    rep += list;
  }
  r->max_def = def, r->max_rep = rep;
  for (int i = 0; i <= p->k; i++) { /* outer to inner */
    Lance__Encodings21__RepDefLayer l = layers[p->k - i];
    r->null_level[i] = r->empty_level[i] = r->rep_level[i] = 0;
    if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) r->rep_level[i] = rep--;
    switch ((int)l) {
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULL_AND_EMPTY_LIST:
        r->null_level[i] = (uint16_t)(def - 1), r->empty_level[i] = def, def = (uint16_t)(def - 2);
        break;
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_NULLABLE_LIST:
      case LAYER_NULLABLE: r->null_level[i] = def--; break;
      case LANCE__ENCODINGS21__REP_DEF_LAYER__REPDEF_EMPTYABLE_LIST: r->empty_level[i] = def--; break;
      default: break;
    }
  }
  assert(def == 0); /* every layer's levels mapped, down to 0 = valid */
  assert(rep == 0);
  return 0;
}

static bool rslot_below(const rlevels_t *r, int i) { return mw_df_slot_below(r->p, i); }

/* Below a null struct at depth e, Lance's reader makes the leaf null and
 * each member whose layer is nullable; Arrow then needs a not-null
 * member's nulls masked by its own struct's. The first not-null member i
 * left unmasked (its struct's layer all-valid), or -1. LanceDB 0.39.0
 * refuses such a page ("Found unmasked nulls for non-nullable StructArray
 * field"); our writer once made it (issue 26, gendiff seed 2035979854). */
static int unmasked_below(const rlevels_t *r, int e) {
  const lpath_t *p = r->p;
  assert(e >= 0);
  assert(e <= p->k);
  if (mw_field_layout(p->f[e]) != MW_LAYOUT_STRUCT) return -1;
  for (int i = e + 2; i <= p->k; i++) {
    if (mw_field_layout(p->f[i - 1]) != MW_LAYOUT_STRUCT) return -1;
    bool nulls_here = i == p->k || r->null_level[i] != 0;
    if (!p->f[i]->nullable && r->null_level[i - 1] == 0 && nulls_here) return i;
  }
  return -1;
}

/* One row (or null/filler) at node i of the path, keeping the parent list's
 * end in step. */
static int node_row(rlevels_t *r, int i, bool valid) {
  assert(i >= 0);
  assert(i < r->p->k); /* leaves go through leaf_row */
  const mw_field_t *f = r->p->f[i];
  mw_column_t *c = r->node[i];
  int rc;
  if (mw_field_layout(f) == MW_LAYOUT_LIST || mw_field_layout(f) == MW_LAYOUT_STRUCT)
    rc = mw_column_append_parent(c, valid);
  else
    rc = -EINVAL; /* leaves go through leaf_row */
  if (rc == 0 && i > 0 && mw_field_layout(r->p->f[i - 1]) == MW_LAYOUT_LIST) mw_column_list_grow(r->node[i - 1]);
  return rc;
}

/* The leaf's row: value slot j of vals, or a null. */
static int leaf_row(rlevels_t *r, const mw_column_t *vals, int64_t j, bool null) {
  assert(j < vals->length); /* assemble checked the slot */
  const mw_field_t *f = r->p->f[r->p->k];
  mw_column_t *c = r->node[r->p->k];
  int rc = null ? mw_column_append_null(c, f) : mw_column_append_range(c, vals, f, j, 1);
  int k = r->p->k;
  if (rc == 0 && k > 0 && mw_field_layout(r->p->f[k - 1]) == MW_LAYOUT_LIST) mw_column_list_grow(r->node[k - 1]);
  return rc;
}

/* Assemble levels [0, n) of a page: rep[] (NULL: no lists), def[] (NULL:
 * all valid), slots taken from vals in order. *rows counts top-level rows. */
static int assemble(rctx_t *x, rlevels_t *r, const uint16_t *rep, const uint16_t *def, size_t n,
                    const mw_column_t *vals, int64_t *rows) {
  const lpath_t *p = r->p;
  int k = p->k;
  int64_t slot = 0;
  *rows = 0;
  for (size_t li = 0; li < n; li++) {
    uint16_t rv = rep ? rep[li] : 0, dv = def ? def[li] : 0;
    int s = 0; /* the depth where this level starts new rows */
    if (r->max_rep > 0 && rv != r->max_rep) {
      /* rep level rv < max: a new item of the list whose level is rv + 1
       * (rv 0: of the innermost list) */
      s = -1;
      for (int i = 0; i <= k; i++)
        if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST && r->rep_level[i] == rv + 1) s = i + 1;
      if (s < 0) return BAD(x, "rep level %u of level %zu", x->col, x->page, rv, li);
      if (li == 0) return BAD(x, "page starts inside a row (rep level %u)", x->col, x->page, rv);
    }
    if (s == 0) (*rows)++;
    /* where this level stops, and how */
    int e = k;
    enum { VALUE, NUL, EMPTY } kind = VALUE;
    if (dv != 0) {
      e = -1;
      for (int i = 0; i <= k && e < 0; i++) {
        if (r->null_level[i] == dv) e = i, kind = NUL;
        else if (r->empty_level[i] == dv) e = i, kind = EMPTY;
      }
      if (e < 0) return BAD(x, "def level %u of level %zu", x->col, x->page, dv, li);
    }
    if (e < s) return BAD(x, "level %zu ends above where it starts", x->col, x->page, li);
    int rc = 0;
    for (int i = s; i < e && rc == 0; i++) /* the valid ancestors */
      rc = node_row(r, i, true);
    if (rc < 0) return rc;
    bool has_slot = kind == VALUE || (kind == NUL && rslot_below(r, e));
    if (has_slot && slot >= vals->length) return BAD(x, "levels have more value slots than the page's %lld values", x->col, x->page, (long long)vals->length);
    if (kind == EMPTY) {
      if (mw_field_layout(p->f[e]) != MW_LAYOUT_LIST) return BAD(x, "an empty non-list", x->col, x->page);
      rc = node_row(r, e, true);
    } else if (kind == NUL) {
      if (!p->f[e]->nullable) return BAD(x, "null in the non-nullable field '%s'", x->col, x->page, p->f[e]->name);
      if ((rc = unmasked_below(r, e)) >= 0) return BAD(x, "the non-nullable field '%s' is null below the null '%s' with no nulls in its struct's layer", x->col, x->page, p->f[rc]->name, p->f[e]->name);
      if (e == k) {
        rc = leaf_row(r, vals, slot, true);
      } else {
        rc = node_row(r, e, false);
        /* a null struct still gives each descendant a row down to the first
         * list (null, or empty when not nullable); the leaf's row takes the
         * slot */
        for (int i = e + 1; mw_field_layout(p->f[e]) == MW_LAYOUT_STRUCT && i <= k && rc == 0; i++) {
          if (i == k) {
            assert(has_slot);
            rc = leaf_row(r, vals, slot, p->f[k]->nullable);
            break;
          }
          rc = node_row(r, i, !p->f[i]->nullable);
          if (mw_field_layout(p->f[i]) == MW_LAYOUT_LIST) break;
        }
      }
    } else {
      rc = leaf_row(r, vals, slot, false);
    }
    if (rc < 0) return rc;
    slot += has_slot;
  }
  assert(slot <= vals->length); /* each slot was checked before use */
  if (slot != vals->length) return BAD(x, "%lld value slots for %lld values", x->col, x->page, (long long)slot, (long long)vals->length);
  return 0;
}

/* Decode `cnt` levels with compression ce (NULL: all 0) into dst (u16). */
static int levels_decode(rctx_t *x, const CE *ce, const uint8_t *p, size_t n, int64_t cnt, mw_buf_t *dst) {
  assert(cnt >= 0);
  uint16_t *d = mw_buf_extend(dst, 2 * (size_t)cnt);
  if (d == NULL && cnt > 0) return -ENOMEM;
  if (ce == NULL) return 0;
  int rc = mw_df_def_decode(x, ce, p, n, cnt);
  if (rc < 0) return rc;
  memcpy(d, x->scratch.data, 2 * (size_t)cnt);
  return 0;
}

/* The chunks of a nested MiniBlock page: their levels appended to rep and
 * def (u16 each; zeros where a chunk has none), their values decoded into
 * v's column (v->n values). */
/* A nested MiniBlock chunk over this many bytes in a page of more than one
 * row is refused: LanceDB decodes the whole chunk for each range of rows it
 * takes (a scan with deletions), and over our old writer's 14 MB chunk of
 * strings it asked for 58 GB and aborted (gendiff seed 1036). Lance's
 * writer keeps chunks small (wide values go to FullZip); ours keeps a
 * nested page's values under NESTED_CHUNK_BYTES, levels under 128 KiB. */
#define NESTED_READ_MAX_CHUNK_BYTES (1u << 20)

static int nested_chunks(rctx_t *x, rctx_t *v, const Lance__Encodings21__MiniBlockLayout *mb, mw_buf_t *rep,
                         mw_buf_t *def) {
  size_t nvb = (size_t)mb->num_buffers, ww = mb->has_large_chunk ? 4 : 2;
  bool hr = mb->rep_compression != NULL, hd = mb->def_compression != NULL;
  const uint8_t *words = x->buf[0], *data = x->buf[1];
  uint64_t n_words = x->buf_len[0] / ww, dlen = x->buf_len[1], at = 0;
  int64_t done_vals = 0, items = v->n;
  assert(v->c->length == items); /* sized for the page's items */
  int rc = 0;
  for (uint64_t ci = 0; ci < n_words && rc == 0; ci++) {
    uint32_t wd = ww == 4 ? mw_load_u32le(words + 4 * ci) : mw_load_u16le(words + 2 * ci);
    uint64_t cbytes = ((uint64_t)(wd >> 4) + 1) * 8;
    int64_t cnt = ci + 1 == n_words ? items - done_vals : (int64_t)1 << (wd & 15);
    if (cnt < 0 || cnt > items - done_vals) return BAD(x, "chunk %llu holds %lld values", x->col, x->page, (unsigned long long)ci, (long long)cnt);
    if (cbytes > dlen - at) return BAD(x, "chunk %llu overruns the data buffer", x->col, x->page, (unsigned long long)ci);
    if (cbytes > NESTED_READ_MAX_CHUNK_BYTES && x->n > 1) /* see NESTED_READ_MAX_CHUNK_BYTES */
      return BAD(x, "chunk %llu of %llu bytes over %lld rows: LanceDB cannot take rows from it", x->col, x->page,
                 (unsigned long long)ci, (unsigned long long)cbytes, (long long)x->n);
    const uint8_t *cp = data + at;
    size_t hn = 2 + 2 * (hr + hd) + nvb * ww;
    if (hn > cbytes) return BAD(x, "chunk %llu header truncated", x->col, x->page, (unsigned long long)ci);
    uint16_t nlev = mw_load_u16le(cp);
    size_t repn = hr ? mw_load_u16le(cp + 2) : 0, defn = hd ? mw_load_u16le(cp + 2 + 2 * hr) : 0;
    size_t vn[2] = {0, 0}, pos = pad8(hn);
    const uint8_t *vb[2] = {NULL, NULL};
    for (size_t b = 0; b < nvb; b++) vn[b] = ww == 4 ? mw_load_u32le(cp + 2 + 2 * (hr + hd) + 4 * b) : mw_load_u16le(cp + 2 + 2 * (hr + hd) + 2 * b);
    const uint8_t *repp = cp + pos;
    if (repn > cbytes - pos) return BAD(x, "chunk %llu rep levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(repn);
    const uint8_t *defp = cp + pos;
    if (pos > cbytes || defn > cbytes - pos) return BAD(x, "chunk %llu def levels overrun", x->col, x->page, (unsigned long long)ci);
    pos += pad8(defn);
    for (size_t b = 0; b < nvb; b++) {
      if (pos > cbytes || vn[b] > cbytes - pos) return BAD(x, "chunk %llu value buffer overruns", x->col, x->page, (unsigned long long)ci);
      vb[b] = cp + pos;
      pos += pad8(vn[b]);
    }
    if ((rc = levels_decode(x, mb->rep_compression, repp, repn, nlev, rep)) == 0 &&
        (rc = levels_decode(x, mb->def_compression, defp, defn, nlev, def)) == 0 && cnt > 0)
      rc = mw_df_mb_values(v, mb->value_compression, vb, vn, done_vals, cnt, NULL);
    done_vals += cnt;
    at += cbytes;
  }
  assert(at <= dlen); /* every chunk was checked to fit */
  if (rc == 0 && done_vals != items) return BAD(x, "chunks hold %lld of %lld values", x->col, x->page, (long long)done_vals, (long long)items);
  return rc;
}

/* A MiniBlock page of a nested leaf: levels and values, then assembly.
 * Without rep and def levels (no lists, nothing null: Lance writes chunks
 * of 0 levels then) every value is one valid row. */
static int nested_miniblock(rctx_t *x, rlevels_t *r, const Lance__Encodings21__MiniBlockLayout *mb,
                            int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  if (mb->dictionary) return UNSUP(x, "miniblock with a dictionary", x->col, x->page);
  if (mb->value_compression == NULL) return BAD(x, "miniblock without value compression", x->col, x->page);
  if (x->f->major == 2 && x->f->minor >= 2 && !mb->has_large_chunk)
    return BAD(x, "2.2 miniblock without has_large_chunk", x->col, x->page);
  int rc = page_level_map(x, r, mb->layers, mb->n_layers);
  if (rc < 0) return rc;
  if ((mb->rep_compression != NULL) != (r->max_rep > 0) || (r->max_def == 0 && mb->def_compression))
    return BAD(x, "rep/def compression does not match the layers", x->col, x->page);
  size_t nvb = (size_t)mb->num_buffers;
  if (nvb < 1 || nvb > 2) return UNSUP(x, "%zu value buffers per chunk", x->col, x->page, nvb);
  if (x->n_bufs < 2 + (r->max_rep > 0)) return BAD(x, "miniblock page with %zu buffers", x->col, x->page, x->n_bufs);
  if (mb->num_items > (uint64_t)x->f->max_column_bytes) return BAD(x, "num_items %llu", x->col, x->page, (unsigned long long)mb->num_items);
  int64_t items = (int64_t)mb->num_items;
  mw_column_t vals = {0};
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT;
  rctx_t v = *x; /* the values decode as a flat column of the leaf */
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = items;
  v.scratch = (mw_buf_t)MW_BUF_INIT, v.scratch2 = (mw_buf_t)MW_BUF_INIT;
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = mw_df_column_prepare(&v, leaf, &vals, items)) < 0) goto done;
  if (is_var(leaf)) ((int32_t *)(void *)vals.offsets.data)[0] = 0;
  if ((rc = nested_chunks(x, &v, mb, &rep, &def)) < 0) goto done;
  assert(vals.length == items); /* chunks fill the column, never grow it */
  mw_buf_reset(&vals.validity); /* nulls come from the levels */
  vals.null_count = 0;
  bool levels = mb->rep_compression || mb->def_compression;
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL,
                mb->def_compression ? (const uint16_t *)(const void *)def.data : NULL,
                levels ? (rep.len ? rep.len : def.len) / 2 : (size_t)items, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  mw_buf_free(&v.scratch);
  mw_buf_free(&v.scratch2);
  return rc;
}

/* The value slots among n def levels (levels that reach the leaf, or stop
 * at a null with no list below), and how many of them are valid. */
static int64_t constant_slots(const rlevels_t *r, const uint16_t *dv, uint64_t n, int64_t *valid) {
  int64_t slots = 0;
  *valid = 0;
  for (uint64_t i = 0; i < n; i++) {
    bool slot = dv[i] == 0;
    *valid += slot;
    for (int k = 0; k <= r->p->k && !slot; k++)
      slot = r->null_level[k] == dv[i] && (k == r->p->k || mw_df_slot_below(r->p, k));
    slots += slot;
  }
  assert(*valid <= slots); /* a valid level is a slot */
  return slots;
}

/* A ConstantLayout page of a nested leaf. Buffers: [rep, def] (raw u16
 * unless compressed), none when the layers have no lists and no nulls (one
 * valid row per page row: Lance writes a struct member that holds one
 * value so), and for a utf8/binary value one more in front, the value as
 * constant_scalar reads it ([value], [value, rep, def]). Every valid slot
 * gets the value; with no valid slot (all null: Lance writes a null
 * struct's string member so) there need not be one. */
static int nested_constant(rctx_t *x, rlevels_t *r, const Lance__Encodings21__ConstantLayout *cl,
                           int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  int rc = page_level_map(x, r, cl->layers, cl->n_layers);
  if (rc < 0) return rc;
  size_t d0 = x->n_bufs == 1 || x->n_bufs == 3; /* a value buffer first */
  assert(d0 <= x->n_bufs);
  bool bare = x->n_bufs == d0;
  if (x->n_bufs > 3) return UNSUP(x, "nested constant layout with %zu buffers", x->col, x->page, x->n_bufs);
  if (bare && (r->max_rep > 0 || r->max_def > 0)) return BAD(x, "nested constant layout without levels for nullable layers", x->col, x->page);
  uint64_t nrep = bare ? 0 : cl->rep_compression ? cl->num_rep_values : x->buf_len[d0] / 2;
  uint64_t ndef = bare ? (uint64_t)x->n : cl->def_compression ? cl->num_def_values : x->buf_len[d0 + 1] / 2;
  if ((r->max_rep > 0 && nrep != ndef) || ndef > (uint64_t)INT32_MAX) return BAD(x, "%llu rep and %llu def levels", x->col, x->page, (unsigned long long)nrep, (unsigned long long)ndef);
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT;
  mw_column_t vals = {0};
  Lance__Encodings21__CompressiveEncoding raw = CE_INIT;
  Lance__Encodings21__Flat f16 = LANCE__ENCODINGS21__FLAT__INIT;
  f16.bits_per_value = 16;
  raw.compression_case = CE_FLAT, raw.flat = &f16;
  if ((rc = levels_decode(x, r->max_rep ? (cl->rep_compression ? cl->rep_compression : &raw) : NULL,
                          x->buf[d0], x->buf_len[d0], (int64_t)ndef, &rep)) < 0 ||
      (rc = levels_decode(x, bare ? NULL : cl->def_compression ? cl->def_compression : &raw, x->buf[d0 + 1],
                          x->buf_len[d0 + 1], (int64_t)ndef, &def)) < 0)
    goto done;
  const uint16_t *dv = (const uint16_t *)(const void *)def.data;
  int64_t valid, slots = constant_slots(r, dv, ndef, &valid);
  rctx_t v = *x;
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = slots;
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = mw_df_column_prepare(&v, leaf, &vals, slots)) < 0) goto done;
  if (is_var(leaf)) ((int32_t *)(void *)vals.offsets.data)[0] = 0;
  if (valid > 0 && d0) rc = mw_df_constant_scalar(&v, x->buf[0], x->buf_len[0]);
  else if (valid > 0 && cl->inline_value.len > 0) rc = mw_df_constant_fill(&v, leaf, cl->inline_value.data, cl->inline_value.len);
  else if (valid > 0) rc = UNSUP(x, "%lld valid constant values without a value", x->col, x->page, (long long)valid);
  if (rc < 0) goto done;
  mw_buf_reset(&vals.validity);
  vals.null_count = 0;
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL, dv, (size_t)ndef, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  return rc;
}

/* A FullZip page of a nested fixed-width leaf (Lance writes it for the
 * HNSW graph's list<uint32>/list<float>: fullzip.h): unzip levels and
 * values, then assemble as a MiniBlock page's. Levels with a value slot
 * (def 0, or a null with no list below it) are the visible ones. */
static int nested_fullzip(rctx_t *x, rlevels_t *r, const Lance__Encodings21__FullZipLayout *fz,
                          uint64_t page_rows, int64_t *rows) {
  const mw_field_t *leaf = r->p->f[r->p->k];
  const CE *vc = fz->value_compression;
  int rc = page_level_map(x, r, fz->layers, fz->n_layers);
  if (rc < 0) return rc;
  size_t w = mw_type_width(leaf);
  if (is_var(leaf) || is_bool(leaf) || leaf->type == MW_T_FSL || vc == NULL || vc->compression_case != CE_FLAT ||
      fz->details_case != LANCE__ENCODINGS21__FULL_ZIP_LAYOUT__DETAILS_BITS_PER_VALUE || vc->flat->bits_per_value != 8 * w ||
      fz->bits_per_value != 8 * w)
    return UNSUP(x, "nested fullzip of %s", x->col, x->page, mw_type_name(leaf->type));
  assert(w > 0); /* a fixed-width leaf */
  if (x->n_bufs < 1 + (r->max_rep > 0)) return BAD(x, "fullzip page with %zu buffers", x->col, x->page, x->n_bufs);
  if (fz->num_items > (uint64_t)x->f->max_column_bytes / 2) return BAD(x, "num_items %u", x->col, x->page, fz->num_items);
  mw_fullzip_shape_t s = {.bits_rep = fz->bits_rep, .bits_def = fz->bits_def, .value_bytes = w,
                          .num_items = fz->num_items, .num_visible_items = fz->num_visible_items, .rows = page_rows};
  for (int i = 0; i <= r->p->k; i++)
    if (r->null_level[i] > s.max_visible_def && rslot_below(r, i)) s.max_visible_def = r->null_level[i];
  mw_buf_t rep = MW_BUF_INIT, def = MW_BUF_INIT, raw = MW_BUF_INIT;
  mw_column_t vals = {0};
  rctx_t v = *x;
  v.fld = leaf, v.c = &vals, v.row0 = 0, v.n = (int64_t)fz->num_visible_items;
  if (mw_buf_extend(&rep, 2 * (size_t)fz->num_items + 2) == NULL || mw_buf_extend(&def, 2 * (size_t)fz->num_items + 2) == NULL) { rc = -ENOMEM; goto done; }
  rc = mw_fullzip_unzip(&s, x->buf[0], x->buf_len[0], r->max_rep ? x->buf[1] : NULL, r->max_rep ? x->buf_len[1] : 0,
                        (uint16_t *)(void *)rep.data, (uint16_t *)(void *)def.data, &raw, x->err);
  if (rc < 0) { mw_err_prefix(x->err, rc, "column %zu page %zu", x->col, x->page); goto done; }
  if ((rc = mw_column_init(&vals, leaf)) < 0 || (rc = mw_df_column_prepare(&v, leaf, &vals, v.n)) < 0) goto done;
  if (raw.len) memcpy(vals.values.data, raw.data, raw.len);
  mw_buf_reset(&vals.validity);
  rc = assemble(x, r, r->max_rep ? (const uint16_t *)(const void *)rep.data : NULL,
                (const uint16_t *)(const void *)def.data, (size_t)fz->num_items, &vals, rows);
done:
  mw_column_free(&vals);
  mw_buf_free(&rep);
  mw_buf_free(&def);
  mw_buf_free(&raw);
  return rc;
}

/* One leaf column of a nested field, assembled into r->node[]. */
static int nested_leaf(mw_datafile_t *f, size_t col, rlevels_t *r, mw_err_t *err) {
  assert(col < f->n_columns); /* open matched the leaves to the columns */
  const uint8_t *cmp;
  size_t cmn;
  int rc = mw_datafile_column_metadata(f, (uint32_t)col, &cmp, &cmn, err);
  if (rc < 0) return rc;
  Lance__File__V2__ColumnMetadata *cm = lance__file__v2__column_metadata__unpack(NULL, cmn, cmp);
  if (cm == NULL) return mw_err_set(err, -EBADMSG, "column %zu: ColumnMetadata malformed", col);
  rctx_t x = {.f = f, .fld = r->p->f[r->p->k], .col = col, .err = err};
  int64_t row = 0;
  rc = cm->n_pages > MW_DATAFILE_MAX_PAGES ? BAD(&x, "%zu pages", x.col, x.page, cm->n_pages) : 0;
  if (rc == 0 && !(f->major == 2 && f->minor >= 1)) rc = UNSUP(&x, "nested columns in a %u.%u file", x.col, x.page, f->major, f->minor);
  for (size_t i = 0; rc == 0 && i < cm->n_pages; i++) {
    x.page = i;
    const Lance__File__V2__ColumnMetadata__Page *pg = cm->pages[i];
    if ((rc = mw_df_page_buffers(&x, pg)) < 0) break;
    if (pg->encoding == NULL || pg->encoding->location_case != LANCE__FILE__V2__ENCODING__LOCATION_DIRECT) {
      rc = UNSUP(&x, "page encoding not direct", x.col, x.page);
      break;
    }
    ProtobufCBinaryData *e = &pg->encoding->direct->encoding;
    Google__Protobuf__Any *any = google__protobuf__any__unpack(NULL, e->len, e->data);
    Lance__Encodings21__PageLayout *pl = NULL;
    if (any && any->type_url && strcmp(any->type_url, URL_PAGE21) == 0)
      pl = lance__encodings21__page_layout__unpack(NULL, any->value.len, any->value.data);
    if (any) google__protobuf__any__free_unpacked(any, NULL);
    if (pl == NULL) {
      rc = BAD(&x, "page layout malformed", x.col, x.page);
      break;
    }
    int64_t rows = 0;
    x.n = pg->length > f->n_rows ? 0 : (int64_t)pg->length; /* a bare constant page's levels */
    if (pl->layout_case == PL_MINIBLOCK) rc = nested_miniblock(&x, r, pl->mini_block_layout, &rows);
    else if (pl->layout_case == PL_CONSTANT) rc = nested_constant(&x, r, pl->constant_layout, &rows);
    else if (pl->layout_case == PL_FULLZIP) rc = nested_fullzip(&x, r, pl->full_zip_layout, pg->length, &rows);
    else rc = UNSUP(&x, "this layout for a nested column", x.col, x.page);
    lance__encodings21__page_layout__free_unpacked(pl, NULL);
    if (rc == 0 && (uint64_t)rows != pg->length)
      rc = BAD(&x, "levels hold %lld rows, the page %llu", x.col, x.page, (long long)rows, (unsigned long long)pg->length);
    row += rows;
  }
  if (rc == 0 && (uint64_t)row != f->n_rows)
    rc = mw_err_set(err, -EBADMSG, "column %zu: pages hold %lld of %llu rows", col, (long long)row, (unsigned long long)f->n_rows);
  lance__file__v2__column_metadata__free_unpacked(cm, NULL);
  mw_buf_free(&x.scratch);
  mw_buf_free(&x.scratch2);
  return rc;
}

/* Every leaf below path depth `depth`, assembled into the tree at
 * node[depth]; the first leaf of a subtree builds it in place, later ones
 * in a scratch tree whose branch is then moved in. */
static int nested_read(mw_datafile_t *f, size_t *col, lpath_t *p, rlevels_t *r, int depth,
                       bool first, mw_err_t *err) {
  const mw_field_t *fd = p->f[depth];
  mw_layout_t l = mw_field_layout(fd);
  if (l != MW_LAYOUT_LIST && l != MW_LAYOUT_STRUCT) {
    p->k = depth;
    assert(r->node[depth] != NULL);
    return nested_leaf(f, (*col)++, r, err);
  }
  for (uint32_t i = 0; i < fd->n_children; i++) {
    p->f[depth + 1] = &fd->children[i];
    if (first || i == 0) {
      r->node[depth + 1] = &r->node[depth]->children[i];
      int rc = nested_read(f, col, p, r, depth + 1, first && i == 0, err);
      if (rc < 0) return rc;
      first = false;
      continue;
    }
    /* a later branch: rebuild the ancestors in a scratch tree, keep only
     * this child's subtree */
    mw_column_t scratch;
    int rc = mw_column_init(&scratch, p->f[0]);
    mw_column_t *saved[MAX_PATH];
    memcpy(saved, r->node, sizeof saved);
    r->node[0] = &scratch;
    for (int d = 1; d <= depth; d++) {
      const mw_field_t *parent = p->f[d - 1];
      uint32_t ci = (uint32_t)(p->f[d] - parent->children);
      r->node[d] = &r->node[d - 1]->children[ci];
    }
    r->node[depth + 1] = &r->node[depth]->children[i];
    if (rc == 0) rc = nested_read(f, col, p, r, depth + 1, true, err);
    if (rc == 0) { /* move the branch into the real tree */
      mw_column_t t = saved[depth]->children[i];
      saved[depth]->children[i] = r->node[depth]->children[i];
      r->node[depth]->children[i] = t;
      if (saved[depth]->children[i].length != saved[depth]->length)
        rc = mw_err_set(err, -EBADMSG, "field '%s': member '%s' has %lld rows, the struct %lld",
                        fd->name, fd->children[i].name, (long long)saved[depth]->children[i].length,
                        (long long)saved[depth]->length);
    }
    memcpy(r->node, saved, sizeof saved);
    mw_column_free(&scratch);
    if (rc < 0) return rc;
  }
  return 0;
}

/* Field `fld` (a list or struct) into out from its leaf columns, the first
 * of which is Lance column `col`: the tree must hold the file's rows and
 * be a valid column. */
int mw_df_read_nested(mw_datafile_t *f, size_t col, const mw_field_t *fld, mw_column_t *out,
                      mw_err_t *err) {
  assert(fld != NULL);
  assert(out->length == 0);
  lpath_t p = {.f = {fld}};
  rlevels_t r = {.p = &p, .node = {out}};
  int rc = nested_read(f, &col, &p, &r, 0, true, err);
  if (rc == 0 && out->length != (int64_t)f->n_rows)
    rc = mw_err_set(err, -EBADMSG, "field '%s': %lld rows of %llu", fld->name, (long long)out->length, (unsigned long long)f->n_rows);
  if (rc == 0 && mw_column_validate(out, fld) < 0)
    rc = mw_err_set(err, -EBADMSG, "field '%s': the levels do not make a valid column", fld->name);
  return rc;
}
