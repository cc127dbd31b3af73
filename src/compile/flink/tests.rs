//! The Flink SQL generated for each construct (golden strings: the differential test in
//! `tests/flink.rs` checks that Flink computes what saql does), and the refusals.

use super::*;
use crate::plan::catalog::normalize;
use crate::sql::{parse_one, Statement};

const STREAMS: &str = "\
    CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, exe TEXT, op TEXT, \
      obj_name TEXT, amount BIGINT, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND);\
    CREATE STREAM m (ts TIMESTAMP NOT NULL, host TEXT, cpu DOUBLE PRECISION, \
      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)";

fn compile(sql: &str) -> Result<FlinkQuery> {
    compile_in(&Catalog::from_sql(STREAMS).unwrap(), sql)
}

fn insert(sql: &str) -> String {
    compile(sql).unwrap().insert
}

fn refusal(sql: &str) -> String {
    let e = compile(sql).unwrap_err();
    assert_eq!(e.sqlstate(), "0A000", "{e}");
    e.to_string()
}

#[test]
fn filter_and_projection() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY q AS SELECT ts, Host, pid AS \"user\" FROM ev \
             WHERE op = 'start' AND exe ILIKE '%cmd.exe'"
        ),
        "INSERT INTO q__sink SELECT ts, host, pid AS `user` FROM ev \
         WHERE op = 'start' AND LOWER(exe) LIKE LOWER('%cmd.exe')"
    );
}

#[test]
fn tumble_with_having() {
    let q = compile(
        "CREATE CONTINUOUS QUERY big AS SELECT host, window_end, SUM(amount) AS sent, \
         AVG(amount) AS mean FROM TUMBLE(ev, ts, INTERVAL '10 seconds') \
         GROUP BY host, window_start, window_end HAVING SUM(amount) > 1000000",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO big__sink SELECT host, window_end, SUM(amount) AS sent, \
         AVG(CAST(amount AS DOUBLE)) AS mean \
         FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) \
         GROUP BY host, window_start, window_end HAVING SUM(amount) > 1000000"
    );
    assert_eq!(
        q.sink,
        "CREATE TABLE big__sink (\n  host STRING,\n  window_end TIMESTAMP(3),\n  \
         sent BIGINT,\n  mean DOUBLE\n) WITH ('connector' = 'filesystem', 'path' = '{path}', \
         'format' = 'csv', 'csv.null-literal' = '')"
    );
    assert_eq!(q.columns, ["host", "window_end", "sent", "mean"]);
    assert_eq!(q.floats, ["mean"]);
}

#[test]
fn hop_and_session_in_tvf_form() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY h AS SELECT host, window_end, COUNT(*) AS n \
             FROM HOP(ev, ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE) \
             GROUP BY host, window_end"
        ),
        "INSERT INTO h__sink SELECT host, window_end, COUNT(*) AS n \
         FROM TABLE(HOP(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)) \
         GROUP BY host, window_end, window_start"
    );
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY s AS SELECT host, window_start, window_end, COUNT(*) AS n \
             FROM SESSION(ev, ts, INTERVAL '30' SECOND) GROUP BY host, window_start, window_end"
        ),
        "INSERT INTO s__sink SELECT host, window_start, window_end, COUNT(*) AS n \
         FROM TABLE(SESSION(TABLE ev PARTITION BY host, DESCRIPTOR(ts), INTERVAL '30' SECOND)) \
         GROUP BY host, window_start, window_end"
    );
}

