"""Python drivers against a running saql server: psycopg 3, psycopg2, asyncpg, SQLAlchemy 2
with pandas. Each check prints PASS or FAIL with the reason; the exit status is the number of
failures (0: all passed).

Run by run.sh, which starts the server and passes its port in SAQL_PORT.
"""

import asyncio
import datetime as dt
import os
import sys
import threading
import time
import traceback

PORT = int(os.environ["SAQL_PORT"])
DSN = f"host=127.0.0.1 port={PORT} user=saql dbname=saql"
FAILED = []
PASSED = []


def check(name):
    """Runs the decorated function at once as one named check."""

    def run(fn):
        start = time.monotonic()
        try:
            if asyncio.iscoroutinefunction(fn):
                asyncio.run(asyncio.wait_for(fn(), 60))
            else:
                fn()
            PASSED.append(name)
            print(f"PASS {name} ({time.monotonic() - start:.1f}s)", flush=True)
        except Exception as e:  # noqa: BLE001 - a check fails on anything
            FAILED.append(name)
            print(f"FAIL {name}: {type(e).__name__}: {e}", flush=True)
            traceback.print_exc(limit=3)
        return fn

    return run


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


def stream_ddl(prefix):
    """A stream and a continuous query over it, named after the driver."""
    return [
        f"CREATE STREAM {prefix}_events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, "
        "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
        f"CREATE CONTINUOUS QUERY {prefix}_big AS "
        f"SELECT ts, host, amount FROM {prefix}_events WHERE amount > 10",
    ]


T0 = dt.datetime(2026, 12, 1, 13, 47, 58, 167865)

# ---------------------------------------------------------------- psycopg 3
import psycopg  # noqa: E402


@check("psycopg3: connect, version agrees everywhere")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        expect(conn.info.server_version == 160000, f"server_version {conn.info.server_version}")
        param = conn.info.parameter_status("server_version")
        version = conn.execute("SELECT version()").fetchone()[0]
        expect(version.startswith("PostgreSQL 16.0 (saql "), version)
        expect(conn.execute("SELECT pg_catalog.version()").fetchone()[0] == version, "pg_catalog")
        shown = conn.execute("SHOW server_version").fetchone()[0]
        expect(shown == param, f"SHOW server_version {shown!r} vs parameter {param!r}")
        expect(param in version, f"{param!r} not in {version!r}")
        num = conn.execute("SHOW server_version_num").fetchone()[0]
        expect(num == "160000", num)


@check("psycopg3: DDL, parameterised INSERT reused 12 times (prepared from the 5th), counts")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        for ddl in stream_ddl("pg3"):
            conn.execute(ddl)
        cur = conn.cursor()
        for i in range(12):
            cur.execute(
                "INSERT INTO pg3_events (ts, host, amount) VALUES (%s, %s, %s)",
                (T0 + dt.timedelta(seconds=i), f"h{i % 3}", i * 5),
            )
            expect(cur.rowcount == 1, f"execution {i + 1}: rowcount {cur.rowcount}")
        cur.executemany(
            "INSERT INTO pg3_events (ts, host, amount) VALUES (%s, %s, %s)",
            [(T0 + dt.timedelta(seconds=20 + i), "batch", 100 + i) for i in range(5)],
        )
        expect(cur.rowcount == 5, f"executemany rowcount {cur.rowcount}")
        n = conn.execute("SELECT count(*) FROM pg3_events").fetchone()[0]
        expect(n == 17, f"{n} rows")


@check("psycopg3: timestamps are datetimes with microseconds (text and binary), now()")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO pg3_events (ts, host, amount) "
            "VALUES ('2026-12-01 14:00:00.123456789', 'nanos', 1)"
        )
        for binary in (False, True):
            cur = conn.cursor(binary=binary)
            ts = cur.execute("SELECT ts FROM pg3_events WHERE host = 'nanos'").fetchone()[0]
            expect(ts == dt.datetime(2026, 12, 1, 14, 0, 0, 123456), f"binary={binary}: {ts!r}")
            first = cur.execute("SELECT min(ts) FROM pg3_events").fetchone()[0]
            expect(first == T0, f"binary={binary}: min(ts) {first!r}")
            now = cur.execute("SELECT now()").fetchone()[0]
            expect(isinstance(now, dt.datetime) and now.tzinfo is not None, repr(now))
            expect(abs((now - dt.datetime.now(dt.timezone.utc)).total_seconds()) < 60, repr(now))


