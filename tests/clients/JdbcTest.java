// pgJDBC against a running saql server (port in SAQL_PORT): version, DDL, a PreparedStatement
// INSERT reused 12 times (pgJDBC switches to a named server-side statement on the 5th),
// executeBatch counts, timestamps, fetch size (portal suspension) over SELECT and SUBSCRIBE,
// SQLSTATE; the DatabaseMetaData methods DBeaver calls on connect and DBeaver's own catalog
// statements (as a logging proxy between DBeaver and PostgreSQL shows them) replayed. Prints PASS/FAIL per check; exit status 1 on any failure.

import java.sql.*;
import java.time.LocalDateTime;
import java.util.ArrayList;
import java.util.List;

public class JdbcTest {
    interface Check {
        void run(Connection conn) throws Exception;
    }

    static final String URL =
            "jdbc:postgresql://127.0.0.1:" + System.getenv("SAQL_PORT") + "/saql?user=saql";
    static final LocalDateTime T0 = LocalDateTime.of(2026, 12, 1, 13, 47, 58, 167865000);
    static final List<String> failed = new ArrayList<>();
    static int passed = 0;

    static void expect(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    static void check(String name, Check c) {
        long start = System.nanoTime();
        try (Connection conn = DriverManager.getConnection(URL)) {
            c.run(conn);
            passed++;
            System.out.printf("PASS %s (%.1fs)%n", name, (System.nanoTime() - start) / 1e9);
        } catch (Throwable e) {
            failed.add(name);
            System.out.printf("FAIL %s: %s%n", name, e);
        }
    }

    static int count(Connection conn, String sql) throws SQLException {
        try (Statement st = conn.createStatement(); ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getInt(1);
        }
    }

    /** The number of rows of `rs`, which it closes. */
    static int rows(ResultSet rs) throws SQLException {
        int n = 0;
        try (rs) {
            while (rs.next()) n++;
        }
        return n;
    }

    public static void main(String[] args) {
        check("pgJDBC: connect, version agrees", conn -> {
            DatabaseMetaData md = conn.getMetaData();
            expect(md.getDatabaseMajorVersion() == 16, "major " + md.getDatabaseMajorVersion());
            try (Statement st = conn.createStatement()) {
                ResultSet rs = st.executeQuery("SELECT version()");
                rs.next();
                String v = rs.getString(1);
                expect(v.startsWith("PostgreSQL 16.0 (saql "), v);
                expect(v.contains(md.getDatabaseProductVersion()),
                        md.getDatabaseProductVersion() + " not in " + v);
            }
        });

        check("pgJDBC: DDL, PreparedStatement INSERT x12 (named from the 5th), executeBatch", conn -> {
            try (Statement st = conn.createStatement()) {
                st.execute("CREATE STREAM jdbc_events (ts TIMESTAMP NOT NULL, host TEXT, "
                        + "amount BIGINT, WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)");
                st.execute("CREATE CONTINUOUS QUERY jdbc_big AS "
                        + "SELECT ts, host, amount FROM jdbc_events WHERE amount > 10");
            }
            String insert = "INSERT INTO jdbc_events (ts, host, amount) VALUES (?, ?, ?)";
            try (PreparedStatement ps = conn.prepareStatement(insert)) {
                for (int i = 0; i < 12; i++) {
                    ps.setObject(1, T0.plusSeconds(i));
                    ps.setString(2, "h" + (i % 3));
                    ps.setLong(3, i * 5L);
                    int n = ps.executeUpdate();
                    expect(n == 1, "execution " + (i + 1) + " updated " + n);
                }
                for (int i = 0; i < 5; i++) {
                    ps.setObject(1, T0.plusSeconds(20 + i));
                    ps.setString(2, "batch");
                    ps.setLong(3, 100 + i);
                    ps.addBatch();
                }
                int[] counts = ps.executeBatch();
                expect(counts.length == 5, "batch of " + counts.length);
                for (int c : counts) expect(c == 1, "batch count " + c);
            }
            expect(count(conn, "SELECT count(*) FROM jdbc_events") == 17, "17 rows");
        });

        check("pgJDBC: timestamps with microseconds, now()", conn -> {
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT min(ts), now() FROM jdbc_events WHERE amount > ?")) {
                ps.setLong(1, -1);
                ResultSet rs = ps.executeQuery();
                rs.next();
                expect(rs.getObject(1, LocalDateTime.class).equals(T0), "min(ts) " + rs.getString(1));
                expect(rs.getTimestamp(2) != null, "now()");
            }
        });

        check("pgJDBC: fetch size over SELECT (portal suspension)", conn -> {
            conn.setAutoCommit(false);
            try (Statement st = conn.createStatement()) {
                st.setFetchSize(3);
                ResultSet rs = st.executeQuery("SELECT ts, amount FROM jdbc_events ORDER BY ts");
                int n = 0;
                while (rs.next()) n++;
                expect(n == 17, n + " rows");
            }
            conn.commit();
        });

        check("pgJDBC: fetch size 1 over SUBSCRIBE gets retained then live rows", conn -> {
            conn.setAutoCommit(false);
            try (Statement st = conn.createStatement()) {
                st.setFetchSize(1);
                ResultSet rs = st.executeQuery("SUBSCRIBE jdbc_big FROM 0");
                expect(rs.next() && rs.getLong("amount") == 15, "first retained row");
                try (Connection other = DriverManager.getConnection(URL);
                     Statement ins = other.createStatement()) {
                    ins.executeUpdate("INSERT INTO jdbc_events (ts, host, amount) "
                            + "VALUES ('2026-12-01 16:00:00', 'live', 999)");
                }
                boolean live = false;
                while (!live && rs.next()) live = rs.getString("host").equals("live");
                expect(live && rs.getLong("amount") == 999, "live row");
            }
            conn.rollback();
        });

        check("pgJDBC: DatabaseMetaData getTables / getColumns / getPrimaryKeys", conn -> {
            DatabaseMetaData md = conn.getMetaData();
            List<String> tables = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", "jdbc_%", new String[] {"TABLE"})) {
                while (rs.next()) tables.add(rs.getString("TABLE_NAME"));
            }
            expect(tables.contains("jdbc_events"), "getTables: " + tables);
            List<String> views = new ArrayList<>();
            try (ResultSet rs = md.getTables(null, "public", "jdbc_%",
                    new String[] {"MATERIALIZED VIEW"})) {
                while (rs.next()) views.add(rs.getString("TABLE_NAME"));
            }
            expect(!views.isEmpty() && !views.contains("jdbc_events"), "views: " + views);
            List<String> columns = new ArrayList<>();
            try (ResultSet rs = md.getColumns(null, "public", "jdbc_events", "%")) {
                while (rs.next()) {
                    columns.add(rs.getString("COLUMN_NAME") + ":" + rs.getString("TYPE_NAME") + ":"
                            + rs.getInt("DATA_TYPE") + ":" + rs.getString("IS_NULLABLE"));
                }
            }
            expect(columns.equals(List.of(
                    "ts:timestamp:" + Types.TIMESTAMP + ":NO",
                    "host:text:" + Types.VARCHAR + ":YES",
                    "amount:int8:" + Types.BIGINT + ":YES")), "getColumns: " + columns);
            try (ResultSet rs = md.getPrimaryKeys(null, "public", "jdbc_events")) {
                expect(!rs.next(), "a stream has no primary key");
            }
            try (ResultSet rs = md.getSchemas()) {
                List<String> schemas = new ArrayList<>();
                while (rs.next()) schemas.add(rs.getString("TABLE_SCHEM"));
                expect(schemas.contains("public"), "getSchemas: " + schemas);
            }
        });