#[test]
fn history_frames_read_the_previous_row_through_lag() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY spike AS SELECT ts, host, cpu, baseline FROM (\
               SELECT ts, host, cpu, AVG(cpu) OVER w AS baseline, COUNT(cpu) OVER w AS n \
               FROM m WHERE cpu >= 0 \
               WINDOW w AS (PARTITION BY host ORDER BY ts ROWS BETWEEN 10 PRECEDING AND 1 PRECEDING)\
             ) AS t WHERE n = 10 AND cpu > baseline + 25"
        ),
        "INSERT INTO spike__sink SELECT ts, host, cpu, baseline FROM (\
         SELECT ts, host, cpu, \
         AVG(CAST(__saql_prev_0 AS DOUBLE)) OVER (PARTITION BY host ORDER BY ts \
         ROWS BETWEEN 9 PRECEDING AND CURRENT ROW) AS baseline, \
         COUNT(__saql_prev_0) OVER (PARTITION BY host ORDER BY ts \
         ROWS BETWEEN 9 PRECEDING AND CURRENT ROW) AS n \
         FROM (SELECT *, LAG(cpu, 1) OVER (PARTITION BY host ORDER BY ts) AS __saql_prev_0 \
         FROM m WHERE cpu >= 0) AS m) AS t WHERE n = 10 AND cpu > baseline + 25"
    );
}

#[test]
fn history_over_windows_orders_by_window_time() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY surge AS SELECT host, window_end, sent, recent FROM (\
               SELECT host, window_end, sent, AVG(sent) OVER (PARTITION BY host \
                 ORDER BY window_end ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS recent \
               FROM (SELECT host, window_end, SUM(amount) AS sent \
                 FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) \
                 GROUP BY host, window_start, window_end) AS w\
             ) AS t WHERE sent > 10 * recent"
        ),
        "INSERT INTO surge__sink SELECT host, window_end, sent, recent FROM (\
         SELECT host, window_end, sent, AVG(CAST(__saql_prev_0 AS DOUBLE)) OVER \
         (PARTITION BY host ORDER BY window_time ROWS BETWEEN 2 PRECEDING AND CURRENT ROW) \
         AS recent FROM (SELECT *, LAG(sent, 1) OVER (PARTITION BY host ORDER BY window_time) \
         AS __saql_prev_0 FROM (SELECT host, window_end, SUM(amount) AS sent, window_time \
         FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) \
         GROUP BY host, window_start, window_end, window_time) AS w) AS w) AS t \
         WHERE sent > 10 * recent"
    );
}

#[test]
fn frames_to_the_current_row_stay() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY r AS SELECT ts, host, \
             MAX(cpu) OVER (PARTITION BY host ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS top \
             FROM m"
        ),
        "INSERT INTO r__sink SELECT ts, host, MAX(cpu) OVER (PARTITION BY host ORDER BY ts \
         ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS top FROM m"
    );
}

#[test]
fn match_recognize_with_within() {
    let sql = insert(
        "CREATE CONTINUOUS QUERY chain AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts \
           MEASURES C.ts AS started, r.pid AS reader \
           ONE ROW PER MATCH AFTER MATCH SKIP PAST LAST ROW \
           PATTERN (c x*? r{1,3}) WITHIN INTERVAL '10' MINUTE \
           DEFINE c AS op = 'start' AND exe ILIKE '%cmd.exe', \
                  r AS op = 'read' AND pid <> c.pid) AS m",
    );
    assert_eq!(
        sql,
        "INSERT INTO chain__sink SELECT * FROM ev MATCH_RECOGNIZE (\n  \
         PARTITION BY host\n  ORDER BY ts\n  MEASURES c.ts AS started,\n    r.pid AS reader\n  \
         ONE ROW PER MATCH\n  AFTER MATCH SKIP PAST LAST ROW\n  \
         PATTERN (c x*? r{1,3}) WITHIN INTERVAL '600.001' SECOND(3)\n  \
         DEFINE\n    c AS c.op = 'start' AND LOWER(c.exe) LIKE LOWER('%cmd.exe'),\n    \
         r AS r.op = 'read' AND r.pid <> c.pid\n) AS m"
    );
}