@check("psycopg3: PostgreSQL column names, session functions, 42883")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        cur = conn.execute("SELECT 1, count(*), min(ts), max(amount) AS top FROM pg3_events")
        names = [c.name for c in cur.description]
        expect(names == ["?column?", "count", "min", "top"], names)
        row = conn.execute(
            "SELECT current_database(), current_schema(), current_user, session_user, "
            "current_setting('server_version_num'), pg_backend_pid()"
        ).fetchone()
        expect(row[:5] == ("saql", "public", "saql", "saql", "160000"), row)
        expect(row[5] == conn.info.backend_pid, f"pid {row[5]} vs {conn.info.backend_pid}")
        try:
            conn.execute("SELECT no_such_function(1)")
            raise AssertionError("no error")
        except psycopg.errors.UndefinedFunction as e:
            expect(e.sqlstate == "42883", e.sqlstate)


@check("psycopg3: SQLSTATE on errors, the session goes on")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        try:
            conn.execute("SELECT * FROM no_such_stream")
            raise AssertionError("no error")
        except psycopg.errors.UndefinedTable as e:
            expect(e.sqlstate == "42P01", e.sqlstate)
        try:
            conn.execute("INSERT INTO pg3_events (ts, host, amount) VALUES (%s, %s, %s)",
                         ("not a time", "x", 1))
            raise AssertionError("no error")
        except psycopg.Error as e:
            expect(e.sqlstate and e.sqlstate.startswith("22"), e.sqlstate)
        expect(conn.execute("SELECT 1").fetchone()[0] == 1, "session goes on")


@check("psycopg3: PREPARE / EXECUTE / DEALLOCATE [ALL] / DISCARD ALL")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("PREPARE ins AS INSERT INTO pg3_events (ts, host, amount) VALUES ($1, $2, $3)")
        cur = conn.execute("EXECUTE ins('2026-12-01 15:00:00', 'prepared', 7)")
        expect(cur.rowcount == 1, f"rowcount {cur.rowcount}")
        conn.execute("PREPARE q(text) AS SELECT amount FROM pg3_events WHERE host = $1")
        expect(conn.execute("EXECUTE q('prepared')").fetchall() == [(7,)], "EXECUTE q")
        conn.execute("DEALLOCATE q")
        try:
            conn.execute("EXECUTE q('prepared')")
            raise AssertionError("q still prepared")
        except psycopg.errors.InvalidSqlStatementName:
            pass
        conn.execute("DEALLOCATE ALL")
        conn.execute("DISCARD ALL")


@check("psycopg3: named (server-side) cursor over SELECT, fetched 3 rows at a time")
def _():
    with psycopg.connect(DSN) as conn:
        with conn.cursor("pg3_sel") as cur:
            cur.itersize = 3
            cur.execute("SELECT ts, amount FROM pg3_events WHERE host <> 'nanos' ORDER BY ts")
            first = cur.fetchmany(3)
            expect(len(first) == 3 and first[0][0] == T0, first)
            rest = cur.fetchall()
            expect(len(first) + len(rest) == 18, f"{len(first)} + {len(rest)} rows")
        conn.commit()


@check("psycopg3: named cursor over SUBSCRIBE gets live rows")
def _():
    with psycopg.connect(DSN) as conn:
        with conn.cursor("pg3_live") as cur:
            cur.execute("SUBSCRIBE pg3_big FROM 0")
            rows = cur.fetchmany(2)
            expect(len(rows) == 2 and rows[0][0] == T0 + dt.timedelta(seconds=3), rows)
            with psycopg.connect(DSN, autocommit=True) as other:
                other.execute("INSERT INTO pg3_events (ts, host, amount) "
                              "VALUES ('2026-12-01 16:00:00', 'live', 999)")
            seen = []
            deadline = time.monotonic() + 20
            while not any(r[1] == "live" for r in seen) and time.monotonic() < deadline:
                seen += cur.fetchmany(50)
            expect(any(r[1] == "live" and r[2] == 999 for r in seen), seen[-3:])
        conn.rollback()


