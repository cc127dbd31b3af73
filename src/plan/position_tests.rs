//! Errors about a name point at where the statement writes it: the token spans sqlparser
//! recorded, carried through planning (and through DataFusion's column spans), not a search of
//! the statement's text for the first word that looks like the name.

use crate::error::Location;
use crate::Catalog;

fn catalog() -> Catalog {
    Catalog::from_sql(
        "CREATE STREAM events (ts TIMESTAMP NOT NULL, host TEXT, bytes BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
    )
    .unwrap()
}

/// The location of planning `sql`'s error, with its SQLSTATE.
fn error_at(sql: &str) -> (String, Option<Location>) {
    let e = crate::plan(sql, &catalog()).expect_err(sql);
    (e.sqlstate().to_string(), e.location())
}

fn at(line: u64, column: u64) -> Option<Location> {
    Some(Location { line, column })
}

#[test]
fn an_unknown_column_is_found_past_a_string_and_an_alias_of_its_name() {
    // `amount` first appears in a string literal, then as an alias: neither is the column.
    let sql = "SELECT 'amount' AS label, host AS amount, amount FROM events";
    assert_eq!(error_at(sql), ("42703".into(), at(1, 43)));
    let sql = "SELECT host AS amount FROM events WHERE amount > 1";
    assert_eq!(error_at(sql), ("42703".into(), at(1, 41)));
}

#[test]
fn a_name_on_a_later_line_is_pointed_at_on_its_line() {
    let sql = "SELECT host, bytes AS hostname\nFROM events\nWHERE hostname = 'a'";
    assert_eq!(error_at(sql), ("42703".into(), at(3, 7)));
    // A windowed query: the unknown column inside an aggregate, after the same word as a
    // result name.
    let sql = "SELECT host AS nope, window_end,\n  SUM(nope) AS total\n\
               FROM TUMBLE(events, ts, INTERVAL '1' MINUTE)\n\
               GROUP BY host, window_start, window_end";
    assert_eq!(error_at(sql), ("42703".into(), at(2, 7)));
}

#[test]
fn unknown_streams_and_window_columns_point_at_their_names() {
    let sql = "SELECT nowhere FROM nowhere";
    assert_eq!(error_at(sql), ("42P01".into(), at(1, 21)));
    let sql = "SELECT host, window_end FROM TUMBLE(eventz, ts, INTERVAL '1' MINUTE) \
               GROUP BY host, window_start, window_end";
    assert_eq!(error_at(sql), ("42P01".into(), at(1, 37)));
    let sql = "SELECT tz, window_end FROM TUMBLE(events, tz, INTERVAL '1' MINUTE) \
               GROUP BY tz, window_start, window_end";
    assert_eq!(error_at(sql), ("42703".into(), at(1, 43)));
}

#[test]
fn pattern_names_point_at_their_use() {
    let sql = "SELECT * FROM events MATCH_RECOGNIZE (PARTITION BY host ORDER BY ts \
               MEASURES a.ts AS first_ts ONE ROW PER MATCH PATTERN (a b) \
               DEFINE a AS a.host = 'x', b AS b.hots = 'a')";
    let col = sql.find("b.hots").unwrap() as u64 + 3;
    assert_eq!(error_at(sql), ("42703".into(), at(1, col)));
}
