#!/usr/bin/env python3
"""Writes the seed corpora under fuzz/corpus/<target>/ from bytes already in the repository: the
captured pgoutput payloads and binlog events of the decoders' unit tests, the OpenCDC lines and
Debezium events of the JSON and Kafka tests, and the pipeline files of examples/ and docs/.
Re-run after those tests change: fuzz/make_seeds.py (the corpora are committed)."""
import hashlib
import os
import re
import struct
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def read(path):
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        return f.read()


def cxx_strings(text):
    """The C++ string literals of `text` in order, adjacent literals joined (raw and plain)."""
    out, cur, i, last_end = [], None, 0, -1
    pat = re.compile(r'R"\((.*?)\)"|"((?:[^"\\\n]|\\.)*)"', re.S)
    for m in pat.finditer(text):
        s = m.group(1) if m.group(1) is not None else bytes(m.group(2), "utf-8").decode("unicode_escape")
        between = text[last_end:m.start()] if last_end >= 0 else "x"
        if cur is not None and between.strip() == "":
            cur += s
        else:
            if cur is not None:
                out.append(cur)
            cur = s
        last_end = m.end()
    if cur is not None:
        out.append(cur)
    return out


def write(target, name, data):
    d = os.path.join(ROOT, "fuzz", "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("utf-8")
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", name).strip("_")[:60] or hashlib.sha1(data).hexdigest()[:12]
    with open(os.path.join(d, safe), "wb") as f:
        f.write(data)


def pgoutput():
    t = read("src/connectors/postgres/pgoutput_test.cc")
    for name, hexs in re.findall(r'\{"([^"]+)",\s*((?:"[0-9a-f]+"\s*)+)\}', t):
        write("pgoutput", name, bytes.fromhex("".join(re.findall(r'"([0-9a-f]+)"', hexs))))


def binlog():
    t = read("src/connectors/mysql/binlog_test.cc")
    events = {}
    for name, body in re.findall(r"constexpr std::string_view (kRaw\w+) =\s*((?:\"[0-9a-fA-F ]*\"\s*)+);", t):
        events[name] = bytes.fromhex("".join(re.findall(r'"([0-9a-fA-F ]*)"', body)).replace(" ", ""))
    for name, data in events.items():
        write("binlog", name, data)
    fde = events.get("kRawFde", b"")
    # Streams as a replica reads them: format description, table map, then rows / transaction events.
    for tm, rows in [("kRawTableMap", "kRawWriteAll"), ("kRawTableMap", "kRawWriteNulls"),
                     ("kRawTableMap", "kRawUpdateFull"), ("kRawTableMap", "kRawDeleteNulls"),
                     ("kRawTableMap", "kRawUpdateMinimal"), ("kRawTableMapFull", "kRawWriteFull")]:
        if tm in events and rows in events:
            stream = fde + events.get("kRawGtid", b"") + events[tm] + events[rows] + events.get("kRawXid", b"")
            write("binlog", "stream_" + rows, stream)


def json_record():
    t = read("src/core/json_test.cc")
    n = 0
    for s in cxx_strings(t):
        if s.startswith('{"position"'):
            write("json_record", "line%02d" % n, s)
            n += 1


def kafka_formats():
    t = read("src/connectors/common/message_formats_test.cc")
    docs = [s for s in cxx_strings(t) if s.lstrip().startswith("{") and len(s) > 20]
    key = b'{"id": 1004}'
    for i, s in enumerate(docs):
        v = s.encode("utf-8")
        # byte 0: format (0 opencdc, 1 debezium, 2 raw) | 0x10 key present | 0x08 header; byte 1: key length
        write("kafka_formats", "debezium%02d" % i, bytes([0x11 | 0x08, len(key)]) + key + v)
        write("kafka_formats", "raw%02d" % i, bytes([0x12, len(key)]) + key + v)
    for s in cxx_strings(read("src/core/json_test.cc")):
        if s.startswith('{"position"'):
            write("kafka_formats", "opencdc_" + hashlib.sha1(s.encode()).hexdigest()[:8], bytes([0x00, 0]) + s.encode())


def config():
    write("config", "quickstart.yaml", read("examples/quickstart.yaml"))
    for doc in ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(ROOT, "docs")) if f.endswith(".md")):
        for i, block in enumerate(re.findall(r"```yaml\n(.*?)```", read(doc), re.S)):
            if "pipelines" in block:
                write("config", "%s_%d.yaml" % (os.path.basename(doc)[:-3], i), block)
    t = read("src/config/config_test.cc")
    for i, s in enumerate(cxx_strings(t)):
        if "pipelines:" in s:
            write("config", "config_test_%02d.yaml" % i, s)