#[test]
fn outlier_runs_as_a_model_keyed_by_partition_and_window() {
    let q = compile(
        "CREATE CONTINUOUS QUERY o AS SELECT host, exe, window_end, SUM(amount) AS sent \
         FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) GROUP BY host, exe, window_start, window_end \
         OUTLIER ZSCORE(threshold => 3) ON (sent) PARTITION BY (exe) \
         HAVING is_outlier AND sent > 10",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO o__sink SELECT host, exe, window_end, sent, is_outlier, outlier_score \
         FROM o__model WHERE is_outlier AND sent > 10"
    );
    let m = q.model.unwrap();
    assert_eq!(
        m["select"],
        "SELECT *, exe AS __saql_h0 FROM (SELECT host, exe, window_end, SUM(amount) AS sent, \
         window_time FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '10' SECOND)) \
         GROUP BY host, exe, window_start, window_end, window_time) AS __saql_r"
    );
    // Columns 0-3 are the results, 4 window_time, 5 the PARTITION BY value; window_end is 2.
    assert_eq!(m["partition"], serde_json::json!([5, 2]));
    assert_eq!(m["on"], serde_json::json!([3]));
    assert_eq!(m["width"], 4);
    assert_eq!(m["method"]["name"], "zscore");
    assert_eq!(m["method"]["threshold"], 3.0);
    assert_eq!(
        m["out_types"],
        serde_json::json!([
            "STRING",
            "STRING",
            "TIMESTAMP(3)",
            "BIGINT",
            "BOOLEAN",
            "DOUBLE"
        ])
    );
}

#[test]
fn invariant_runs_as_a_model_over_the_results_in_time_order() {
    let q = compile(
        "CREATE CONTINUOUS QUERY i AS SELECT ts, host, exe FROM ev \
         INVARIANT SET (exe) PER (host) TRAINING INTERVAL '1' MINUTE",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO i__sink SELECT ts, host, exe, violation FROM i__model"
    );
    let m = q.model.unwrap();
    assert_eq!(
        m["select"],
        "SELECT *, exe AS __saql_h0, host AS __saql_h1 FROM (SELECT ts, host, exe FROM ev) \
         AS __saql_r"
    );
    assert_eq!(m["values"], serde_json::json!([3]));
    assert_eq!(m["keys"], serde_json::json!([4]));
    assert_eq!(m["time"], 0);
    assert_eq!(m["set"], true);
    assert_eq!(
        m["training"],
        serde_json::json!({"kind": "interval", "millis": 60000})
    );

    let q = compile(
        "CREATE CONTINUOUS QUERY r AS SELECT host, window_end, SUM(amount) AS sent \
         FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) GROUP BY host, window_start, window_end \
         INVARIANT RANGE (sent) TRAINING 3 WINDOWS ONLINE",
    )
    .unwrap();
    let m = q.model.unwrap();
    // Results 0-2, window_time 3, the value 4; no PER.
    assert_eq!(m["values"], serde_json::json!([4]));
    assert_eq!(m["keys"], serde_json::json!([]));
    assert_eq!(m["time"], 1);
    assert_eq!(m["set"], false);
    assert_eq!(m["online"], true);
    assert_eq!(
        m["training"],
        serde_json::json!({"kind": "windows", "n": 3})
    );
}

