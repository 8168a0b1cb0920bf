#!/usr/bin/env python3
"""gen-misc-fixtures.py — derive the key lists that the bloom/deletion/route
golden tests need from the reference vectors (Lance-written MemWAL shards).

Usage: tools/gen-misc-fixtures.py [VECTORS_DIR] [OUT_DIR]
  defaults: ../shared/vectors  tests/lance/data

Python 3 standard library only; run once, commit the output. The C tests read
the output and never need python.

For every shard under VECTORS/<name>/t.lance/_mem_wal/<uuid>/ it reads the
shard manifests (protobuf: 1 version, 3 replay_after_wal_entry_position,
8 sstables {1 generation, 2 dir name, 4 physical_rows}) in version order. An
SSTable first listed in version V holds the rows of the WAL entries at
positions (replay_after(V-1), replay_after(V)], in position order and row
order (the memtable keeps insert order). For each such SSTable it writes

  sst_keys/<name>__<dir>.txt
    sst <path of the SSTable dir relative to VECTORS>
    rows <physical_rows from the shard manifest>
    <one int64 id per line, in row order>

and for every shard, all ids of all its WAL entries:

  wal_ids/<name>__<uuid>.txt
    shard <uuid>
    rows <count>
    <one int64 id per line>

The WAL entries are Arrow IPC streams; the primary-key column is the field
carrying metadata lance-schema:unenforced-primary-key:position = 1 and must
be a non-null int64 (true of every vector).
"""
import os
import struct
import sys

PK_META = 'lance-schema:unenforced-primary-key:position'


# --- protobuf (wire format only) -------------------------------------------
def varint(b, i):
    r = s = 0
    while True:
        c = b[i]
        i += 1
        r |= (c & 0x7f) << s
        s += 7
        if not c & 0x80:
            return r, i


def pb_fields(b):
    i, out = 0, []
    while i < len(b):
        k, i = varint(b, i)
        f, wt = k >> 3, k & 7
        if wt == 0:
            v, i = varint(b, i)
        elif wt == 2:
            n, i = varint(b, i)
            v = b[i:i + n]
            i += n
        elif wt == 1:
            v = b[i:i + 8]
            i += 8
        elif wt == 5:
            v = b[i:i + 4]
            i += 4
        else:
            raise ValueError('wire type %d' % wt)
        out.append((f, v))
    return out


def bitrev_name(name):
    stem = name.split('.', 1)[0]
    if len(stem) != 64 or set(stem) - {'0', '1'}:
        return None
    return sum(1 << i for i, c in enumerate(stem) if c == '1')


def read_manifests(shard_dir):
    mdir = os.path.join(shard_dir, 'manifest')
    out = []
    for n in os.listdir(mdir):
        v = bitrev_name(n)
        if v is None or not n.endswith('.binpb'):
            continue
        fields = pb_fields(open(os.path.join(mdir, n), 'rb').read())
        m = {'version': 0, 'replay_after': 0, 'sstables': []}
        for f, val in fields:
            if f == 1:
                m['version'] = val
            elif f == 3:
                m['replay_after'] = val
            elif f == 8:
                sst = {}
                for sf, sv in pb_fields(val):
                    if sf == 1:
                        sst['gen'] = sv
                    elif sf == 2:
                        sst['path'] = sv.decode()
                    elif sf == 4:
                        sst['rows'] = sv
                m['sstables'].append(sst)
        assert m['version'] == v, (n, m['version'])
        out.append(m)
    out.sort(key=lambda m: m['version'])
    return out


# --- Arrow IPC stream: extract the int64 PK column --------------------------
class Fb:
    """Minimal flatbuffer table reader."""

    def __init__(self, d, pos):
        self.d, self.pos = d, pos
        self.vt = pos - struct.unpack_from('<i', d, pos)[0]
        self.vlen = struct.unpack_from('<H', d, self.vt)[0]

    def off(self, i):
        p = 4 + 2 * i
        return struct.unpack_from('<H', self.d, self.vt + p)[0] if p < self.vlen else 0

    def scalar(self, i, fmt, default=0):
        o = self.off(i)
        return struct.unpack_from(fmt, self.d, self.pos + o)[0] if o else default

    def ref(self, i):
        o = self.off(i)
        if not o:
            return None
        p = self.pos + o
        return p + struct.unpack_from('<I', self.d, p)[0]

    def table(self, i):
        r = self.ref(i)
        return Fb(self.d, r) if r is not None else None

    def string(self, i):
        r = self.ref(i)
        if r is None:
            return None
        n = struct.unpack_from('<I', self.d, r)[0]
        return self.d[r + 4:r + 4 + n].decode()

    def vec_tables(self, i):
        r = self.ref(i)
        if r is None:
            return []
        n = struct.unpack_from('<I', self.d, r)[0]
        return [Fb(self.d, r + 4 + 4 * k + struct.unpack_from('<I', self.d, r + 4 + 4 * k)[0])
                for k in range(n)]

    def vec_structs(self, i, size):
        r = self.ref(i)
        if r is None:
            return []
        n = struct.unpack_from('<I', self.d, r)[0]
        return [self.d[r + 4 + size * k:r + 4 + size * (k + 1)] for k in range(n)]