def spool_batch():
    """Batches in the spool's codec (src/support/spool/batch_codec.h), one per value kind and more."""
    def varint(v):
        out = bytearray()
        while v >= 0x80:
            out.append((v & 0x7F) | 0x80)
            v >>= 7
        out.append(v)
        return bytes(out)

    def zigzag(v):
        return varint((v << 1) ^ (v >> 63) if v < 0 else v << 1)

    def text(b):
        return varint(len(b)) + b

    kinds = dict(absent=0, null=1, boolean=2, int64=3, uint64=4, float64=5, decimal=6, string=7, bytes=8,
                 date=9, time=10, timetz=11, timestamp=12, timestamptz=13, interval=14, uuid=15, json=16,
                 array=17, object=18)
    values = [
        bytes([kinds["absent"]]), bytes([kinds["null"]]), bytes([kinds["boolean"], 1]),
        bytes([kinds["int64"]]) + zigzag(-(2 ** 63)), bytes([kinds["uint64"]]) + varint(2 ** 64 - 1),
        bytes([kinds["float64"]]) + struct.pack("<d", -0.125), bytes([kinds["decimal"]]) + text(b"-12.340"),
        bytes([kinds["string"]]) + text("h\u00e9llo".encode()), bytes([kinds["bytes"]]) + text(b"\x00\xff"),
        bytes([kinds["date"]]) + zigzag(-719162), bytes([kinds["time"]]) + zigzag(86399999999),
        bytes([kinds["timetz"]]) + zigzag(3600000000) + zigzag(-19800),
        bytes([kinds["timestamp"]]) + zigzag(-1), bytes([kinds["timestamptz"]]) + zigzag(1700000000000000),
        bytes([kinds["interval"]]) + zigzag(14) + zigzag(-3) + zigzag(123456789),
        bytes([kinds["uuid"]]) + bytes(range(16)), bytes([kinds["json"]]) + text(b'{"a":[1,2]}'),
    ]
    array = bytes([kinds["array"]]) + varint(3) + values[3] + values[1] + values[7]

    def obj(fields):
        return bytes([kinds["object"]]) + varint(len(fields)) + b"".join(text(n) + v for n, v in fields)

    after = obj([(b"f%d" % i, v) for i, v in enumerate(values + [array, obj([(b"deep", array)])])])
    meta = obj([(b"table", values[7]), (b"schema", bytes([kinds["string"]]) + text(b"public"))])
    key = obj([(b"id", values[3])])
    absent = values[0]
    ops = dict(snapshot=0, create=1, update=2, delete=3, schema=4, marker=5)

    def record(op, position, m, k, before, a):
        return bytes([ops[op]]) + text(position) + m + k + before + a

    def batch(position, records):
        return text(position) + varint(len(records)) + b"".join(records)

    write("spool_batch", "every_kind", batch(b"0/16B3748", [record("update", b"lsn/1", meta, key, key, after)]))
    write("spool_batch", "ops", batch(b"p9", [
        record("create", b"p1", meta, key, absent, after),
        record("delete", b"p2", meta, key, key, absent),
        record("schema", b"", meta, absent, absent, obj([(b"columns", array)])),
        record("marker", b"", obj([(b"marker", bytes([kinds["string"]]) + text(b"snapshot_end"))]), absent, absent,
               absent)]))
    write("spool_batch", "empty", batch(b"position-only", []))


def pg_binary():
    # The first byte indexes kTypes of fuzz/pg_binary_fuzz.cc; the rest is the send function's form.
    types = [16, 17, 19, 20, 21, 23, 25, 26, 114, 700, 701, 829, 1042, 1043, 1082, 1083, 1114, 1184,
             1186, 1266, 1560, 1562, 1700, 2950, 3802, 1000, 1007, 1009, 1016, 1021, 1022, 1115, 1182,
             1185, 1187, 1231, 1270, 2951, 3807]

    def seed(name, type_oid, value):
        write("pg_binary", name, bytes([types.index(type_oid)]) + value)

    def numeric(weight, sign, dscale, digits):
        return struct.pack(">hhHH", len(digits), weight, sign, dscale) + struct.pack(">%dh" % len(digits), *digits)

    def array(elem, dims, elems):
        head = struct.pack(">iiI", len(dims), 1 if None in elems else 0, elem)
        head += b"".join(struct.pack(">ii", d, 1) for d in dims)
        return head + b"".join(struct.pack(">i", -1) if e is None else struct.pack(">i", len(e)) + e for e in elems)

    seed("bool", 16, b"\x01")
    seed("int8", 20, struct.pack(">q", -2**63))
    seed("float4", 700, struct.pack(">f", 1.1))
    seed("numeric", 1700, numeric(4, 0x4000, 18, [1234, 5678, 9012, 3456, 7890, 0, 0, 0, 0, 1]))
    seed("numeric_small", 1700, numeric(-5, 0, 21, [1]))
    seed("numeric_nan", 1700, numeric(0, 0xC000, 0, []))
    seed("date", 1082, struct.pack(">i", -10957))
    seed("timestamptz", 1184, struct.pack(">q", 9223371331200000000))
    seed("interval", 1186, struct.pack(">qii", -14706789000, 3, -14))
    seed("timetz", 1266, struct.pack(">qi", 43200000000, -19800))
    seed("varbit", 1562, struct.pack(">i", 10) + b"\xaa\xc0")
    seed("uuid", 2950, bytes(range(16)))
    seed("jsonb", 3802, b'\x01{"a": [1, 2]}')
    seed("int4_array", 1007, array(23, [2, 2], [struct.pack(">i", i) for i in (1, 2, 3, 4)]))
    seed("text_array", 1009, array(25, [3], [b"a,b", None, b""]))
    seed("empty_array", 1007, struct.pack(">iiI", 0, 0, 23))


if __name__ == "__main__":
    for f in (pgoutput, binlog, json_record, kafka_formats, config, spool_batch, pg_binary):
        f()
    for target in sorted(os.listdir(os.path.join(ROOT, "fuzz", "corpus"))):
        print(target, len(os.listdir(os.path.join(ROOT, "fuzz", "corpus", target))), file=sys.stderr)
