"""The tools analysts open, against a running saql server: SQLAlchemy's psycopg dialect
writing (`DataFrame.to_sql`, ORM inserts), Grafana's query builder, Metabase's sync and pgcli's
completion and `\\d` family. Grafana, Metabase and pgcli are not installable here (pgcli is:
tests/clients/pgcli_tmux.sh drives it in tmux); their statements, as a logging proxy between
the tool and a PostgreSQL-speaking server showed them, are replayed through psycopg 3 with the
parameters the tools bind. Each check prints PASS or FAIL; the exit status is the number of
failures.

Run by run.sh, which starts the server and passes its port in SAQL_PORT.
"""

import datetime as dt
import os
import sys
import time
import traceback

import psycopg

PORT = int(os.environ["SAQL_PORT"])
DSN = f"host=127.0.0.1 port={PORT} user=saql dbname=saql"
FAILED = []
PASSED = []


def check(name):
    """Runs the decorated function at once as one named check."""

    def run(fn):
        start = time.monotonic()
        try:
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


T0 = dt.datetime(2026, 12, 4, 10, 0, 0, 250000)

with psycopg.connect(DSN, autocommit=True) as setup:
    setup.execute("CREATE STREAM tool_events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, "
                  "WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)")
    setup.execute("CREATE CONTINUOUS QUERY tool_big AS "
                  "SELECT ts, host, amount FROM tool_events WHERE amount > 10")


# ---------------------------------------------------------------- SQLAlchemy (psycopg) writes
@check("SQLAlchemy psycopg dialect: DataFrame.to_sql, ORM insert, select with limit/offset")
def _():
    import pandas as pd
    import sqlalchemy as sa
    from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column

    engine = sa.create_engine(f"postgresql+psycopg://saql@127.0.0.1:{PORT}/saql")
    df = pd.DataFrame({
        "ts": [T0 + dt.timedelta(seconds=i) for i in range(4)],
        "host": ["a", "b", "c", "d"],
        "amount": [5, 20, 30, 40],
    })
    # Every parameter is cast: `VALUES ($1::TIMESTAMP WITHOUT TIME ZONE, $2::VARCHAR, ...)`.
    df.to_sql("tool_events", engine, if_exists="append", index=False)

    class Base(DeclarativeBase):
        pass

    class Event(Base):
        __tablename__ = "tool_events"
        ts: Mapped[dt.datetime] = mapped_column(primary_key=True)
        host: Mapped[str]
        amount: Mapped[int]

    with Session(engine) as session:
        session.add(Event(ts=T0 + dt.timedelta(seconds=10), host="orm", amount=99))
        session.add_all([Event(ts=T0 + dt.timedelta(seconds=11 + i), host=f"o{i}", amount=i)
                         for i in range(2)])
        session.commit()
    with engine.connect() as conn:
        n = conn.execute(sa.text("SELECT count(*) FROM tool_events")).scalar()
        expect(n == 7, f"{n} rows")
        hosts = conn.execute(sa.select(Event.host).where(Event.amount > 10)
                             .order_by(Event.ts).limit(2).offset(1)).scalars().all()
        expect(hosts == ["c", "d"], hosts)
        back = pd.read_sql(sa.text("SELECT ts, host FROM tool_events WHERE host = 'a'"), conn)
        expect(back["ts"][0] == T0, back)
        last = conn.execute(sa.select(Event.host).order_by(Event.ts.desc()).limit(1)).scalar_one()
        expect(last == "o1", last)
    engine.dispose()


# ---------------------------------------------------------------- Grafana's query builder
GRAFANA_TABLES = """
select quote_ident(table_name) as "table" from information_schema.tables
    where quote_ident(table_schema) not in ('information_schema',
                             'pg_catalog',
                             '_timescaledb_cache',
                             '_timescaledb_catalog',
                             '_timescaledb_internal',
                             '_timescaledb_config',
                             'timescaledb_information',
                             'timescaledb_experimental')
      and table_type = 'BASE TABLE' and quote_ident(table_schema) IN (
      SELECT
        CASE WHEN trim(s[i]) = '"$user"' THEN user ELSE trim(s[i]) END
      FROM
        generate_series(
          array_lower(string_to_array(current_setting('search_path'),','),1),
          array_upper(string_to_array(current_setting('search_path'),','),1)
        ) as i,
        string_to_array(current_setting('search_path'),',') s
      )
"""