@check("psycopg3: DEALLOCATE ALL after DDL with prepared statements (psycopg's own)")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        for i in range(6):
            conn.execute("SELECT amount FROM pg3_events WHERE host = %s", ("h1",))
        conn.execute("CREATE STREAM pg3_tmp (ts TIMESTAMP NOT NULL, x BIGINT, "
                     "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)")
        conn.execute("DROP STREAM pg3_tmp")
        rows = conn.execute("SELECT amount FROM pg3_events WHERE host = %s", ("h1",)).fetchall()
        expect(len(rows) == 4, rows)


@check("psycopg3: an INSERT of late rows gives a NOTICE; DROP STREAM ... CASCADE")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        notices = []
        conn.add_notice_handler(lambda d: notices.append(d.message_primary))
        conn.execute("CREATE STREAM pg3_late (ts TIMESTAMP NOT NULL, x BIGINT, "
                     "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)")
        conn.execute("CREATE CONTINUOUS QUERY pg3_late_q AS SELECT x FROM pg3_late")
        conn.execute("INSERT INTO pg3_late VALUES ('2026-12-01 10:00:00', 1)")
        expect(notices == [], notices)
        cur = conn.execute("INSERT INTO pg3_late VALUES ('2026-12-01 09:00:00', 2)")
        expect(cur.rowcount == 1, cur.rowcount)
        expect(len(notices) == 1 and notices[0].startswith("1 of 1 rows are behind"), notices)
        conn.execute("DROP STREAM pg3_late CASCADE")
        try:
            conn.execute("SELECT * FROM pg3_late_q")
            raise AssertionError("the query survived the CASCADE")
        except psycopg.errors.UndefinedTable:
            pass


# ---------------------------------------------------------------- psycopg2
import psycopg2  # noqa: E402
import psycopg2.errors  # noqa: E402


@check("psycopg2: connect, version, DDL, INSERT x12, timestamps, named cursors, SQLSTATE")
def _():
    conn = psycopg2.connect(DSN)
    conn.autocommit = True
    cur = conn.cursor()
    expect(conn.server_version == 160000, conn.server_version)
    cur.execute("SELECT version()")
    expect(cur.fetchone()[0].startswith("PostgreSQL 16.0 (saql "), "version")
    for ddl in stream_ddl("pg2"):
        cur.execute(ddl)
    for i in range(12):
        cur.execute("INSERT INTO pg2_events (ts, host, amount) VALUES (%s, %s, %s)",
                    (T0 + dt.timedelta(seconds=i), "h", i * 5))
        expect(cur.rowcount == 1, f"rowcount {cur.rowcount}")
    cur.execute("SELECT ts, now() FROM pg2_events ORDER BY ts LIMIT 1")
    ts, now = cur.fetchone()
    expect(ts == T0, repr(ts))
    expect(now.tzinfo is not None, repr(now))
    try:
        cur.execute("SELECT * FROM no_such_stream")
        raise AssertionError("no error")
    except psycopg2.errors.UndefinedTable as e:
        expect(e.pgcode == "42P01", e.pgcode)
    conn.autocommit = False
    named = conn.cursor("pg2_sel")
    named.itersize = 4
    named.execute("SELECT ts, amount FROM pg2_events ORDER BY ts")
    rows = named.fetchmany(5)
    expect(len(rows) == 5 and rows[0][0] == T0, rows)
    expect(len(rows) + len(named.fetchall()) == 12, "all rows through the cursor")
    named.close()
    conn.rollback()
    live = conn.cursor("pg2_live")
    live.execute("SUBSCRIBE pg2_big FROM 0")
    rows = live.fetchmany(3)
    expect(len(rows) == 3 and rows[0][2] == 15, rows)
    live.close()
    conn.rollback()
    conn.close()


# ---------------------------------------------------------------- asyncpg
import asyncpg  # noqa: E402