#[test]
fn what_flink_lacks_is_refused_by_name() {
    let all_rows = refusal(
        "CREATE CONTINUOUS QUERY a AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts MEASURES CLASSIFIER() AS step \
           ALL ROWS PER MATCH PATTERN (a b) DEFINE a AS op = 'x', b AS op = 'y') AS m",
    );
    assert!(all_rows.contains("ALL ROWS PER MATCH"), "{all_rows}");
    let alternation = refusal(
        "CREATE CONTINUOUS QUERY a AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts MEASURES a.ts AS t \
           PATTERN (a (b | c)) DEFINE a AS op = 'x', b AS op = 'y', c AS op = 'z') AS m",
    );
    assert!(alternation.contains("pattern group"), "{alternation}");
    let timeout = refusal(
        "CREATE CONTINUOUS QUERY a AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts MEASURES a.ts AS t \
           PATTERN (a b) WITHIN INTERVAL '1' MINUTE EMIT TIMEOUT \
           DEFINE a AS op = 'x', b AS op = 'y') AS m",
    );
    assert!(timeout.contains("EMIT TIMEOUT"), "{timeout}");
    let frames = refusal(
        "CREATE CONTINUOUS QUERY f AS SELECT ts, \
         AVG(cpu) OVER (PARTITION BY host ORDER BY ts ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING) AS a, \
         MAX(cpu) OVER (PARTITION BY host ORDER BY ts ROWS BETWEEN 5 PRECEDING AND CURRENT ROW) AS b \
         FROM m",
    );
    assert!(frames.contains("one window"), "{frames}");
    for (clause, named) in [
        ("TRAINING UNTIL TIMESTAMP '2024-01-02'", "UNTIL/BETWEEN"),
        ("TRAINING INTERVAL '1' MINUTE MIN SUPPORT 2", "MIN SUPPORT"),
    ] {
        let e = refusal(&format!(
            "CREATE CONTINUOUS QUERY i AS SELECT ts, host, exe FROM ev \
             INVARIANT SET (exe) PER (host) {clause}"
        ));
        assert!(e.contains(named), "{e}");
    }
    let evidence = refusal(
        "CREATE CONTINUOUS QUERY e AS SELECT host, window_end, EVIDENCE(*) \
         FROM TUMBLE(ev, ts, INTERVAL '10' SECOND) GROUP BY host, window_start, window_end",
    );
    assert!(evidence.contains("evidence()"), "{evidence}");
}

#[test]
fn the_program_holds_every_table_and_insert() {
    let catalog = Catalog::from_sql(STREAMS).unwrap();
    let q = compile("CREATE CONTINUOUS QUERY q AS SELECT ts, host FROM ev WHERE exe LIKE '%\\%'")
        .unwrap();
    let program = FlinkProgram::new(&catalog, vec![q]).unwrap();
    assert_eq!(program.streams.len(), 1);
    let py = program.to_python("q.sql");
    assert!(py.contains("\"ev\": {"), "{py}");
    assert!(
        py.contains("WATERMARK FOR ts AS ts - INTERVAL '2' SECOND"),
        "{py}"
    );
    assert!(py.contains(r#""insert": r"""INSERT INTO q__sink SELECT ts, host FROM ev WHERE exe LIKE '%\%' ESCAPE '\'""","#), "{py}");
    assert!(!py.contains("@TABLES@"));
}

#[test]
fn a_repeated_variable_is_renamed_per_occurrence() {
    let sql = insert(
        "CREATE CONTINUOUS QUERY r AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts MEASURES c.ts AS t \
           PATTERN (a x*? b x*? c) \
           DEFINE a AS op = 'a', x AS x.op <> 'z', b AS op = 'b', c AS op = 'c') AS m",
    );
    assert!(sql.contains("PATTERN (a x*? b x__2*? c)\n"), "{sql}");
    assert!(
        sql.contains("x AS x.op <> 'z',\n    x__2 AS x__2.op <> 'z',"),
        "{sql}"
    );
    let e = refusal(
        "CREATE CONTINUOUS QUERY r AS SELECT * FROM ev MATCH_RECOGNIZE (\
           PARTITION BY host ORDER BY ts MEASURES LAST(x.ts) AS t \
           PATTERN (a x b x) DEFINE a AS op = 'a', b AS op = 'b') AS m",
    );
    assert!(e.contains("more than once"), "{e}");
}

#[test]
fn lag_stays_lag() {
    assert_eq!(
        insert(
            "CREATE CONTINUOUS QUERY l AS SELECT ts, \
             cpu - LAG(cpu, 1) OVER (PARTITION BY host ORDER BY ts) AS delta FROM m"
        ),
        "INSERT INTO l__sink SELECT ts, \
         cpu - LAG(cpu, 1) OVER (PARTITION BY host ORDER BY ts) AS delta FROM m"
    );
}

/// A catalog of [`STREAMS`] and `more`: tables (with their INSERTed rows), views and queries.
fn catalog_with(more: &str) -> Catalog {
    let mut catalog = Catalog::from_sql(STREAMS).unwrap();
    for stmt in crate::sql::parse(more).unwrap() {
        match stmt {
            Statement::CreateTable(ct) => {
                catalog
                    .add_table(crate::plan::TableDef::try_new(&ct).unwrap())
                    .unwrap();
            }
            Statement::CreateQuery(q) => catalog.add_query(normalize(&q.name), q).unwrap(),
            Statement::CreateView(cv) => catalog
                .add_view(crate::plan::catalog::normalize_object(&cv.name), *cv)
                .unwrap(),
            other => panic!("unexpected {other}"),
        }
    }
    catalog
}

const TABLES: &str = "\
    CREATE TABLE owners (host TEXT PRIMARY KEY, owner TEXT NOT NULL, crit INT);\
    CREATE TABLE intel (ip TEXT PRIMARY KEY, tag TEXT, since TIMESTAMP) \
      WITH (version_time = 'since')";

fn compile_in(catalog: &Catalog, sql: &str) -> Result<FlinkQuery> {
    let Statement::CreateQuery(q) = parse_one(sql).unwrap() else {
        panic!("not a query: {sql}")
    };
    compile_query(&q, catalog)
}

#[test]
fn a_lookup_join_reads_the_table_as_of_the_rows_event_time() {
    let catalog = catalog_with(TABLES);
    let q = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT e.ts, e.host, o.owner FROM ev e \
         JOIN owners o ON e.host = o.host WHERE o.crit >= 4",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO q__sink SELECT e.ts, e.host, o.owner FROM ev AS e \
         JOIN owners FOR SYSTEM_TIME AS OF e.ts AS o ON e.host = o.host WHERE o.crit >= 4"
    );
    assert_eq!(q.streams, ["ev"]);
    assert_eq!(
        q.tables,
        [select::TableUse {
            table: "owners".into(),
            versioned: false
        }]
    );
    let left = insert_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM ev LEFT JOIN owners ON ev.host = owners.host",
    );
    assert_eq!(
        left,
        "INSERT INTO q__sink SELECT ev.*, owners.host, owners.owner, owners.crit FROM ev \
         LEFT JOIN owners FOR SYSTEM_TIME AS OF ev.ts AS owners ON ev.host = owners.host"
    );
}