@check("Grafana query builder: tables, columns, a built time-series query")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        tables = [r[0] for r in conn.execute(GRAFANA_TABLES).fetchall()]
        expect("tool_events" in tables and "tool_big" not in tables, tables)
        columns = conn.execute(
            'select quote_ident(column_name) as "column", data_type as "type" '
            "from information_schema.columns where quote_ident(table_name) = %s",
            ("tool_events",)).fetchall()
        expect(columns == [("ts", "timestamp without time zone"), ("host", "text"),
                           ("amount", "bigint")], columns)
        rows = conn.execute(
            "SELECT ts AS \"time\", amount FROM tool_events "
            "WHERE ts BETWEEN '2026-12-04T10:00:00Z' AND '2026-12-04T11:00:00Z' "
            "ORDER BY 1 LIMIT 50").fetchall()
        expect(len(rows) == 7, rows)


# ---------------------------------------------------------------- Metabase's sync
METABASE_TABLES = """
SELECT n.nspname AS schema, c.relname AS name,
       CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'p' THEN 'PARTITIONED TABLE' WHEN 'v' THEN 'VIEW'
                      WHEN 'f' THEN 'FOREIGN TABLE' WHEN 'm' THEN 'MATERIALIZED VIEW'
                      ELSE NULL END AS type,
       d.description AS description, stat.n_live_tup AS estimated_row_count
FROM pg_catalog.pg_class c
INNER JOIN pg_catalog.pg_namespace n ON c.relnamespace = n.oid
LEFT JOIN pg_catalog.pg_description d
       ON c.oid = d.objoid AND d.objsubid = 0 AND d.classoid = 'pg_class'::regclass
LEFT JOIN pg_stat_user_tables stat ON n.nspname = stat.schemaname AND c.relname = stat.relname
WHERE c.relnamespace = n.oid
  AND c.relkind IN ('r', 'p', 'v', 'f', 'm')
  AND n.nspname !~ '^information_schema|catalog_history|pg_'
  AND has_schema_privilege(n.nspname, 'USAGE')
  AND (has_table_privilege(quote_ident(n.nspname) || '.' || quote_ident(c.relname), 'SELECT')
       OR has_any_column_privilege(quote_ident(n.nspname) || '.' || quote_ident(c.relname),
                                   'SELECT'))
ORDER BY type, schema, name
"""

METABASE_FIELDS = """
SELECT c.column_name AS name, c.udt_name AS "database-type",
       c.ordinal_position - 1 AS "database-position", c.table_schema AS "table-schema",
       c.table_name AS "table-name", pk.column_name IS NOT NULL AS "pk?",
       (column_default IS NULL AND is_nullable = 'NO'
        AND NOT (is_identity = 'YES' OR is_generated = 'ALWAYS')) AS "database-required",
       (column_default IS NOT NULL) AS "database-is-auto-increment"
FROM information_schema.columns AS c
LEFT JOIN (SELECT tc.table_schema, tc.table_name, kc.column_name
           FROM information_schema.table_constraints AS tc
           INNER JOIN information_schema.key_column_usage AS kc
                   ON (tc.constraint_name = kc.constraint_name)
                  AND (tc.table_schema = kc.table_schema)
                  AND (tc.table_name = kc.table_name)
           WHERE tc.constraint_type = 'PRIMARY KEY') AS pk
       ON (c.table_schema = pk.table_schema) AND (c.table_name = pk.table_name)
      AND (c.column_name = pk.column_name)
WHERE c.table_schema !~ '^information_schema|catalog_history|pg_'
  AND c.table_schema IN (%s)
ORDER BY "table-schema" ASC, "table-name" ASC, "database-position" ASC
"""

