// pgJDBC against a running saql server (port in SAQL_PORT): version, DDL, a PreparedStatement
// INSERT reused 12 times (pgJDBC switches to a named server-side statement on the 5th),
// executeBatch counts, timestamps, fetch size (portal suspension) over SELECT and SUBSCRIBE,
// SQLSTATE. Prints PASS/FAIL per check; exit status 1 on any failure.

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

        System.out.printf("%n%d passed, %d failed%n", passed, failed.size());
        for (String f : failed) System.out.println("  failed: " + f);
        System.exit(failed.isEmpty() ? 0 : 1);
    }
}