@check("asyncpg: connect, version, prepared INSERT x12, executemany, binary timestamps")
async def _():
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="saql", database="saql")
    try:
        v = conn.get_server_version()
        expect((v.major, v.minor) == (16, 0), v)
        version = await conn.fetchval("SELECT pg_catalog.version()")
        expect(version.startswith("PostgreSQL 16.0 (saql "), version)
        for ddl in stream_ddl("apg"):
            await conn.execute(ddl)
        insert = "INSERT INTO apg_events (ts, host, amount) VALUES ($1, $2, $3)"
        for i in range(12):
            status = await conn.execute(insert, T0 + dt.timedelta(seconds=i), "h", i * 5)
            expect(status == "INSERT 0 1", status)
        stmt = await conn.prepare(insert)
        for i in range(10):
            await stmt.fetch(T0 + dt.timedelta(seconds=30 + i), "p", 1)
        await conn.executemany(
            insert, [(T0 + dt.timedelta(seconds=60 + i), "many", 50) for i in range(5)]
        )
        n = await conn.fetchval("SELECT count(*) FROM apg_events")
        expect(n == 27, f"{n} rows")
        ts = await conn.fetchval("SELECT min(ts) FROM apg_events")
        expect(ts == T0, repr(ts))
        now = await conn.fetchval("SELECT now()")
        expect(now.tzinfo is not None, repr(now))
        try:
            await conn.fetch("SELECT * FROM no_such_stream")
            raise AssertionError("no error")
        except asyncpg.exceptions.UndefinedTableError as e:
            expect(e.sqlstate == "42P01", e.sqlstate)
    finally:
        await conn.close()


@check("binary COPY: asyncpg copy_records_to_table, psycopg 3 binary copy; NULLs, types")
async def _():
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="saql", database="saql")
    try:
        await conn.execute(
            "CREATE STREAM bin_events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, "
            "x DOUBLE PRECISION, ok BOOLEAN, small INT)")
        rows = [(T0 + dt.timedelta(seconds=i), f"h{i}" if i % 3 else None, i * 10,
                 i / 4, i % 2 == 0, i) for i in range(50)]
        status = await conn.copy_records_to_table(
            "bin_events", records=rows, columns=["ts", "host", "amount", "x", "ok", "small"])
        expect(status == "COPY 50", status)
        got = await conn.fetch("SELECT ts, host, amount, x, ok, small FROM bin_events ORDER BY ts")
        expect([tuple(r) for r in got] == rows, got[:3])
    finally:
        await conn.close()
    with psycopg.connect(DSN, autocommit=True) as c:
        with c.cursor().copy("COPY bin_events (ts, host, amount) FROM STDIN (FORMAT binary)") as cp:
            cp.set_types(["timestamp", "text", "int8"])
            cp.write_row((T0, "psy", 7))
        n = c.execute("SELECT count(*) FROM bin_events WHERE host = 'psy'").fetchone()[0]
        expect(n == 1, n)
        # Not binary data: 22P04 with the reason, and the stream keeps its rows.
        try:
            with c.cursor().copy("COPY bin_events FROM STDIN (FORMAT binary)") as cp:
                cp.write(b"ts,host\n")
            raise AssertionError("text accepted as binary COPY")
        except psycopg.errors.BadCopyFileFormat as e:
            expect("signature" in str(e), e)
        n = c.execute("SELECT count(*) FROM bin_events").fetchone()[0]
        expect(n == 51, n)


@check("asyncpg: cursors with a fetch size (portal suspension) over SELECT and SUBSCRIBE")
async def _():
    conn = await asyncpg.connect(host="127.0.0.1", port=PORT, user="saql", database="saql")
    try:
        async with conn.transaction():
            cur = await conn.cursor("SELECT ts, amount FROM apg_events ORDER BY ts")
            first = await cur.fetch(4)
            expect(len(first) == 4 and first[0]["ts"] == T0, first)
            rest = await cur.fetch(100)
            expect(len(first) + len(rest) == 27, f"{len(first)} + {len(rest)}")
            got = [r async for r in conn.cursor("SELECT amount FROM apg_events", prefetch=5)]
            expect(len(got) == 27, f"{len(got)} rows iterated")
        async with conn.transaction():
            cur = await conn.cursor("SUBSCRIBE apg_big FROM 0")
            rows = await cur.fetch(3)
            expect(len(rows) == 3 and rows[0]["amount"] == 15, rows)
            other = await asyncpg.connect(host="127.0.0.1", port=PORT, user="saql")
            await other.execute("INSERT INTO apg_events (ts, host, amount) "
                                "VALUES ('2026-12-01 16:00:00', 'live', 999)")
            await other.close()
            # A row limit is a promise of that many rows, as in PostgreSQL: one at a time
            # returns each row as it exists.
            row = await cur.fetchrow()
            while row["host"] != "live":
                row = await cur.fetchrow()
            expect(row["amount"] == 999, row)
        async with conn.transaction():
            await conn.execute("DECLARE c CURSOR FOR SELECT ts, amount FROM apg_events")
            rows = await conn.fetch("FETCH 10 FROM c")
            expect(len(rows) == 10 and len(rows[0]) == 2, rows[:1])
    finally:
        await conn.close()


