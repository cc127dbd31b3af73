//! Round-trip and error-position tests for the clauses that control a query's alerts
//! (`SUPPRESS`) and the window forms added with them.

use std::time::Duration;

use super::ast::{CreateQuery, Statement};
use super::parse_one;
use super::parser::tests::verified;
use crate::error::Location;

fn create(sql: &str) -> CreateQuery {
    match verified(sql) {
        Statement::CreateQuery(cq) => cq,
        other => panic!("not a continuous query: {other}"),
    }
}

fn error_column(sql: &str) -> (u64, String) {
    let e = parse_one(sql).expect_err(sql);
    let Some(Location { line: 1, column }) = e.location() else {
        panic!("{sql}: no position in {e:?}");
    };
    (column, e.to_string())
}

#[test]
fn suppress_round_trips() {
    let cq = create(
        "CREATE CONTINUOUS QUERY q AS SELECT host, window_end, COUNT(*) AS n \
         FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end \
         SUPPRESS FOR INTERVAL '10' MINUTE PER (host)",
    );
    let s = cq.clauses.suppress.expect("suppress");
    assert_eq!(s.interval, Duration::from_secs(600));
    assert_eq!(s.per.len(), 1);
    // Without PER, in lower case, after another clause, and right after FROM.
    let cq =
        create("create continuous query q as select a from s suppress for interval '90' second");
    let s = cq.clauses.suppress.expect("suppress");
    assert_eq!(s.interval, Duration::from_secs(90));
    assert!(s.per.is_empty());
    assert!(cq.query.to_string().ends_with("FROM s"), "{}", cq.query);
    let cq = create(
        "CREATE CONTINUOUS QUERY q AS SELECT a, b FROM s WHERE a > 1 \
         INVARIANT SET (a) PER (b) TRAINING 2 WINDOWS ONLINE \
         SUPPRESS FOR INTERVAL '1.5' SECOND PER (b, a + 1)",
    );
    assert!(cq.clauses.invariant.is_some());
    assert_eq!(
        cq.clauses.suppress.map(|s| (s.interval, s.per.len())),
        Some((Duration::from_millis(1500), 2))
    );
    verified("EXPLAIN SELECT a FROM s SUPPRESS FOR INTERVAL '1 hour' PER (a)");
    // A column named suppress is still a column; quoted, it is an alias.
    verified("CREATE CONTINUOUS QUERY q AS SELECT suppress FROM s");
    verified("CREATE CONTINUOUS QUERY q AS SELECT a AS \"suppress\" FROM s AS \"suppress\"");
}

#[test]
fn suppress_errors_point_at_the_token() {
    let (col, msg) =
        error_column("CREATE CONTINUOUS QUERY q AS SELECT a FROM s SUPPRESS INTERVAL '1' MINUTE");
    assert_eq!(col, 55, "{msg}");
    assert!(msg.contains("FOR"), "{msg}");
    let (col, msg) = error_column("CREATE CONTINUOUS QUERY q AS SELECT a FROM s SUPPRESS FOR 10");
    assert_eq!(col, 59, "{msg}");
    assert!(msg.contains("INTERVAL"), "{msg}");
    let (col, msg) = error_column(
        "CREATE CONTINUOUS QUERY q AS SELECT a FROM s SUPPRESS FOR INTERVAL '0' SECOND",
    );
    assert_eq!(col, 59, "{msg}");
    assert!(msg.contains("positive"), "{msg}");
    // SUPPRESS comes last: an OUTLIER after it is not read.
    let (col, _) = error_column(
        "CREATE CONTINUOUS QUERY q AS SELECT a FROM s SUPPRESS FOR INTERVAL '1' SECOND \
         OUTLIER IQR() ON (a)",
    );
    assert_eq!(col, 79);
}

#[test]
fn window_forms_round_trip() {
    create(
        "CREATE CONTINUOUS QUERY q AS SELECT host, window_end, COUNT(*) AS n \
         FROM CUMULATE(s, ts, INTERVAL '1' MINUTE, INTERVAL '1' HOUR) \
         GROUP BY host, window_start, window_end",
    );
    create(
        "CREATE CONTINUOUS QUERY q AS SELECT ts, host, window_start, window_end \
         FROM HOP(s, ts, INTERVAL '5' MINUTE, INTERVAL '10' MINUTE) WHERE window_end > ts",
    );
    create(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT host, window_end, n, \
         ROW_NUMBER() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rn \
         FROM (SELECT host, window_start, window_end, COUNT(*) AS n \
         FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end) AS w) \
         AS r WHERE rn <= 3 SUPPRESS FOR INTERVAL '1' HOUR PER (host)",
    );
    for sets in [
        "ROLLUP (region, host)",
        "CUBE (region)",
        "GROUPING SETS ((region), (host), ())",
    ] {
        create(&format!(
            "CREATE CONTINUOUS QUERY q AS SELECT region, host, window_end, COUNT(*) AS n \
             FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY window_start, window_end, {sets}"
        ));
    }
}

#[test]
fn evidence_and_ranks_round_trip() {
    for call in [
        "EVIDENCE(*)",
        "EVIDENCE(*, 5)",
        "EVIDENCE(ts, dst_ip, 10) FILTER (WHERE op = 'login_failed') AS ev",
    ] {
        create(&format!(
            "CREATE CONTINUOUS QUERY q AS SELECT host, window_end, {call} \
             FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end"
        ));
    }
    for f in ["RANK", "DENSE_RANK"] {
        create(&format!(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM (SELECT host, window_end, n, \
             {f}() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rk \
             FROM (SELECT host, window_start, window_end, COUNT(*) AS n \
             FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end) \
             AS w) AS r WHERE rk <= 3"
        ));
    }
}
