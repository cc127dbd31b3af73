//! Round-trip and error-position tests of the front-end parser.

use super::*;
use crate::error::WithSource;
use crate::sql::ast::{OutlierMethod, Subscribe, Training};

/// Parses, prints, parses again: both parses and the second print must agree.
pub(crate) fn verified(sql: &str) -> Statement {
    let stmt = parse_one(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let printed = stmt.to_string();
    let again = parse_one(&printed).unwrap_or_else(|e| panic!("{printed}: {e}"));
    assert_eq!(stmt, again, "round trip of {sql} via {printed}");
    assert_eq!(printed, again.to_string());
    stmt
}

#[test]
fn create_stream_round_trips() {
    let s = verified(
        "CREATE STREAM proc_events (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '5' SECOND) WITH (idle_timeout = '5s')",
    );
    let Statement::CreateStream(cs) = s else {
        panic!("not a stream")
    };
    assert_eq!(cs.columns.len(), 3);
    assert!(cs.columns[0].not_null);
    let wm = cs.watermark.unwrap();
    assert_eq!(wm.delay, std::time::Duration::from_secs(5));
    assert_eq!(cs.options, vec![("idle_timeout".into(), "5s".into())]);
    verified(
        "CREATE STREAM IF NOT EXISTS m (ts TIMESTAMPTZ, v DOUBLE PRECISION, ok BOOLEAN, n INT)",
    );
    verified("CREATE STREAM m (ts TIMESTAMP, WATERMARK FOR ts AS ts)");
    verified("CREATE STREAM m (ts TIMESTAMP, WATERMARK FOR ts AS ts - INTERVAL '10 minutes')");
}

#[test]
fn other_statements_round_trip() {
    verified("CREATE CONTINUOUS QUERY q AS SELECT host, COUNT(*) FROM TUMBLE(s, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end");
    verified("DROP STREAM IF EXISTS s");
    verified("DROP STREAM s CASCADE");
    verified("DROP QUERY q");
    verified("SHOW STREAMS");
    verified("SHOW QUERIES");
    verified("SUBSCRIBE q");
    verified("COPY (SUBSCRIBE q) TO STDOUT");
    verified("COPY (SUBSCRIBE q WITH (SNAPSHOT)) TO STDOUT WITH (FORMAT csv, HEADER)");
    verified("SUBSCRIBE q WITH (SNAPSHOT, SEQ)");
    verified("SUBSCRIBE q FROM 5 WITH (SEQ, PROGRESS)");
    assert_eq!(
        parse_one("SUBSCRIBE q FROM 5 WITH SEQ").unwrap(),
        parse_one("SUBSCRIBE q FROM 5 WITH (SEQ)").unwrap()
    );
    let Statement::Subscribe(sub) =
        verified("SUBSCRIBE (SELECT host, n * 2 AS twice FROM q WHERE n > 3) WITH (PROGRESS)")
    else {
        panic!("not a subscription")
    };
    assert_eq!(sub.query.value, "q");
    assert!(sub.view.is_some() && sub.progress);
    verified("COPY (SUBSCRIBE (SELECT * FROM q WHERE n > 3)) TO STDOUT WITH (FORMAT csv)");
    let err = parse_one("SUBSCRIBE (SELECT * FROM q, r)").unwrap_err();
    assert!(
        err.to_string().contains("reads one continuous query"),
        "{err}"
    );
    assert_eq!(err.location().map(|l| l.column), Some(11), "{err:?}");
    assert_eq!(
        parse_one("subscribe q with (snapshot = true, seq = off)").unwrap(),
        parse_one("SUBSCRIBE q WITH (SNAPSHOT)").unwrap()
    );
    assert_eq!(
        parse_one("COPY (SUBSCRIBE q) TO STDOUT WITH CSV HEADER").unwrap(),
        parse_one("COPY (SUBSCRIBE q) TO STDOUT WITH (FORMAT csv, HEADER true)").unwrap()
    );
    let err = parse_one("SUBSCRIBE q WITH (SNAPSHOT, PROGRES)").unwrap_err();
    assert!(
        err.to_string().contains("unknown SUBSCRIBE option"),
        "{err}"
    );
    assert_eq!(err.location().map(|l| l.column), Some(29), "{err:?}");
    verified("COPY s (a, b) FROM STDIN WITH (FORMAT csv, HEADER true)");
    verified("COPY s FROM STDIN");
    verified("COPY s FROM STDIN WITH (FORMAT binary)");
    verified("INSERT INTO s VALUES (1, 'a')");
    verified("SELECT 1");
    verified("DECLARE c CURSOR FOR SUBSCRIBE q");
    verified("DECLARE c CURSOR FOR SELECT 1");
    verified("FETCH 10 FROM c");
    verified("FETCH ALL FROM c WITH (timeout = '250ms')");
    verified("CLOSE c");
    verified("CLOSE ALL");
    verified("EXPLAIN SELECT a FROM s");
    verified("EXPLAIN (FORMAT JSON) CREATE CONTINUOUS QUERY q AS SELECT a FROM s");
    verified("EXPLAIN q");
    let s = verified(
        "CREATE CONTINUOUS QUERY exfil AS SELECT host, window_end, SUM(amount) AS sent \
         FROM TUMBLE(e, ts, INTERVAL '10' MINUTE) GROUP BY host, window_start, window_end \
         OUTLIER DBSCAN(eps => 100000, min_points => 5) ON (sent) HAVING is_outlier AND sent > 1000000",
    );
    let Statement::CreateQuery(cq) = s else {
        panic!("query")
    };
    let o = cq.clauses.outlier.unwrap();
    assert_eq!(
        o.method,
        OutlierMethod::Dbscan {
            eps: 100000.0,
            min_points: 5
        }
    );
    assert!(o.having.is_some());
    verified("EXPLAIN SELECT a FROM s GROUP BY a OUTLIER ZSCORE(2.5) ON (a, b) PARTITION BY (job)");
    verified("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER IQR() ON (a)");
    let s = verified(
        "CREATE CONTINUOUS QUERY children AS SELECT host, exe, obj_name AS child FROM e \
         WHERE op = 'start' INVARIANT SET (child) PER (host, exe) TRAINING INTERVAL '10' MINUTE",
    );
    let Statement::CreateQuery(cq) = s else {
        panic!("query")
    };
    let inv = cq.clauses.invariant.unwrap();
    assert_eq!(
        inv.training,
        Training::Interval(std::time::Duration::from_secs(600))
    );
    assert!(!inv.online);
    verified("EXPLAIN SELECT a FROM s INVARIANT RANGE (a) TRAINING 3 WINDOWS ONLINE");
    assert!(parse_one("SELECT 1; CREATE CONTINUOUS QUERY q AS SELECT a FROM s INVARIANT SET (a) TRAINING 0 WINDOWS").is_err());
    // A clean period the user names, and training that discounts rare values.
    let s = verified(
        "CREATE CONTINUOUS QUERY q AS SELECT ts, a FROM s INVARIANT SET (a) \
         TRAINING BETWEEN TIMESTAMP '2024-01-01' AND '2024-01-02 06:30:00.25' MIN SUPPORT 3 ONLINE",
    );
    let Statement::CreateQuery(cq) = s else {
        panic!("query")
    };
    let inv = cq.clauses.invariant.unwrap();
    let day = 86_400_000_000_000i64 * 19_723; // 2024-01-01 in days since 1970
    assert_eq!(
        inv.training,
        Training::Between {
            from: Some(day),
            until: day + 86_400_000_000_000 + 23_400_250_000_000
        }
    );
    assert_eq!((inv.min_support, inv.online), (3, true));
    verified("EXPLAIN SELECT ts, a FROM s INVARIANT SET (a) TRAINING UNTIL TIMESTAMP '2024-01-01 10:00:00'");
    for (sql, at) in [
        (
            "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING UNTIL 'yesterday'",
            59,
        ),
        (
            "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING BETWEEN '2024-01-02' AND '2024-01-01'",
            78,
        ),
        (
            "EXPLAIN SELECT ts FROM s INVARIANT SET (a) TRAINING INTERVAL '1' MINUTE MIN SUPPORT 0",
            85,
        ),
    ] {
        let e = parse_one(sql).unwrap_err();
        assert_eq!(e.location().map(|l| l.column), Some(at), "{sql}: {e}");
    }
    let e = parse_one("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER LOF(3) ON (a)")
        .unwrap_err();
    assert_eq!(
        e.location(),
        Some(Location {
            line: 1,
            column: 54
        })
    );
    assert!(
        parse_one("CREATE CONTINUOUS QUERY q AS SELECT a FROM s OUTLIER DBSCAN(1) ON (a)").is_err()
    );
    // What psql sends with \set FETCH_COUNT.
    let Statement::DeclareCursor { target, .. } =
        parse_one("DECLARE _psql_cursor NO SCROLL CURSOR FOR SUBSCRIBE q").unwrap()
    else {
        panic!("not a cursor")
    };
    assert!(matches!(
        *target,
        Statement::Subscribe(Subscribe { copy: None, .. })
    ));
    assert_eq!(
        parse_one("FETCH FORWARD 1 FROM _psql_cursor").unwrap(),
        parse_one("FETCH 1 _psql_cursor").unwrap()
    );
}

#[test]
fn create_source_round_trips() {
    let s = verified(
        "CREATE SOURCE f FROM FILE '/var/log/it''s.jsonl' (format = 'json', follow = true) \
         INTO STREAM s (pid PATH 'proc.pid', exe PATH 'proc.exe')",
    );
    let Statement::CreateSource(cs) = s else {
        panic!("not a source")
    };
    assert_eq!(
        cs.connector,
        SourceConnector::File("/var/log/it's.jsonl".into())
    );
    assert_eq!(cs.options[1], ("follow".to_string(), "true".to_string()));
    assert_eq!(cs.paths.len(), 2);
    verified("CREATE SOURCE IF NOT EXISTS k FROM KAFKA (brokers = '127.0.0.1:9092', topic = 't') INTO STREAM s");
    verified("DROP SOURCE IF EXISTS f");
    assert_eq!(parse_one("show sources").unwrap(), Statement::ShowSources);
    let e = parse_one("CREATE SOURCE f FROM SOCKET 'x' INTO STREAM s").unwrap_err();
    assert!(e.to_string().contains("expected FILE or KAFKA"), "{e}");
    let e = parse_one("CREATE SOURCE f FROM FILE x INTO STREAM s").unwrap_err();
    assert!(e.to_string().contains("quoted string"), "{e}");
}

#[test]
fn legacy_copy_options() {
    let Statement::CopyFrom(c) = parse_one("COPY s FROM STDIN CSV HEADER").unwrap() else {
        panic!("not a copy")
    };
    assert!(c.csv && c.header);
}

#[test]
fn several_statements() {
    let stmts = parse("SHOW STREAMS; ;SELECT 1;").unwrap();
    assert_eq!(stmts.len(), 2);
}

#[test]
fn row_pattern_recognition_constructs_round_trip() {
    let sql = "CREATE CONTINUOUS QUERY ev AS SELECT * FROM s MATCH_RECOGNIZE(\
               PARTITION BY host ORDER BY ts \
               MEASURES CLASSIFIER() AS step, MATCH_NUMBER() AS n, RUNNING COUNT(*) AS so_far, \
               final Last(u.v) AS fin, RUNNING sum(a.v) AS s \
               ALL ROWS PER MATCH WITH UNMATCHED ROWS AFTER MATCH SKIP TO u \
               PATTERN (^ a {- x -}*? PERMUTE(b, c) (d | {- e -}) $) \
               SUBSET u = (a, b), w = (c, d) WITHIN INTERVAL '1' MINUTE \
               DEFINE a AS CLASSIFIER() = 'a', b AS b.v > FIRST(u.v))";
    let Statement::CreateQuery(cq) = verified(sql) else {
        panic!("not a query")
    };
    // ALTER takes the same body, WITHIN and SUBSET included.
    let altered = sql.replace("CREATE CONTINUOUS QUERY", "ALTER CONTINUOUS QUERY");
    let Statement::AlterQuery(alter) = verified(&altered) else {
        panic!("not an ALTER")
    };
    assert_eq!(alter.clauses, cq.clauses);
    assert_eq!(cq.clauses.subsets[1].to_string(), "w = (c, d)");
    let printed = cq.to_string();
    for part in [
        "RUNNING COUNT(*) AS so_far",
        "FINAL Last(u.v) AS fin",
        "ALL ROWS PER MATCH WITH UNMATCHED ROWS",
        // SKIP TO v is SQL:2016's shorthand for SKIP TO LAST v.
        "AFTER MATCH SKIP TO LAST u",
        "PATTERN (^ a {- x -}*? PERMUTE(b, c) (d | {- e -}) $) \
         SUBSET u = (a, b), w = (c, d) WITHIN INTERVAL '1' MINUTE DEFINE",
    ] {
        assert!(printed.contains(part), "{part} in {printed}");
    }
    // The other orders of the lifted clauses, and lower-case keywords.
    verified(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
         MEASURES final count(*) AS n ALL ROWS PER MATCH OMIT EMPTY MATCHES \
         PATTERN (permute(a, b) c*) WITHIN INTERVAL '5' SECOND SUBSET u = (a) \
         DEFINE a AS v > 0)",
    );
    let Statement::CreateQuery(cq) = verified(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
         MEASURES PREV(LAST(a.v, 1), 2) AS p, NEXT(v) AS n PATTERN (a b) \
         WITHIN INTERVAL '5' SECOND EMIT TIMEOUT DEFINE a AS v > LAST(a.v, 1))",
    ) else {
        panic!("not a query")
    };
    assert!(cq.clauses.emit_timeout);
    assert!(cq
        .to_string()
        .contains("WITHIN INTERVAL '5' SECOND EMIT TIMEOUT DEFINE"));
    verified(
        "EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.v AS v \
         ALL ROWS PER MATCH SHOW EMPTY MATCHES PATTERN (a*) DEFINE a AS v > 0)",
    );
}