fn insert_in(catalog: &Catalog, sql: &str) -> String {
    compile_in(catalog, sql).unwrap().insert
}

#[test]
fn a_table_becomes_a_versioned_table_holding_its_rows() {
    let catalog = catalog_with(TABLES);
    let owners = catalog.table("owners").unwrap();
    use datafusion::arrow::array::{Int32Array, StringArray};
    let batch = datafusion::arrow::record_batch::RecordBatch::try_new(
        owners.store.schema().clone(),
        vec![
            std::sync::Arc::new(StringArray::from(vec!["web-01", "db-01"])),
            std::sync::Arc::new(StringArray::from(vec!["web, team", ""])),
            std::sync::Arc::new(Int32Array::from(vec![Some(5), None])),
        ],
    )
    .unwrap();
    owners
        .store
        .restore(&[batch], Default::default(), 0)
        .unwrap();
    assert_eq!(
        ddl::reference_table(owners, false).unwrap(),
        "CREATE TABLE owners (\n  host STRING NOT NULL,\n  owner STRING NOT NULL,\n  \
         crit INT,\n  \
         __saql_valid_from AS CAST(TIMESTAMP '1970-01-01 00:00:00' AS TIMESTAMP(3)),\n  \
         WATERMARK FOR __saql_valid_from AS __saql_valid_from,\n  \
         PRIMARY KEY (host) NOT ENFORCED\n) WITH ('connector' = 'filesystem', \
         'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = '')"
    );
    assert_eq!(
        ddl::table_rows(owners).unwrap(),
        "db-01,\"\",\nweb-01,\"web, team\",5\n"
    );
    let intel = ddl::reference_table(catalog.table("intel").unwrap(), true).unwrap();
    assert!(
        intel.starts_with("CREATE TABLE intel__versions ("),
        "{intel}"
    );
    assert!(
        intel.contains(
            "__saql_valid_from AS COALESCE(since, \
             CAST(TIMESTAMP '1970-01-01 00:00:00' AS TIMESTAMP(3)))"
        ),
        "{intel}"
    );
    let q = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT e.ts, e.host, o.owner FROM ev e \
         JOIN owners o ON e.host = o.host",
    )
    .unwrap();
    let program = FlinkProgram::new(&catalog, vec![q]).unwrap();
    assert_eq!(program.tables.len(), 1);
    let py = program.to_python("q.sql");
    assert!(
        py.contains("\"owners\": {\n        \"ddl\": r\"\"\"CREATE TABLE owners ("),
        "{py}"
    );
    assert!(
        py.contains("\"rows\": r\"\"\"db-01,\"\",\nweb-01,\"web, team\",5\n\"\"\""),
        "{py}"
    );
}