        check("pgJDBC: SQLSTATE on errors, the connection goes on", conn -> {
            try (Statement st = conn.createStatement()) {
                try {
                    st.executeQuery("SELECT * FROM no_such_stream");
                    throw new AssertionError("no error");
                } catch (SQLException e) {
                    expect("42P01".equals(e.getSQLState()), e.getSQLState());
                }
                expect(count(conn, "SELECT 1") == 1, "goes on");
            }
        });

        check("pgJDBC: DatabaseMetaData sweep of what DBeaver calls on connect", conn -> {
            DatabaseMetaData md = conn.getMetaData();
            int types = rows(md.getTypeInfo());
            expect(types >= 10, "getTypeInfo: " + types + " types");
            try (ResultSet rs = md.getTypeInfo()) {
                List<String> names = new ArrayList<>();
                while (rs.next()) names.add(rs.getString("TYPE_NAME"));
                expect(names.contains("int8") && names.contains("timestamp"), "types " + names);
            }
            expect(rows(md.getImportedKeys(null, "public", "jdbc_events")) == 0, "imported keys");
            expect(rows(md.getExportedKeys(null, "public", "jdbc_events")) == 0, "exported keys");
            expect(rows(md.getCrossReference(null, "public", "jdbc_events", null, "public",
                    "jdbc_big")) == 0, "cross reference");
            expect(rows(md.getBestRowIdentifier(null, "public", "jdbc_events",
                    DatabaseMetaData.bestRowSession, true)) == 0, "best row identifier");
            expect(rows(md.getIndexInfo(null, "public", "jdbc_events", false, true)) == 0,
                    "index info");
            expect(rows(md.getPrimaryKeys(null, "public", "jdbc_events")) == 0, "primary keys");
            rows(md.getFunctions(null, "public", "%"));
            rows(md.getFunctionColumns(null, "public", "%", "%"));
            rows(md.getProcedures(null, "public", "%"));
            rows(md.getVersionColumns(null, "public", "jdbc_events"));
            rows(md.getTablePrivileges(null, "public", "jdbc_%"));
            rows(md.getColumnPrivileges(null, "public", "jdbc_events", "%"));
            rows(md.getClientInfoProperties());
            expect(rows(md.getCatalogs()) == 1, "one catalog");
            String keywords = md.getSQLKeywords();
            expect(keywords.contains("abort") && !keywords.contains(",select,"), "keywords");
            md.getNumericFunctions();
            md.getStringFunctions();
            md.getTimeDateFunctions();
            md.getSystemFunctions();
        });