#[test]
fn patterns_sqlparser_does_not_read_round_trip() {
    // Trino's suite writes these: the empty pattern, `$A$` (not a dollar-quoted string), `{,}`,
    // `{,n}`, exclusions of patterns, nested and quantified, and quantified anchors.
    for pattern in [
        "() | A",
        "$A$",
        "B{,}?",
        "B{,2}",
        "A {- {- B+ -} C+ -}",
        "A B+ {- ()* -} C+",
        "A {- B -}{1,2} {- C -}*",
        "(B ()*)*?",
        "^+ | B",
        "$* | B",
        "PERMUTE(B, C)",
    ] {
        let sql = format!(
            "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
             MEASURES CLASSIFIER() AS c ALL ROWS PER MATCH PATTERN ({pattern}) \
             DEFINE B AS v > 0)"
        );
        let Statement::CreateQuery(cq) = verified(&sql) else {
            panic!("not a query")
        };
        assert!(cq.clauses.pattern.is_some(), "{sql}");
    }
}

#[test]
fn match_recognize_refusals_point_at_the_pattern() {
    // Two MATCH_RECOGNIZE in one query: 0A000 at the second pattern.
    let sql = "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
               PATTERN (a) DEFINE a AS true) AS x, s MATCH_RECOGNIZE(ORDER BY ts PATTERN (b) \
               DEFINE b AS true) AS y";
    let err = parse_one(sql).unwrap_err();
    assert_eq!(err.sqlstate(), "0A000", "{err}");
    let col = sql.find("PATTERN (b)").unwrap() as u64 + 10;
    assert_eq!(err.location().map(|l| l.column), Some(col), "{err}");
    // An ad hoc SELECT: MATCH_RECOGNIZE is for continuous queries.
    let err =
        parse_one("SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts PATTERN (a) DEFINE a AS true)")
            .unwrap_err();
    assert_eq!(err.sqlstate(), "0A000", "{err}");
    assert!(err.to_string().contains("continuous queries only"), "{err}");
    // A syntax error inside the pattern points into it.
    let err = parse_one(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
         PATTERN (a {- b) DEFINE a AS true)",
    )
    .unwrap_err();
    assert_eq!(err.sqlstate(), "42601", "{err}");
    assert!(err.to_string().contains("\"-}\""), "{err}");
}