#[test]
fn a_temporal_join_reads_the_versions_its_version_time_starts() {
    let catalog = catalog_with(TABLES);
    let q = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT e.ts, e.host, i.tag FROM ev e \
         JOIN intel FOR SYSTEM_TIME AS OF e.ts AS i ON e.obj_name = i.ip",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO q__sink SELECT e.ts, e.host, i.tag FROM ev AS e \
         JOIN intel__versions FOR SYSTEM_TIME AS OF e.ts AS i ON e.obj_name = i.ip"
    );
    assert_eq!(q.tables[0].flink_name(), "intel__versions");
    // A table without version_time: its rows are valid from the start either way.
    let plain = insert_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT e.ts, o.owner FROM ev e \
         LEFT JOIN owners FOR SYSTEM_TIME AS OF e.ts AS o ON e.host = o.host",
    );
    assert!(
        plain.contains("LEFT JOIN owners FOR SYSTEM_TIME AS OF e.ts AS o ON"),
        "{plain}"
    );
}

#[test]
fn watch_and_allow_lists_become_temporal_joins() {
    let catalog = catalog_with(TABLES);
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT ts, host FROM ev \
             WHERE op = 'connect' AND obj_name IN (SELECT ip FROM intel WHERE tag <> 'old')"
        ),
        "INSERT INTO q__sink SELECT ts, host FROM (SELECT ev.* FROM ev AS ev \
         JOIN intel FOR SYSTEM_TIME AS OF ev.ts AS __saql_sub1 \
         ON __saql_sub1.tag <> 'old' AND ev.obj_name = __saql_sub1.ip) AS ev WHERE op = 'connect'"
    );
    // NOT IN: no match; a NULL probe passes only while the table is empty (it is here).
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT e.ts FROM ev e \
             WHERE NOT EXISTS (SELECT 1 FROM owners o WHERE o.host = e.host)"
        ),
        "INSERT INTO q__sink SELECT e.ts FROM (SELECT e.* FROM ev AS e \
         LEFT JOIN owners FOR SYSTEM_TIME AS OF e.ts AS __saql_sub1 \
         ON __saql_sub1.host = e.host WHERE __saql_sub1.host IS NULL) AS e"
    );
}