        check("DBeaver: its catalog statements on connect and when a table opens", conn -> {
            try (Statement st = conn.createStatement()) {
                ResultSet rs = st.executeQuery("SELECT current_schema(),session_user");
                expect(rs.next() && rs.getString(1).equals("public"), "current_schema");
                rs = st.executeQuery("SHOW search_path");
                expect(rs.next(), "search_path");
            }
            long db;
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE 1 = 1 AND "
                            + "datallowconn AND NOT datistemplate OR db.datname =? "
                            + "ORDER BY db.datname")) {
                ps.setString(1, "saql");
                ResultSet rs = ps.executeQuery();
                expect(rs.next(), "a database");
                db = rs.getLong(1);
                expect(rs.getLong("oid") == db && rs.getString("datname").equals("saql"),
                        "oid and datname");
                expect(rs.getMetaData().getColumnName(2).equals("oid"), "oid twice");
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT db.oid,db.* FROM pg_catalog.pg_database db WHERE datname=?")) {
                ps.setString(1, "saql");
                ResultSet rs = ps.executeQuery();
                expect(rs.next() && rs.getLong(1) == db, "database by name");
            }
            long ns = -1;
            long table = -1;
            try (Statement st = conn.createStatement()) {
                ResultSet rs = st.executeQuery(
                        "SELECT reset_val FROM pg_catalog.pg_settings WHERE name='search_path'");
                expect(rs.next(), "reset_val");
                rs = st.executeQuery("SELECT n.oid,n.*,d.description FROM pg_catalog.pg_namespace n "
                        + "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=n.oid AND "
                        + "d.objsubid=0 AND d.classoid='pg_namespace'::regclass ORDER BY nspname");
                while (rs.next()) if (rs.getString("nspname").equals("public")) ns = rs.getLong(1);
                expect(ns > 0, "public schema");
                rs = st.executeQuery("SELECT t.oid,t.*,c.relkind,format_type(nullif(t.typbasetype, 0), "
                        + "t.typtypmod) as base_type_name, d.description FROM pg_catalog.pg_type t "
                        + "LEFT OUTER JOIN pg_catalog.pg_type et ON et.oid=t.typelem "
                        + "LEFT OUTER JOIN pg_catalog.pg_class c ON c.oid=t.typrelid "
                        + "LEFT OUTER JOIN pg_catalog.pg_description d ON t.oid=d.objoid "
                        + "WHERE t.typname IS NOT NULL AND (c.relkind IS NULL OR c.relkind = 'c') "
                        + "AND (et.typcategory IS NULL OR et.typcategory <> 'C')");
                expect(rows(rs) >= 10, "types");
                rs = st.executeQuery("SELECT a.oid,a.* FROM pg_catalog.pg_roles a ORDER BY a.rolname");
                expect(rs.next() && rs.getString("rolname").equals("saql"), "roles");
                rs = st.executeQuery("SELECT e.oid,e.*,n.nspname FROM pg_catalog.pg_extension e "
                        + "LEFT OUTER JOIN pg_catalog.pg_namespace n ON n.oid=e.extnamespace");
                expect(rows(rs) == 0, "extensions");
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,"
                            + "d.description FROM pg_catalog.pg_class c "
                            + "LEFT OUTER JOIN pg_catalog.pg_class t ON t.oid=c.reltoastrelid "
                            + "LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.reloftype "
                            + "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND "
                            + "d.objsubid=0 AND d.classoid='pg_class'::regclass "
                            + "WHERE c.relnamespace=? AND c.relkind not in ('i','I','c')")) {
                ps.setLong(1, ns);
                ResultSet rs = ps.executeQuery();
                while (rs.next()) {
                    if (rs.getString("relname").equals("jdbc_events")) table = rs.getLong(1);
                }
                expect(table > 0, "jdbc_events among the tables");
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "select c.oid,pg_catalog.pg_total_relation_size(c.oid) as total_rel_size,"
                            + "pg_catalog.pg_relation_size(c.oid) as rel_size FROM pg_class c "
                            + "WHERE c.relnamespace=?")) {
                ps.setLong(1, ns);
                expect(rows(ps.executeQuery()) >= 2, "sizes");
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT c.relname,a.*,pg_catalog.pg_get_expr(ad.adbin, ad.adrelid, true) as "
                            + "def_value,dsc.description,dep.objid FROM pg_catalog.pg_attribute a "
                            + "INNER JOIN pg_catalog.pg_class c ON (a.attrelid=c.oid) "
                            + "LEFT OUTER JOIN pg_catalog.pg_attrdef ad ON (a.attrelid=ad.adrelid "
                            + "AND a.attnum = ad.adnum) LEFT OUTER JOIN pg_catalog.pg_description dsc "
                            + "ON (c.oid=dsc.objoid AND a.attnum = dsc.objsubid) "
                            + "LEFT OUTER JOIN pg_depend dep on dep.refobjid = a.attrelid AND "
                            + "dep.deptype = 'i' and dep.refobjsubid = a.attnum and "
                            + "dep.classid = dep.refclassid WHERE NOT a.attisdropped AND "
                            + "c.relkind not in ('i','I','c') AND c.oid=? ORDER BY a.attnum")) {
                ps.setLong(1, table);
                ResultSet rs = ps.executeQuery();
                List<String> cols = new ArrayList<>();
                while (rs.next()) cols.add(rs.getString("attname"));
                expect(cols.equals(List.of("ts", "host", "amount")), "columns " + cols);
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT c.oid,c.*,t.relname as tabrelname,rt.relnamespace as refnamespace,"
                            + "d.description FROM pg_catalog.pg_constraint c "
                            + "INNER JOIN pg_catalog.pg_class t ON t.oid=c.conrelid "
                            + "LEFT OUTER JOIN pg_catalog.pg_class rt ON rt.oid=c.confrelid "
                            + "LEFT OUTER JOIN pg_catalog.pg_description d ON d.objoid=c.oid AND "
                            + "d.objsubid=0 AND d.classoid='pg_constraint'::regclass "
                            + "WHERE c.conrelid=? ORDER BY c.oid")) {
                ps.setLong(1, table);
                expect(rows(ps.executeQuery()) == 0, "constraints");
            }
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT i.*,i.indkey as keys,c.relname,c.relnamespace,c.relam,c.reltablespace,"
                            + "tc.relname as tabrelname,dsc.description,"
                            + "pg_catalog.pg_get_expr(i.indpred, i.indrelid) as pred_expr,"
                            + "pg_catalog.pg_get_expr(i.indexprs, i.indrelid, true) as expr,"
                            + "pg_catalog.pg_relation_size(i.indexrelid) as index_rel_size,"
                            + "pg_catalog.pg_stat_get_numscans(i.indexrelid) as index_num_scans "
                            + "FROM pg_catalog.pg_index i "
                            + "INNER JOIN pg_catalog.pg_class c ON c.oid=i.indexrelid "
                            + "INNER JOIN pg_catalog.pg_class tc ON tc.oid=i.indrelid "
                            + "LEFT OUTER JOIN pg_catalog.pg_description dsc ON i.indexrelid=dsc.objoid "
                            + "WHERE i.indrelid=? ORDER BY tc.relname, c.relname")) {
                ps.setLong(1, table);
                expect(rows(ps.executeQuery()) == 0, "indexes");
            }
            // The data editor reads the rows a page at a time.
            try (PreparedStatement ps = conn.prepareStatement(
                    "SELECT * FROM public.jdbc_events LIMIT ? OFFSET ?")) {
                ps.setInt(1, 200);
                ps.setInt(2, 0);
                expect(rows(ps.executeQuery()) >= 17, "a page of rows");
            }
        });

        System.out.printf("%n%d passed, %d failed%n", passed, failed.size());
        for (String f : failed) System.out.println("  failed: " + f);
        System.exit(failed.isEmpty() ? 0 : 1);
    }
}