#[test]
fn row_pattern_errors_point_at_the_token() {
    // A SUBSET without its parentheses.
    let err = parse_one(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
         MEASURES a.v AS v PATTERN (a) SUBSET u = a DEFINE a AS v > 0)",
    )
    .unwrap_err();
    assert_eq!(err.sqlstate(), "42601");
    assert_eq!(err.location().map(|l| l.column), Some(115), "{err}");
    // SUBSET outside a continuous query.
    let err = parse_one(
        "SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.v AS v\n  PATTERN (a) \
         SUBSET u = (a) DEFINE a AS v > 0)",
    )
    .unwrap_err();
    assert!(err
        .to_string()
        .contains("SUBSET is supported in continuous queries only"));
    let loc = err.location().unwrap();
    assert_eq!((loc.line, loc.column), (2, 15), "{err}");
    // Something else between PATTERN and DEFINE.
    let err = parse_one(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts \
         MEASURES a.v AS v PATTERN (a) SUBSET u = (a) FOO DEFINE a AS v > 0)",
    )
    .unwrap_err();
    assert_eq!(err.sqlstate(), "42601");
    assert_eq!(err.location().map(|l| l.column), Some(119), "{err}");
}

#[test]
fn match_recognize_round_trips_with_within() {
    let sql = "CREATE CONTINUOUS QUERY theft AS SELECT * FROM proc_events MATCH_RECOGNIZE(\
               PARTITION BY host ORDER BY ts \
               MEASURES FIRST(w.ts) AS started, COUNT(x.*) AS noise \
               ONE ROW PER MATCH AFTER MATCH SKIP TO LAST r \
               PATTERN (w x*? (r | q){1,3}? s+) WITHIN INTERVAL '10' MINUTE \
               DEFINE w AS op = 'write', r AS r.pid = w.obj_pid, s AS PREV(amount) > 1) AS m";
    let Statement::CreateQuery(cq) = verified(sql) else {
        panic!("not a query")
    };
    assert_eq!(
        cq.clauses.within.as_ref().map(|w| w.to_string()).as_deref(),
        Some("INTERVAL '10' MINUTE")
    );
    let printed = cq.to_string();
    assert!(
        printed.contains("PATTERN (w x*? (r | q){1,3}? s+) WITHIN INTERVAL '10' MINUTE DEFINE"),
        "{printed}"
    );
    // Without WITHIN, and as EXPLAIN of a SELECT.
    verified("EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x PATTERN (a b) DEFINE a AS x > 1)");
    let Statement::Explain {
        target: ExplainTarget::Query(_, clauses),
        ..
    } = verified(
        "EXPLAIN SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x \
         PATTERN (a b) WITHIN INTERVAL '5' SECOND DEFINE a AS x > 1)",
    )
    else {
        panic!("not an explain")
    };
    assert!(clauses.within.is_some());
}

