#!/usr/bin/env python3
"""Seeds the fuzz corpora (fuzz/corpus/<target>/) from the test suite: statements of the .slt
files and queries/*.sql for the SQL front end, COPY payloads in the three formats, and protocol
sessions (simple query, extended query, COPY) built from those statements for the wire target.
Run from the repository root: python3 fuzz/seed.py"""

import hashlib
import pathlib
import struct

ROOT = pathlib.Path(__file__).resolve().parent.parent
CORPUS = ROOT / "fuzz" / "corpus"


def put(target, data):
    d = CORPUS / target
    d.mkdir(parents=True, exist_ok=True)
    (d / hashlib.sha1(data).hexdigest()).write_bytes(data)


def slt_statements():
    """The SQL of every `statement` and `query` record of the .slt files."""
    for path in sorted((ROOT / "tests" / "slt").glob("*.slt")):
        sql, inside = [], False
        for line in path.read_text().splitlines() + [""]:
            if line.startswith(("statement", "query")):
                inside, sql = True, []
            elif inside and (line.strip() == "" or line.startswith("----")):
                if sql:
                    yield "\n".join(sql)
                inside = False
            elif inside:
                sql.append(line)


def frame(kind, body):
    return kind + struct.pack(">I", len(body) + 4) + body


def cstr(s):
    return s.encode() + b"\0"


def main():
    statements = list(slt_statements())
    statements += [p.read_text() for p in sorted((ROOT / "queries").glob("*.sql"))]
    for sql in statements:
        put("sql_frontend", sql.encode())

    text = b"2024-01-01 00:00:01\tweb-1\t5\t0.5\tt\n2024-01-01 00:00:02\t\\N\t-3\t1e3\tf\n\\.\n"
    csv = b'2024-01-01 00:00:01,"web,1",5,0.5,true\n2024-01-01 00:00:02,,7,,\n'
    header = b"ts,host,amount,cpu,ok\n"
    binary = b"PGCOPY\n\xff\r\n\0" + struct.pack(">II", 0, 0)
    row = struct.pack(">h", 5)
    row += struct.pack(">iq", 8, 757_382_400_000_000)  # timestamp: microseconds since 2000
    row += struct.pack(">i", 5) + b"web-1"
    row += struct.pack(">iq", 8, 5)
    row += struct.pack(">id", 8, 0.5)
    row += struct.pack(">ib", 1, 1)
    binary += row + struct.pack(">h", -1)
    put("copy_decoder", bytes([0]) + text)
    put("copy_decoder", bytes([1 + 3 * 8]) + csv)
    put("copy_decoder", bytes([0x81]) + header + csv)
    put("copy_decoder", bytes([2]) + binary)
    put("copy_decoder", bytes([2 + 3 * 20]) + binary)

    query = lambda sql: frame(b"Q", cstr(sql))
    sync = frame(b"S", b"")
    for sql in statements[:200] + ["SELECT 1", "SHOW QUERIES"]:
        put("wire", query(sql))
        extended = frame(b"P", cstr("") + cstr(sql) + struct.pack(">h", 0))
        extended += frame(b"B", cstr("") + cstr("") + struct.pack(">hhh", 0, 0, 0))
        extended += frame(b"D", b"P" + cstr(""))
        extended += frame(b"E", cstr("") + struct.pack(">i", 0))
        put("wire", extended + sync)
    insert = "INSERT INTO s VALUES ($1, $2, $3)"
    params = [b"2024-01-01 00:00:01", b"web-1", b"5"]
    bind = cstr("") + cstr("p") + struct.pack(">h", 0) + struct.pack(">h", 3)
    bind += b"".join(struct.pack(">i", len(p)) + p for p in params) + struct.pack(">h", 0)
    session = frame(b"P", cstr("p") + cstr(insert) + struct.pack(">h", 0))
    session += frame(b"B", bind) + frame(b"E", cstr("") + struct.pack(">i", 0)) + sync
    put("wire", session)
    copy = query("COPY s FROM STDIN WITH (FORMAT csv)")
    copy += frame(b"d", b"2024-01-01 00:00:01,web-1,5\n") + frame(b"c", b"")
    put("wire", copy)
    put("wire", query("COPY s FROM STDIN") + frame(b"d", b"bad\n") + frame(b"f", cstr("no")))
    put("wire", query("SUBSCRIBE nope") + frame(b"X", b""))


if __name__ == "__main__":
    main()