# ---------------------------------------------------------------- SQLAlchemy + pandas
def sqlalchemy_checks():
    try:
        import pandas as pd
        import sqlalchemy as sa
    except ImportError as e:
        print(f"SKIP SQLAlchemy/pandas: {e}")
        return

    @check("SQLAlchemy 2 (psycopg 3): connect, server version, pandas.read_sql of results")
    def _():
        # Default options: the dialect probes for hstore in pg_type inside a savepoint.
        engine = sa.create_engine(f"postgresql+psycopg://saql@127.0.0.1:{PORT}/saql")
        with engine.connect() as conn:
            expect(conn.dialect.server_version_info[:2] == (16, 0),
                   conn.dialect.server_version_info)
            n = conn.execute(sa.text("SELECT count(*) FROM pg3_events")).scalar()
            expect(n >= 17, n)
            df = pd.read_sql(sa.text("SELECT ts, host, amount FROM pg3_big ORDER BY ts"), conn)
            expect(len(df) >= 5 and str(df["ts"].dtype).startswith("datetime64"), df.dtypes)
        engine.dispose()

    @check("SQLAlchemy 2 (psycopg2): connect and query")
    def _():
        engine = sa.create_engine(f"postgresql+psycopg2://saql@127.0.0.1:{PORT}/saql")
        with engine.connect() as conn:
            expect(conn.dialect.server_version_info[:2] == (16, 0),
                   conn.dialect.server_version_info)
            ts = conn.execute(sa.text("SELECT min(ts) FROM pg2_events")).scalar()
            expect(ts == T0, ts)
        engine.dispose()

    @check("SQLAlchemy 2: inspect() streams and queries, reflect a Table, pandas.read_sql_table")
    def _():
        for driver in ["psycopg", "psycopg2"]:
            engine = sa.create_engine(f"postgresql+{driver}://saql@127.0.0.1:{PORT}/saql")
            insp = sa.inspect(engine)
            tables = insp.get_table_names()
            expect("pg3_events" in tables and "pg3_big" not in tables, tables)
            views = insp.get_materialized_view_names()
            expect("pg3_big" in views, views)
            columns = [(c["name"], str(c["type"]), c["nullable"])
                       for c in insp.get_columns("pg3_events")]
            expect(columns == [("ts", "TIMESTAMP", False), ("host", "TEXT", True),
                               ("amount", "BIGINT", True)], columns)
            expect(insp.has_table("pg3_events") and not insp.has_table("no_such"), "has_table")
            expect(insp.get_pk_constraint("pg3_events")["constrained_columns"] == [], "pk")
            expect(insp.get_indexes("pg3_events") == [], "indexes")
            expect("public" in insp.get_schema_names(), insp.get_schema_names())
            expect("pg3_events" in insp.get_view_definition("pg3_big"), "view definition")
            table = sa.Table("pg3_events", sa.MetaData(), autoload_with=engine)
            expect([c.name for c in table.columns] == ["ts", "host", "amount"], table.columns)
            with engine.connect() as conn:
                n = conn.execute(sa.select(sa.func.count()).select_from(table)).scalar()
            df = pd.read_sql_table("pg3_events", engine)
            expect(len(df) == n and n >= 17, (len(df), n))
            engine.dispose()


sqlalchemy_checks()

print(f"\n{len(PASSED)} passed, {len(FAILED)} failed")
for name in FAILED:
    print(f"  failed: {name}")
sys.exit(min(len(FAILED), 100))
