#![cfg(feature = "server")]
//! The `saql` binary's offline commands, run as a user runs them: `run` over the fixtures in
//! `tests/data/` (expected output computed by hand below), `test` over `queries/`, and `check`
//! against the golden file `tests/golden/check_errors.out`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Runs `saql ARGS` in the crate's root, so paths in messages are relative to it.
fn saql(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_saql"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("RUST_LOG", "warn")
        .output()
        .expect("saql runs")
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `failures` over `tests/data/logins.csv`: a 10-second TUMBLE of the rows with `ok` false.
/// [00:00:00, 00:00:10): web fails at 01, 02 and 09.5 (root each time; alice's login at 04
/// succeeded), db at 03.25 ("smith, j", quoted for its comma). [00:00:10, 00:00:20): web at
/// 12 with no user (MIN of NULL is NULL, an empty field), db at 15. Groups come out in the
/// order they first appeared in their window.
const FAILURES: &str = "\
host,window_end,failures,first_user
web,2024-01-01 00:00:10,3,root
db,2024-01-01 00:00:10,1,\"smith, j\"
web,2024-01-01 00:00:20,1,
db,2024-01-01 00:00:20,1,\"smith, j\"
";

/// `denied` (tests/data/denied.sql): the failed logins on host db, timestamps with their
/// fraction (03.25 prints as PostgreSQL prints it, trailing zeros dropped).
const DENIED: &str = "\
ts,host,user_name
2024-01-01 00:00:03.25,db,\"smith, j\"
2024-01-01 00:00:15,db,\"smith, j\"
";

fn run_ok(args: &[&str]) -> String {
    let out = saql(args);
    assert!(out.status.success(), "saql {args:?}: {}", stderr(&out));
    stdout(&out)
}

#[test]
fn run_csv_through_a_tumble_query() {
    let out = run_ok(&[
        "run",
        "tests/data/logins.sql",
        "--input",
        "logins=tests/data/logins.csv",
    ]);
    assert_eq!(out, FAILURES);
}

#[test]
fn run_json_lines_and_gzip_give_the_same_rows() {
    let out = run_ok(&[
        "run",
        "tests/data/logins.sql",
        "--input",
        "logins=tests/data/logins.jsonl",
    ]);
    assert_eq!(out, FAILURES);

    let dir = tempfile::tempdir().unwrap();
    for (name, source) in [
        ("logins.csv.gz", "tests/data/logins.csv"),
        ("logins.jsonl.gz", "tests/data/logins.jsonl"),
    ] {
        let path = dir.path().join(name);
        let file = std::fs::File::create(&path).unwrap();
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::default());
        gz.write_all(&std::fs::read(root().join(source)).unwrap())
            .unwrap();
        gz.finish().unwrap();
        let input = format!("logins={}", path.display());
        let out = run_ok(&["run", "tests/data/logins.sql", "--input", &input]);
        assert_eq!(out, FAILURES, "{name}");
    }
}

#[test]
fn run_merges_inputs_in_event_time_order() {
    // The rows of logins.csv split by host (db's columns in another order). Read one file
    // after the other, web's row at 00:00:12 would close the first window before db's row
    // at 00:00:03.25 arrived, and db's first failure would be lost as late.
    let args = [
        "run",
        "tests/data/logins.sql",
        "--input",
        "logins=tests/data/logins_web.csv",
        "--input",
        "logins=tests/data/logins_db.csv",
    ];
    let first = saql(&args);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), FAILURES);
    let second = saql(&args);
    assert_eq!(
        first.stdout, second.stdout,
        "the same files give the same bytes"
    );
}

#[test]
fn run_several_queries_to_stdout_and_to_files() {
    let files = ["tests/data/logins.sql", "tests/data/denied.sql"];
    let input = "logins=tests/data/logins.csv";
    let out = run_ok(&["run", files[0], files[1], "--input", input]);
    assert_eq!(
        out,
        format!("-- query failures\n{FAILURES}-- query denied\n{DENIED}")
    );

    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    let results_arg = results.display().to_string();
    let out = run_ok(&[
        "run",
        files[0],
        files[1],
        "--input",
        input,
        "--output",
        &results_arg,
    ]);
    assert_eq!(out, "", "nothing on stdout with --output");
    let read = |name: &str| std::fs::read_to_string(results.join(name)).unwrap();
    assert_eq!(read("failures.csv"), FAILURES);
    assert_eq!(read("denied.csv"), DENIED);
}