#[test]
fn interval_joins_keep_flinks_form() {
    let catalog = catalog_with("");
    for (written, flink) in [
        ("JOIN", "JOIN"),
        ("LEFT JOIN", "LEFT JOIN"),
        ("RIGHT OUTER JOIN", "RIGHT JOIN"),
        ("FULL JOIN", "FULL JOIN"),
    ] {
        assert_eq!(
            insert_in(
                &catalog,
                &format!(
                    "CREATE CONTINUOUS QUERY q AS SELECT e.ts, e.host, m.cpu FROM ev e \
                     {written} m ON e.host = m.host \
                     AND m.ts BETWEEN e.ts - INTERVAL '5' SECOND AND e.ts + INTERVAL '30' SECOND"
                )
            ),
            format!(
                "INSERT INTO q__sink SELECT e.ts, e.host, m.cpu FROM ev AS e {flink} m \
                 ON e.host = m.host \
                 AND m.ts BETWEEN e.ts - INTERVAL '5' SECOND AND e.ts + INTERVAL '30' SECOND"
            )
        );
    }
    // Both time columns kept: the sink takes one time attribute, so both are cast.
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT e.ts, m.ts AS metric_ts, m.cpu FROM ev e \
             JOIN m ON e.host = m.host AND m.ts BETWEEN e.ts AND e.ts + INTERVAL '1' SECOND"
        ),
        "INSERT INTO q__sink SELECT CAST(ts AS TIMESTAMP(3)) AS ts, \
         CAST(metric_ts AS TIMESTAMP(3)) AS metric_ts, cpu FROM (SELECT e.ts, \
         m.ts AS metric_ts, m.cpu FROM ev AS e JOIN m ON e.host = m.host \
         AND m.ts BETWEEN e.ts AND e.ts + INTERVAL '1' SECOND) AS __saql_rows"
    );
    // The anti join: the rows no row of the other stream matches within the bound.
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT e.host, e.ts FROM ev e WHERE e.op = 'login' \
             AND NOT EXISTS (SELECT 1 FROM m WHERE m.host = e.host \
             AND m.ts BETWEEN e.ts AND e.ts + INTERVAL '5' SECOND)"
        ),
        "INSERT INTO q__sink SELECT e.host, e.ts FROM (SELECT e.* FROM ev AS e \
         LEFT JOIN m AS __saql_sub1 ON __saql_sub1.host = e.host \
         AND __saql_sub1.ts BETWEEN e.ts AND e.ts + INTERVAL '5' SECOND \
         WHERE __saql_sub1.ts IS NULL) AS e WHERE e.op = 'login'"
    );
}

#[test]
fn window_joins_take_flinks_window_join_form() {
    let catalog = catalog_with("");
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT l.host, l.window_end, l.pid, r.cpu \
             FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) l \
             JOIN TUMBLE(m, ts, INTERVAL '1' MINUTE) r ON l.host = r.host \
             AND l.window_start = r.window_start AND l.window_end = r.window_end"
        ),
        "INSERT INTO q__sink SELECT l.host, l.window_end, l.pid, r.cpu \
         FROM (SELECT * FROM TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS l \
         JOIN (SELECT * FROM TABLE(TUMBLE(TABLE m, DESCRIPTOR(ts), INTERVAL '1' MINUTE))) AS r \
         ON l.host = r.host AND l.window_start = r.window_start AND l.window_end = r.window_end"
    );
    let aggregated = insert_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT l.host, l.window_end, l.n, r.peak FROM \
         (SELECT host, window_start, window_end, COUNT(*) AS n \
          FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end) l \
         LEFT JOIN (SELECT host, window_start, window_end, MAX(cpu) AS peak \
          FROM TUMBLE(m, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end) r \
         ON l.host = r.host AND l.window_start = r.window_start AND l.window_end = r.window_end",
    );
    assert!(
        aggregated.contains(
            "GROUP BY host, window_start, window_end) AS l LEFT JOIN (SELECT host, \
             window_start, window_end, MAX(cpu) AS peak"
        ),
        "{aggregated}"
    );
}