# Arrow Type union tags -> number of buffers (own + children, pre-order).
def n_buffers(field):
    tt = field.scalar(2, '<B')
    kids = field.vec_tables(5)
    own = {1: 0, 2: 2, 3: 2, 4: 3, 5: 3, 6: 2, 16: 1, 13: 1}.get(tt)
    if own is None:
        raise ValueError('arrow type %d not handled' % tt)
    return own + sum(n_buffers(k) for k in kids)


def wal_ids(path):
    d = open(path, 'rb').read()
    o, ids, pk, pk_buf = 0, [], None, None
    while o < len(d):
        cont, mlen = struct.unpack_from('<Ii', d, o)
        assert cont == 0xFFFFFFFF, path
        if mlen == 0:
            break
        meta = o + 8
        root = Fb(d, meta + struct.unpack_from('<I', d, meta)[0])
        htype, body = root.scalar(1, '<B'), root.scalar(3, '<q')
        hdr = root.table(2)
        if htype == 1:  # Schema
            nbuf = 0
            for idx, f in enumerate(hdr.vec_tables(1)):
                md = {kv.string(0): kv.string(1) for kv in f.vec_tables(6)}
                if md.get(PK_META) == '1':
                    ty = f.table(3)
                    assert f.scalar(2, '<B') == 2 and ty.scalar(0, '<i') == 64 \
                        and ty.scalar(1, '<B') == 1, 'PK is not int64'
                    pk, pk_buf = idx, nbuf + 1  # buffers: validity, values
                nbuf += n_buffers(f)
        elif htype == 3:  # RecordBatch
            assert pk is not None, path
            assert hdr.table(3) is None, 'compressed WAL entry'
            length = hdr.scalar(0, '<q')
            nodes = hdr.vec_structs(1, 16)
            bufs = hdr.vec_structs(2, 16)
            nl, nn = struct.unpack('<qq', nodes[pk])
            assert nl == length and nn == 0, 'PK column has nulls'
            boff, blen = struct.unpack('<qq', bufs[pk_buf])
            assert blen >= 8 * length
            start = meta + mlen + boff
            ids.extend(struct.unpack_from('<%dq' % length, d, start))
        o = meta + mlen + body
    return ids


def wal_by_position(shard_dir):
    wdir = os.path.join(shard_dir, 'wal')
    out = {}
    for n in os.listdir(wdir):
        p = bitrev_name(n)
        if p is not None and n.endswith('.arrow'):
            out[p] = wal_ids(os.path.join(wdir, n))
    return out


def write(path, header, ids):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, 'w') as f:
        for k, v in header:
            f.write('%s %s\n' % (k, v))
        for i in ids:
            f.write('%d\n' % i)


def main():
    vec = sys.argv[1] if len(sys.argv) > 1 else '../shared/vectors'
    out = sys.argv[2] if len(sys.argv) > 2 else 'tests/lance/data'
    n_sst = n_shard = 0
    for name in sorted(os.listdir(vec)):
        mw = os.path.join(vec, name, 't.lance', '_mem_wal')
        if not os.path.isdir(mw):
            continue
        for uuid in sorted(os.listdir(mw)):
            sd = os.path.join(mw, uuid)
            wal = wal_by_position(sd)
            all_ids = [i for p in sorted(wal) for i in wal[p]]
            write(os.path.join(out, 'wal_ids', '%s__%s.txt' % (name, uuid)),
                  [('shard', uuid), ('rows', len(all_ids))], all_ids)
            n_shard += 1
            prev_replay, known = 0, set()
            for m in read_manifests(sd):
                for sst in m['sstables']:
                    if sst['gen'] in known:
                        continue
                    known.add(sst['gen'])
                    lo, hi = prev_replay, m['replay_after']
                    keys = [i for p in range(lo + 1, hi + 1) for i in wal.get(p, [])]
                    assert all(p in wal for p in range(lo + 1, hi + 1)), (sd, lo, hi)
                    assert len(keys) == sst['rows'], (sd, sst, len(keys))
                    rel = os.path.join(name, 't.lance', '_mem_wal', uuid, sst['path'])
                    write(os.path.join(out, 'sst_keys', '%s__%s.txt' % (name, sst['path'])),
                          [('sst', rel), ('rows', len(keys))], keys)
                    n_sst += 1
                prev_replay = m['replay_after']
    print('wrote %d sst_keys and %d wal_ids files under %s' % (n_sst, n_shard, out))


if __name__ == '__main__':
    main()