#[test]
fn run_stops_at_a_bad_line_unless_told_to_skip_it() {
    // logins_bad.csv is logins.csv with one more row, on line 4, whose `ok` is "maybe".
    let args = [
        "run",
        "tests/data/logins.sql",
        "--input",
        "logins=tests/data/logins_bad.csv",
    ];
    let out = saql(&args);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains(
            "tests/data/logins_bad.csv:4: invalid input syntax for type boolean: \"maybe\", \
             column \"ok\""
        ),
        "{}",
        stderr(&out)
    );

    let mut skipping = args.to_vec();
    skipping.push("--skip-bad-rows");
    let out = saql(&skipping);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), FAILURES);
    let err = stderr(&out);
    assert!(err.contains("skipped 1 bad input line"), "{err}");
    assert!(err.contains("tests/data/logins_bad.csv:4:"), "{err}");
    assert_eq!(err.lines().count(), 1, "one summary line: {err}");
}

/// A reference table given as an input is filled before any event: its rows are upserts by
/// key (carol's later row replaces alice's), the lookup join reads them from the first
/// event on, and a row that breaks the table's NOT NULL stops the run at its line.
#[test]
fn run_fills_a_table_input_before_the_events() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let sql = write(
        "q.sql",
        "CREATE STREAM events (ts TIMESTAMP NOT NULL, key BIGINT, amount BIGINT, \
         WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);\n\
         CREATE TABLE assets (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, crit INT NOT NULL);\n\
         INSERT INTO assets VALUES (3, 'dave', 1);\n\
         CREATE CONTINUOUS QUERY enriched AS SELECT e.ts, e.key, a.owner, a.crit \
         FROM events e JOIN assets a ON e.key = a.id;\n",
    );
    let assets = write(
        "assets.csv",
        "id,owner,crit\n1,alice,3\n2,bob,5\n1,carol,4\n",
    );
    let events = write(
        "events.csv",
        "ts,key,amount\n2024-01-01 00:00:00,1,10\n2024-01-01 00:00:01,2,20\n\
         2024-01-01 00:00:02,3,30\n2024-01-01 00:00:03,4,40\n",
    );
    // The table listed after the stream still fills first.
    let out = run_ok(&[
        "run",
        &sql,
        "--input",
        &format!("events={events}"),
        "--input",
        &format!("assets={assets}"),
    ]);
    assert_eq!(
        out,
        "ts,key,owner,crit\n2024-01-01 00:00:00,1,carol,4\n2024-01-01 00:00:01,2,bob,5\n\
         2024-01-01 00:00:02,3,dave,1\n"
    );

    let bad = write("bad.csv", "id,owner,crit\n1,alice,3\n2,bob,\n");
    let out = saql(&["run", &sql, "--input", &format!("assets={bad}")]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("bad.csv:3: null value in column \"crit\""),
        "{err}"
    );
}

#[test]
fn run_rejects_unknown_header_names_and_other_statements() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("odd.csv");
    std::fs::write(&csv, "ts,host,colour,size\n2024-01-01 00:00:01,web,red,3\n").unwrap();
    let input = format!("logins={}", csv.display());
    let out = saql(&["run", "tests/data/logins.sql", "--input", &input]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(":1: unknown columns \"colour\", \"size\""),
        "{err}"
    );

    let sql = dir.path().join("insert.sql");
    std::fs::write(&sql, "SHOW STREAMS;\n").unwrap();
    let sql_arg = sql.display().to_string();
    let out = saql(&["run", "tests/data/logins.sql", &sql_arg]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains("insert.sql:1:1: saql run runs only CREATE STREAM"),
        "{err}"
    );
}

#[test]
fn test_passes_on_the_queries_folder() {
    let out = saql(&["test", "queries/"]);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    let last = text.lines().last().unwrap_or_default();
    let passed: u32 = last
        .strip_suffix(" passed, 0 failed")
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("last line: {last:?}"));
    assert!(passed >= 8, "two cases per query at least: {text}");
    assert!(text.lines().all(|l| !l.starts_with("FAIL")), "{text}");
}

