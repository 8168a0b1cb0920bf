// exact.mjs — exact, canonical JSON of Arrow values as LanceDB returns them,
// for the column types whose apache-arrow `get()` loses information or
// prints differently per version (timestamps in ns, decimals, times, dates,
// 64-bit values nested in lists and structs).
//
//   exactCell(vector, i) -> a JSON-able value:
//     null; int8..int32, uint8..uint32, float16/32/64 -> number; int64/uint64
//     -> decimal string; bool; utf8 -> string; binary, fixed_size_binary ->
//     array of byte values; timestamp, date32, date64, time32, time64 -> the
//     raw integer in the column's unit as a decimal string; decimal128 -> the
//     unscaled integer as a decimal string; fixed_size_list, list -> array of
//     exact items (large_list too, where the apache-arrow version has it:
//     21, not 18); struct -> object of exact members in field order.
//
// The same format is what the type fixtures' expected rows and the
// memwald-side models print, so rows compare as strings.

const T = {
  Int: 2, Float: 3, Binary: 4, Utf8: 5, Bool: 6, Decimal: 7, Date: 8, Time: 9, Timestamp: 10,
  List: 12, Struct: 13, FixedSizeBinary: 15, FixedSizeList: 16, LargeBinary: 19, LargeUtf8: 20,
  LargeList: 21, // apache-arrow >= 21 only
};

// The Data chunk holding row i of a (possibly chunked) vector, and the index
// inside that chunk's value buffer (apache-arrow slices value buffers with
// the data; `offset` only positions the validity bitmap).
function locate(vector, i) {
  let at = i;
  for (const d of vector.data) {
    if (at < d.length) return { d, j: at };
    at -= d.length;
  }
  throw new Error(`row ${i} past the end of a ${vector.length}-row vector`);
}

const UTF8 = new TextDecoder("utf-8", { ignoreBOM: true, fatal: true });

function int128(words, j) {
  let v = 0n;
  for (let w = 3; w >= 0; w--) v = (v << 32n) | BigInt(words[4 * j + w] >>> 0);
  return BigInt.asIntN(128, v).toString();
}

export function exactCell(vector, i) {
  if (!vector.isValid(i)) return null;
  const t = vector.type;
  switch (t.typeId) {
    case T.Int: {
      const v = vector.get(i);
      return typeof v === "bigint" ? v.toString() : v;
    }
    case T.Float: return vector.get(i);
    case T.Bool: return vector.get(i);
    case T.Utf8: case T.LargeUtf8: {
      // decoded here: apache-arrow's get() drops a leading U+FEFF (its
      // TextDecoder strips a byte order mark), which is part of the value
      const { d, j } = locate(vector, i);
      const off = d.valueOffsets;
      return UTF8.decode(d.values.subarray(Number(off[j]), Number(off[j + 1])));
    }
    case T.Binary: case T.LargeBinary: case T.FixedSizeBinary: return Array.from(vector.get(i));
    case T.Timestamp: case T.Date: case T.Time: {
      const { d, j } = locate(vector, i);
      const vals = d.values;
      // Date32 / Time32 hold int32; the others int64 (as BigInt64Array or
      // as pairs of int32 words, depending on the apache-arrow version)
      if (vals instanceof BigInt64Array) return vals[j].toString();
      const wide = (t.typeId === T.Date && t.unit === 1) || (t.typeId === T.Time && t.bitWidth === 64) ||
        t.typeId === T.Timestamp;
      if (!wide) return String(vals[j]);
      const lo = BigInt(vals[2 * j] >>> 0), hi = BigInt(vals[2 * j + 1] | 0);
      return ((hi << 32n) | lo).toString();
    }
    case T.Decimal: {
      const { d, j } = locate(vector, i);
      return int128(new Uint32Array(d.values.buffer, d.values.byteOffset, d.values.byteLength / 4), j);
    }
    case T.FixedSizeList: case T.List: case T.LargeList: {
      const items = vector.get(i);
      const out = [];
      for (let k = 0; k < items.length; k++) out.push(exactCell(items, k));
      return out;
    }
    case T.Struct: {
      const o = {};
      for (const f of t.children) o[f.name] = exactCell(vector.getChild(f.name), i);
      return o;
    }
    default:
      throw new Error(`exactCell: Arrow type id ${t.typeId} (${t}) not handled`);
  }
}

// A row as one JSON line, keys in field order.
export function exactLine(table, fields, i) {
  const o = {};
  for (const f of fields) o[f] = exactCell(table.getChild(f), i);
  return JSON.stringify(o);
}
