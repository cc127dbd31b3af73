//! Tests of [`super::Operator::state_bytes`] for every stateful operator family: the bytes a
//! planned query's operators report grow as they take on state (groups, sessions, partitions,
//! buffered rows, learned values) and fall when the watermark lets them emit and forget it.

use super::test_run::Run;

/// `n` rows at second `at`, keys `from..from + n`, values `v`.
fn keyed(at: i64, from: i64, n: i64, v: i64) -> Vec<(i64, i64, Option<i64>)> {
    (from..from + n).map(|k| (at, k, Some(v))).collect()
}

/// Feeds `rounds` batches of new keys at second `at` with a watermark that completes nothing
/// and checks that the state grows with each; returns the last size.
fn grows(run: &mut Run, at: i64, rounds: i64) -> usize {
    let mut last = run.bytes();
    for r in 0..rounds {
        run.feed(&keyed(at, r * 1000, 1000, r), at - 10);
        let now = run.bytes();
        assert!(now > last, "round {r}: {now} bytes after {last}");
        last = now;
    }
    last
}

#[test]
fn stateless_operators_hold_nothing() {
    let mut run = Run::new("SELECT ts, v + 1 AS w FROM s WHERE k > 3");
    run.feed(&keyed(1, 0, 100, 1), 0);
    assert_eq!(run.bytes(), 0);
}

#[test]
fn window_aggregates_grow_with_groups_and_shrink_when_windows_close() {
    for from in [
        "TUMBLE(s, ts, INTERVAL '1' MINUTE)",
        "HOP(s, ts, INTERVAL '20' SECOND, INTERVAL '1' MINUTE)",
    ] {
        let mut run = Run::new(&format!(
            "SELECT k, window_end, COUNT(*) AS n, SUM(v) AS total FROM {from} \
             GROUP BY k, window_start, window_end"
        ));
        let peak = grows(&mut run, 30, 4);
        run.feed(&[], 200);
        let after = run.bytes();
        assert!(
            after < peak / 2,
            "{from}: {after} bytes of {peak} after every window closed"
        );
    }
}

#[test]
fn session_windows_grow_with_sessions_and_shrink_when_they_close() {
    let mut run = Run::new(
        "SELECT k, window_end, COUNT(*) AS n FROM SESSION(s, ts, INTERVAL '10' SECOND) \
         GROUP BY k, window_start, window_end",
    );
    let peak = grows(&mut run, 30, 4);
    run.feed(&[], 200);
    // The keys stay interned; their sessions' accumulators are gone.
    assert!(run.bytes() < peak, "{} of {peak}", run.bytes());
}

#[test]
fn history_grows_with_partitions_and_waiting_rows() {
    let mut run = Run::new("SELECT ts, k, LAG(v) OVER (PARTITION BY k ORDER BY ts) AS prev FROM s");
    // Rows wait for the watermark: their bytes count.
    grows(&mut run, 30, 3);
    // Released, they leave a partition per key with its last value.
    run.feed(&[], 100);
    let released = run.bytes();
    // More rows of the same keys wait, then leave the partitions as large as they were.
    run.feed(&keyed(150, 0, 3000, 7), 100);
    assert!(run.bytes() > released);
    run.feed(&[], 200);
    let again = run.bytes();
    assert!(
        again <= released + released / 10,
        "{again} after {released}"
    );
}

#[test]
fn patterns_grow_with_open_attempts_and_shrink_when_they_end() {
    let mut run = Run::new(
        "SELECT * FROM s MATCH_RECOGNIZE (PARTITION BY k ORDER BY ts \
         MEASURES COUNT(*) AS n ONE ROW PER MATCH PATTERN (a+ b) \
         DEFINE a AS a.v >= 0, b AS b.v < 0)",
    );
    let mut last = 0;
    for second in 1..4 {
        run.feed(&keyed(second, 0, 500, 1), second);
        let now = run.bytes();
        assert!(now > last, "second {second}: {now} after {last}");
        last = now;
    }
    // Every attempt ends in a match.
    run.feed(&keyed(10, 0, 500, -1), 20);
    assert!(run.bytes() < last / 2, "{} of {last}", run.bytes());
}

#[test]
fn invariants_grow_with_learned_values_and_waiting_rows() {
    let mut run = Run::new(
        "CREATE CONTINUOUS QUERY q AS SELECT ts, k, v FROM s \
         INVARIANT SET (v) PER (k) TRAINING INTERVAL '10' MINUTE",
    );
    // Rows ahead of the watermark wait.
    run.feed(&keyed(30, 0, 1000, 1), 0);
    let waiting = run.bytes();
    assert!(waiting > 0);
    // Learned: a value per key, then more values per key.
    run.feed(&[], 31);
    let learned = run.bytes();
    run.feed(&keyed(40, 0, 1000, 2), 41);
    assert!(run.bytes() > learned, "{} after {learned}", run.bytes());
}

#[test]
fn suppress_holds_its_keys_until_their_interval_passes() {
    let mut run = Run::new(
        "CREATE CONTINUOUS QUERY q AS SELECT ts, k, v FROM s \
         SUPPRESS FOR INTERVAL '1' MINUTE PER (k)",
    );
    let peak = grows(&mut run, 30, 4);
    // A watermark past every key's interval forgets them all (the map keeps its slots).
    run.feed(&[], 200);
    let after = run.bytes();
    assert!(
        after < peak,
        "{after} bytes of {peak} after every interval passed"
    );
}