#[test]
fn within_errors_point_at_the_token() {
    // WITHIN outside a continuous query.
    let e = parse(
        "SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x\n  PATTERN (a) WITHIN INTERVAL '1' SECOND DEFINE a AS x > 1)",
    )
    .unwrap_err();
    assert_eq!(
        e.location(),
        Some(Location {
            line: 2,
            column: 15
        })
    );
    assert!(e.to_string().contains("continuous queries only"), "{e}");
    // A WITHIN that is not an interval.
    let e = parse(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts MEASURES a.x AS x PATTERN (a) WITHIN 5 DEFINE a AS x > 1)",
    )
    .unwrap_err();
    assert_eq!(e.sqlstate(), "42601");
    assert!(e.location().is_some(), "{e}");
    // No DEFINE after WITHIN.
    let e = parse(
        "CREATE CONTINUOUS QUERY q AS SELECT * FROM s MATCH_RECOGNIZE(ORDER BY ts PATTERN (a) WITHIN INTERVAL '1' SECOND)",
    )
    .unwrap_err();
    assert!(e.to_string().contains("DEFINE"), "{e}");
}

#[test]
fn errors_point_at_the_token() {
    let sql = "CREATE STREAM s (ts TIMESTAMP,\n  WATERMARK FOR ts AS ts * 2)";
    let e = parse(sql).unwrap_err();
    assert_eq!(e.sqlstate(), "42601");
    assert_eq!(
        e.location(),
        Some(Location {
            line: 2,
            column: 23
        })
    );
    let rendered = WithSource {
        error: &e,
        source: sql,
    }
    .to_string();
    assert!(
        rendered.ends_with("  WATERMARK FOR ts AS ts * 2)\n                      ^"),
        "{rendered}"
    );

    let e = parse("SELECT 1 2").unwrap_err();
    assert_eq!(
        e.location(),
        Some(Location {
            line: 1,
            column: 10
        })
    );
    let e = parse("SELEC 1").unwrap_err();
    assert_eq!(e.sqlstate(), "42601");
    assert_eq!(e.location(), Some(Location { line: 1, column: 1 }));
}