#[test]
fn test_reports_a_wrong_expectation() {
    let dir = tempfile::tempdir().unwrap();
    let query = root().join("queries/failed_logins.sql");
    let text = std::fs::read_to_string(&query).unwrap();
    let wrong = text.replacen(
        "web-1,root,2024-01-01 00:01:00,10",
        "web-1,root,2024-01-01 00:01:00,11",
        1,
    );
    assert_ne!(text, wrong, "the fixture's expectation is still there");
    let file = dir.path().join("failed_logins.sql");
    std::fs::write(&file, wrong).unwrap();
    let file_arg = file.display().to_string();
    let out = saql(&["test", "queries/00_streams.sql", &file_arg]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains(&format!(
            "FAIL {file_arg}: failed_logins: ten failures within a minute fire once"
        )),
        "{text}"
    );
    assert!(
        text.contains("missing:    web-1,root,2024-01-01 00:01:00,11"),
        "{text}"
    );
    assert!(
        text.contains("unexpected: web-1,root,2024-01-01 00:01:00,10"),
        "{text}"
    );
    assert!(text.ends_with(" passed, 1 failed\n"), "{text}");
}

/// Views in query files: `run`, `test` and `check` create them with the queries, in the order
/// they read each other whatever the files' order (a query reading a view of a later file, a
/// view reading a query of the fixture's).
#[test]
fn views_in_query_files_are_created_in_the_order_they_are_read() {
    let dir = tempfile::tempdir().unwrap();
    let reader = dir.path().join("a_reader.sql");
    std::fs::write(
        &reader,
        "\
-- test: failed logins per window, from a view over the failures query
-- input logins:
--   ts,host,user_name,ok
--   2024-01-01 00:00:01,web,root,false
--   2024-01-01 00:00:02,web,root,false
--   2024-01-01 00:00:03,db,bob,false
--   2024-01-01 00:00:04,web,alice,true
-- expect:
--   host,window_end,failures
--   web,2024-01-01 00:00:10,2
CREATE CONTINUOUS QUERY busy_failures AS
SELECT host, window_end, failures FROM repeated;
",
    )
    .unwrap();
    let view = dir.path().join("b_view.sql");
    std::fs::write(
        &view,
        "-- Windows with more than one failure.\n\
         CREATE VIEW repeated AS SELECT host, window_end, failures FROM failures \
         WHERE failures > 1;\n",
    )
    .unwrap();
    let (reader, view) = (reader.display().to_string(), view.display().to_string());
    let files = ["tests/data/logins.sql", reader.as_str(), view.as_str()];

    let mut args = vec!["test"];
    args.extend(files);
    let out = saql(&args);
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(text.ends_with("1 passed, 0 failed\n"), "{text}");

    let mut args = vec!["run"];
    args.extend(files);
    args.extend(["--input", "logins=tests/data/logins.csv"]);
    let text = run_ok(&args);
    assert!(
        text.contains(
            "-- query busy_failures\nhost,window_end,failures\nweb,2024-01-01 00:00:10,3\n"
        ),
        "{text}"
    );

    let mut args = vec!["check"];
    args.extend(files);
    let out = saql(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out), "ok: 4 statements in 3 files\n");
}

#[test]
fn check_errors_match_the_golden_file() {
    let out = saql(&["check", "tests/golden/check_errors.sql"]);
    assert_eq!(out.status.code(), Some(1));
    let expected = std::fs::read_to_string(root().join("tests/golden/check_errors.out")).unwrap();
    assert_eq!(stderr(&out), expected);
}

#[test]
fn check_passes_on_the_queries() {
    let mut args = vec!["check".to_string()];
    let mut files: Vec<PathBuf> = std::fs::read_dir(root().join("queries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    args.extend(files.iter().map(|p| relative(p)));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = saql(&args);
    assert!(out.status.success(), "{}", stderr(&out));
}

fn relative(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// Logs to a pipe or a file are plain text: no ANSI colour codes when stderr is not a
/// terminal (here the server fails to start on a port that is taken, after logging).
#[test]
fn logs_to_a_pipe_carry_no_colour_codes() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_saql"))
        .args([
            "serve",
            "--listen",
            &taken.local_addr().unwrap().to_string(),
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .env("RUST_LOG", "info")
        .env_remove("SAQL_USERS")
        .output()
        .expect("saql runs");
    let text = stderr(&out);
    assert!(!out.status.success(), "{text}");
    assert!(text.contains("INFO"), "something was logged: {text}");
    assert!(!text.contains('\u{1b}'), "colour codes in a pipe: {text:?}");
}