#[test]
fn unions_views_and_queries_over_queries() {
    let catalog = catalog_with(
        "CREATE VIEW activity AS SELECT ts, host FROM ev WHERE op = 'start' \
           UNION ALL SELECT ts, host FROM m WHERE cpu > 90;\
         CREATE CONTINUOUS QUERY starts AS SELECT ts, host, exe FROM ev WHERE op = 'start';\
         CREATE CONTINUOUS QUERY per_minute AS SELECT host, window_end, COUNT(*) AS n \
           FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end",
    );
    assert_eq!(
        insert_in(
            &catalog,
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT ts, host FROM ev \
             UNION ALL SELECT ts, host FROM m) u"
        ),
        "INSERT INTO q__sink SELECT * FROM (SELECT ts, host FROM ev \
         UNION ALL SELECT ts, host FROM m) AS u"
    );
    let q = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT host, window_end, COUNT(*) AS n \
         FROM TUMBLE(activity, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end",
    )
    .unwrap();
    assert_eq!(
        q.insert,
        "INSERT INTO q__sink SELECT host, window_end, COUNT(*) AS n \
         FROM TABLE(TUMBLE(TABLE activity, DESCRIPTOR(ts), INTERVAL '1' MINUTE)) \
         GROUP BY host, window_start, window_end"
    );
    assert_eq!(q.streams, ["ev", "m"]);
    assert_eq!(
        q.views,
        [FlinkView {
            name: "activity".into(),
            ddl: "CREATE TEMPORARY VIEW activity AS SELECT ts, host FROM ev WHERE op = 'start' \
                  UNION ALL SELECT ts, host FROM m WHERE cpu > 90"
                .into()
        }]
    );
    let chained = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT s.ts, s.host, m.cpu FROM starts s JOIN m \
         ON s.host = m.host AND m.ts BETWEEN s.ts AND s.ts + INTERVAL '10' SECOND",
    )
    .unwrap();
    assert!(
        chained.insert.starts_with(
            "INSERT INTO q__sink SELECT s.ts, s.host, m.cpu FROM starts AS s JOIN m ON"
        ),
        "{}",
        chained.insert
    );
    assert_eq!(
        chained.views[0].ddl,
        "CREATE TEMPORARY VIEW starts AS SELECT ts, host, exe FROM ev WHERE op = 'start'"
    );
    let filtered = compile_in(
        &catalog,
        "CREATE CONTINUOUS QUERY q AS SELECT host, window_end FROM per_minute WHERE n > 10",
    )
    .unwrap();
    assert_eq!(
        filtered.insert,
        "INSERT INTO q__sink SELECT host, window_end FROM per_minute WHERE n > 10"
    );
}

#[test]
fn joins_flink_reads_otherwise_are_refused_by_name() {
    let catalog = catalog_with(&format!(
        "{TABLES};\
         CREATE CONTINUOUS QUERY per_minute AS SELECT host, window_end, COUNT(*) AS n \
           FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end;\
         CREATE CONTINUOUS QUERY odd AS SELECT host, window_end, COUNT(*) AS n \
           FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end \
           OUTLIER ZSCORE(threshold => 3) ON (n)",
    ));
    let refused = |sql: &str| {
        let e = compile_in(&catalog, sql).unwrap_err();
        assert_eq!(e.sqlstate(), "0A000", "{e}");
        e.to_string()
    };
    // Flink times a window's results by window_time, saql by window_end.
    let e = refused(
        "CREATE CONTINUOUS QUERY q AS SELECT host, window_end, SUM(n) AS n \
         FROM TUMBLE(per_minute, window_end, INTERVAL '10' MINUTE) \
         GROUP BY host, window_start, window_end",
    );
    assert!(
        e.contains("TUMBLE over \"per_minute\" by \"window_end\""),
        "{e}"
    );
    let e = refused(
        "CREATE CONTINUOUS QUERY q AS SELECT w.host, w.n, o.owner FROM (SELECT host, \
         window_end, COUNT(*) AS n FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) \
         GROUP BY host, window_start, window_end) w JOIN owners o ON w.host = o.host",
    );
    assert!(
        e.contains("a lookup join with table \"owners\" of rows that have no event-time"),
        "{e}"
    );
    let e = refused("CREATE CONTINUOUS QUERY q AS SELECT host, n FROM odd");
    assert!(
        e.contains("reading query \"odd\", whose results pass through OUTLIER"),
        "{e}"
    );
}