METABASE_FKS = """
SELECT fk_ns.nspname AS "fk-table-schema", fk_table.relname AS "fk-table-name",
       fk_column.attname AS "fk-column-name", pk_ns.nspname AS "pk-table-schema",
       pk_table.relname AS "pk-table-name", pk_column.attname AS "pk-column-name"
FROM pg_constraint c
JOIN pg_class fk_table ON c.conrelid = fk_table.oid
JOIN pg_namespace fk_ns ON c.connamespace = fk_ns.oid
JOIN pg_attribute fk_column ON c.conrelid = fk_column.attrelid
JOIN pg_class pk_table ON c.confrelid = pk_table.oid
JOIN pg_namespace pk_ns ON pk_table.relnamespace = pk_ns.oid
JOIN pg_attribute pk_column ON c.confrelid = pk_column.attrelid
WHERE fk_ns.nspname !~ '^information_schema|catalog_history|pg_'
  AND c.contype = 'f'::char
  AND fk_column.attnum = ANY(c.conkey)
  AND pk_column.attnum = ANY(c.confkey)
ORDER BY "fk-table-schema", "fk-table-name"
"""


@check("Metabase sync: tables with row estimates, fields with keys, foreign keys, probes")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        conn.execute("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY")
        tz = conn.execute("SELECT current_setting('TIMEZONE') AS timezone").fetchone()[0]
        expect(tz == "UTC", tz)
        tables = {r[1]: r for r in conn.execute(METABASE_TABLES).fetchall()}
        expect(tables["tool_events"][2] == "TABLE" and tables["tool_events"][4] == 7,
               tables.get("tool_events"))
        expect(tables["tool_big"][2] == "MATERIALIZED VIEW", tables.get("tool_big"))
        fields = [r for r in conn.execute(METABASE_FIELDS, ("public",)).fetchall()
                  if r[4] == "tool_events"]
        expect([(f[0], f[1], f[2], f[5], f[6]) for f in fields] ==
               [("ts", "timestamp", 0, False, True), ("host", "text", 1, False, False),
                ("amount", "int8", 2, False, False)], fields)
        expect(conn.execute(METABASE_FKS).fetchall() == [], "no foreign keys")
        # Metabase's "can I read it" probe and its sample of rows.
        expect(conn.execute('SELECT TRUE AS "_" FROM "public"."tool_events" '
                            "WHERE 1 <> 1 LIMIT 0").fetchall() == [], "probe")
        sample = conn.execute('SELECT "public"."tool_events"."host" AS "host" '
                              'FROM "public"."tool_events" LIMIT 10000').fetchall()
        expect(len(sample) == 7, sample)


# ---------------------------------------------------------------- pgcli
PGCLI_STATEMENTS = [
    ("SELECT * FROM unnest(current_schemas(true))", None),
    ("SELECT nspname FROM pg_catalog.pg_namespace ORDER BY 1", None),
    ("""SELECT n.nspname schema_name, c.relname table_name
        FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = ANY(%s) ORDER BY 1,2""", (["r", "p", "f"],)),
    ("""SELECT nsp.nspname schema_name, cls.relname table_name, att.attname column_name,
               att.atttypid::regtype::text type_name, att.atthasdef AS has_default,
               pg_catalog.pg_get_expr(def.adbin, def.adrelid, true) as default
        FROM pg_catalog.pg_attribute att
             INNER JOIN pg_catalog.pg_class cls ON att.attrelid = cls.oid
             INNER JOIN pg_catalog.pg_namespace nsp ON cls.relnamespace = nsp.oid
             LEFT OUTER JOIN pg_attrdef def ON def.adrelid = att.attrelid AND def.adnum = att.attnum
        WHERE cls.relkind = ANY(%s) AND NOT att.attisdropped AND att.attnum > 0
        ORDER BY 1, 2, att.attnum""", (["r", "p", "f"],)),
    ("SELECT d.datname FROM pg_catalog.pg_database d ORDER BY 1", None),
    ("""SELECT n.nspname schema_name, t.typname type_name
        FROM pg_catalog.pg_type t INNER JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace
        WHERE (t.typrelid = 0 OR (SELECT c.relkind = 'c' FROM pg_catalog.pg_class c
                                  WHERE c.oid = t.typrelid))
          AND NOT EXISTS(SELECT 1 FROM pg_catalog.pg_type el
                         WHERE el.oid = t.typelem AND el.typarray = t.oid)
          AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema'
        ORDER BY 1, 2""", None),
    ("""SELECT n.nspname schema_name, p.proname func_name, p.proargnames,
               COALESCE(proallargtypes::regtype[], proargtypes::regtype[])::text[],
               p.proargmodes, prorettype::regtype::text return_type,
               p.prokind = 'a' is_aggregate, p.prokind = 'w' is_window,
               p.proretset is_set_returning, d.deptype = 'e' is_extension,
               pg_get_expr(proargdefaults, 0) AS arg_defaults
        FROM pg_catalog.pg_proc p
             INNER JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
             LEFT JOIN pg_depend d ON d.objid = p.oid and d.deptype = 'e'
        WHERE p.prorettype::regtype != 'trigger'::regtype
        ORDER BY 1, 2""", None),
    # \dt, \dm, \d: the relkinds as a text array literal.
    ("""SELECT n.nspname as schema, c.relname as name,
               CASE c.relkind WHEN 'r' THEN 'table' WHEN 'v' THEN 'view'
                 WHEN 'p' THEN 'partitioned table' WHEN 'm' THEN 'materialized view'
                 WHEN 'i' THEN 'index' WHEN 'S' THEN 'sequence' WHEN 's' THEN 'special'
                 WHEN 'f' THEN 'foreign table' END as type,
               pg_catalog.pg_get_userbyid(c.relowner) as owner
        FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
        WHERE c.relkind = ANY('{r,p,v,m,S,f,""}')
          AND n.nspname <> 'pg_catalog' AND n.nspname <> 'information_schema'
          AND n.nspname !~ '^pg_toast' AND pg_catalog.pg_table_is_visible(c.oid)
        ORDER BY 1, 2""", None),
]


@check("pgcli: its completion and \\d statements replayed (schemas, tables, columns, types)")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        results = [conn.execute(sql, params).fetchall() for sql, params in PGCLI_STATEMENTS]
        names = conn.execute(PGCLI_STATEMENTS[0][0]).description
        expect([c.name for c in names] == ["unnest"], names)
        expect([r[0] for r in results[0]] == ["pg_catalog", "public"], results[0])
        expect(("public", "tool_events") in results[2], results[2])
        expect(("public", "tool_events", "amount", "bigint", False, None) in results[3],
               results[3][:3])
        expect(results[4] == [("saql",)], results[4])
        listed = {(r[1], r[2]) for r in results[7]}
        expect({("tool_events", "table"), ("tool_big", "materialized view")} <= listed, listed)


@check("psycopg: COPY (query) TO STDOUT as CSV, COPY stream TO STDOUT as text rows")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        sql = ("COPY (SELECT host, amount FROM tool_events WHERE amount >= 20 ORDER BY ts) "
               "TO STDOUT WITH (FORMAT csv, HEADER)")
        with conn.cursor().copy(sql) as copy:
            data = b"".join(bytes(chunk) for chunk in copy)
        expect(data == b"host,amount\nb,20\nc,30\nd,40\norm,99\n", data)
        with conn.cursor().copy("COPY tool_big (host, amount) TO STDOUT") as copy:
            rows = list(copy.rows())
        expect(("orm", "99") in rows and len(rows) == 4, rows)


@check("What saql cannot do is refused with PostgreSQL's SQLSTATE, never XX000")
def _():
    with psycopg.connect(DSN, autocommit=True) as conn:
        for sql, code in [
            ("WITH x AS (INSERT INTO tool_events VALUES (now(), 'w', 1) RETURNING *) "
             "SELECT * FROM x", "0A000"),
            ("UPDATE tool_events SET host = 'x'", "0A000"),
            ("SELECT pg_catalog.set_config('search_path', '', false)", "42883"),
            ("COPY tool_events TO '/tmp/never'", "0A000"),
        ]:
            try:
                conn.execute(sql)
                raise AssertionError(f"no error: {sql}")
            except psycopg.Error as e:
                expect(e.sqlstate == code, f"{sql}: {e.sqlstate} {e}")


print(f"\n{len(PASSED)} passed, {len(FAILED)} failed")
for name in FAILED:
    print(f"  failed: {name}")
sys.exit(min(len(FAILED), 100))
