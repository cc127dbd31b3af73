//! The metric queries of `eval/nab/` on real data: NAB's 24 real series (AWS CloudWatch and
//! "known cause" system metrics, MIT licence) replayed as one stream, each series its own
//! partition, and every alert scored against NAB's labelled anomaly windows
//! (`labels/combined_windows.json`). Per query and series it prints the windows hit (at least
//! one alert inside) and missed, the alerts inside and outside any window, and the episodes
//! the outside alerts form (alerts at most [`EPISODE_GAP`] apart are one episode: what an
//! operator would look at once). It asserts the figures the queries reach today, so a
//! regression fails. Without `../shared/data/nab` it prints a skip line and passes.
//!
//! ```sh
//! cargo test --test eval_nab -- --nocapture
//! ```

mod eval_common;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use chrono::NaiveDateTime;
use datafusion::arrow::array::{Float64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use eval_common::{data_dir, nanos, texts, Replay};

const HOUR: i64 = 3_600 * 1_000_000_000;

/// Outside alerts at most this far apart (end to start) are one episode.
const EPISODE_GAP: i64 = HOUR;

/// Rows per inserted batch.
const BATCH_ROWS: usize = 8_192;

/// A stretch of event time in nanoseconds, both ends included.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Span {
    start: i64,
    end: i64,
}

impl Span {
    fn at(t: i64) -> Span {
        Span { start: t, end: t }
    }

    fn overlaps(&self, other: &Span) -> bool {
        self.start <= other.end && other.start <= self.end
    }
}

/// How one query's alerts on one series (or on all of them) meet the labelled windows.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
struct Score {
    windows: usize,
    hit: usize,
    alerts: usize,
    inside: usize,
    outside: usize,
    episodes: usize,
}

impl Score {
    fn missed(&self) -> usize {
        self.windows - self.hit
    }

    fn add(&mut self, o: &Score) {
        self.windows += o.windows;
        self.hit += o.hit;
        self.alerts += o.alerts;
        self.inside += o.inside;
        self.outside += o.outside;
        self.episodes += o.episodes;
    }
}

/// Scores alerts against labelled windows: a window is hit when at least one alert overlaps
/// it; an alert overlapping no window is outside, and outside alerts whose gap to the one
/// before is at most `gap` belong to the same episode.
fn score(windows: &[Span], alerts: &[Span], gap: i64) -> Score {
    let mut sorted = alerts.to_vec();
    sorted.sort_by_key(|a| (a.start, a.end));
    let hit = windows
        .iter()
        .filter(|w| sorted.iter().any(|a| a.overlaps(w)))
        .count();
    let outside: Vec<&Span> = sorted
        .iter()
        .filter(|a| !windows.iter().any(|w| a.overlaps(w)))
        .collect();
    let mut episodes = 0;
    let mut last_end: Option<i64> = None;
    for a in &outside {
        if last_end.is_none_or(|end| a.start - end > gap) {
            episodes += 1;
        }
        last_end = Some(last_end.map_or(a.end, |end| end.max(a.end)));
    }
    Score {
        windows: windows.len(),
        hit,
        alerts: sorted.len(),
        inside: sorted.len() - outside.len(),
        outside: outside.len(),
        episodes,
    }
}

fn parse_time(s: &str) -> i64 {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S%.f")
        .unwrap_or_else(|e| panic!("bad timestamp {s:?}: {e}"))
        .and_utc()
        .timestamp_nanos_opt()
        .unwrap()
}

/// One NAB series: its name as the labels file has it (`realKnownCause/nyc_taxi.csv`) and its
/// samples.
struct Series {
    name: String,
    samples: Vec<(i64, f64)>,
}

fn read_series(dir: &Path) -> Vec<Series> {
    let mut out = Vec::new();
    for group in ["realAWSCloudwatch", "realKnownCause"] {
        let mut files: Vec<_> = std::fs::read_dir(dir.join("data").join(group))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "csv"))
            .collect();
        files.sort();
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let samples = text
                .lines()
                .skip(1)
                .filter(|l| !l.is_empty())
                .map(|l| {
                    let (t, v) = l.split_once(',').unwrap();
                    (parse_time(t), v.parse::<f64>().unwrap())
                })
                .collect();
            let file_name = file.file_name().unwrap().to_string_lossy();
            out.push(Series {
                name: format!("{group}/{file_name}"),
                samples,
            });
        }
    }
    out
}

fn read_windows(dir: &Path) -> BTreeMap<String, Vec<Span>> {
    let text = std::fs::read_to_string(dir.join("labels/combined_windows.json")).unwrap();
    let json: BTreeMap<String, Vec<[String; 2]>> = serde_json::from_str(&text).unwrap();
    json.into_iter()
        .map(|(name, windows)| {
            let spans = windows
                .iter()
                .map(|[a, b]| Span {
                    start: parse_time(a),
                    end: parse_time(b),
                })
                .collect();
            (name, spans)
        })
        .collect()
}

/// Replays every series through the queries of `eval/nab/`, merged into one stream in
/// event-time order, and returns per query the alerts of each series (by series name).
fn run_queries(series: &[Series]) -> BTreeMap<String, BTreeMap<String, Vec<Span>>> {
    let mut rows: Vec<(i64, usize, f64)> = series
        .iter()
        .enumerate()
        .flat_map(|(i, s)| s.samples.iter().map(move |&(t, v)| (t, i, v)))
        .collect();
    rows.sort_by_key(|&(t, i, _)| (t, i));
    let names: Vec<String> = series
        .iter()
        .map(|s| s.name.trim_end_matches(".csv").to_string())
        .collect();

    let mut replay = Replay::new("nab");
    let schema = replay.schema("nab_metric");
    for chunk in rows.chunks(BATCH_ROWS) {
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![
                Arc::new(TimestampNanosecondArray::from_iter_values(
                    chunk.iter().map(|r| r.0),
                )),
                Arc::new(StringArray::from_iter_values(
                    chunk.iter().map(|r| names[r.1].as_str()),
                )),
                Arc::new(Float64Array::from_iter_values(chunk.iter().map(|r| r.2))),
            ],
        )
        .unwrap();
        replay.insert("nab_metric", batch);
    }

    let mut out = BTreeMap::new();
    for (query, batches) in replay.finish() {
        let mut alerts: BTreeMap<String, Vec<Span>> = BTreeMap::new();
        for b in &batches {
            let series = texts(b, "series");
            // A point alert (a sample) or an alert about a whole window [start, end).
            let spans: Vec<Span> = if b.schema().column_with_name("window_start").is_some() {
                nanos(b, "window_start")
                    .into_iter()
                    .zip(nanos(b, "window_end"))
                    .map(|(start, end)| Span {
                        start,
                        end: end - 1,
                    })
                    .collect()
            } else {
                nanos(b, "timestamp").into_iter().map(Span::at).collect()
            };
            for (s, span) in series.into_iter().zip(spans) {
                alerts.entry(format!("{s}.csv")).or_default().push(span);
            }
        }
        out.insert(query, alerts);
    }
    out
}

fn print_table(query: &str, rows: &[(String, usize, Score)], total: &Score) {
    println!();
    println!("{query}");
    println!(
        "| series | samples | windows | hit | missed | alerts | in windows | outside | outside episodes |"
    );
    println!("|---|--:|--:|--:|--:|--:|--:|--:|--:|");
    for (name, samples, s) in rows {
        println!(
            "| {name} | {samples} | {} | {} | {} | {} | {} | {} | {} |",
            s.windows,
            s.hit,
            s.missed(),
            s.alerts,
            s.inside,
            s.outside,
            s.episodes
        );
    }
    let samples: usize = rows.iter().map(|r| r.1).sum();
    println!(
        "| **total** | {samples} | {} | {} | {} | {} | {} | {} | {} |",
        total.windows,
        total.hit,
        total.missed(),
        total.alerts,
        total.inside,
        total.outside,
        total.episodes
    );
}

#[test]
fn alerts_are_matched_to_windows_and_grouped_into_episodes() {
    let windows = [Span { start: 10, end: 20 }, Span { start: 40, end: 50 }];
    // Two alerts in the first window, one interval alert reaching into the second, and
    // outside: 5, then 60 and 62 (gap 2: one episode), then 70 (gap 8: a new one).
    let alerts = [
        Span::at(15),
        Span::at(60),
        Span::at(5),
        Span::at(20),
        Span { start: 30, end: 40 },
        Span::at(62),
        Span::at(70),
    ];
    assert_eq!(
        score(&windows, &alerts, 5),
        Score {
            windows: 2,
            hit: 2,
            alerts: 7,
            inside: 3,
            outside: 4,
            episodes: 3,
        }
    );
    // A window's ends count as inside; just past them does not.
    let s = score(&windows, &[Span::at(9), Span::at(51)], 0);
    assert_eq!((s.hit, s.outside, s.episodes), (0, 2, 2));
    // The gap is measured from the end of an interval alert, not its start.
    let s = score(&[], &[Span { start: 0, end: 100 }, Span::at(104)], 5);
    assert_eq!(s.episodes, 1);
    // No alerts: every window missed.
    let s = score(&windows, &[], 5);
    assert_eq!((s.hit, s.missed(), s.alerts), (0, 2, 0));
}

#[test]
fn nab_series_against_labelled_windows() {
    let Some(dir) = data_dir("nab") else {
        return;
    };
    let series = read_series(&dir);
    assert_eq!(series.len(), 24, "NAB's real AWS and known-cause series");
    let windows = read_windows(&dir);
    let results = run_queries(&series);

    let labelled = |s: &Series| -> &[Span] {
        windows
            .get(&s.name)
            .unwrap_or_else(|| panic!("no labels for {}", s.name))
    };
    let mut totals = BTreeMap::new();
    for (query, alerts) in &results {
        let mut rows = Vec::new();
        let mut total = Score::default();
        for s in &series {
            let sc = score(
                labelled(s),
                alerts.get(&s.name).map_or(&[][..], |a| a.as_slice()),
                EPISODE_GAP,
            );
            total.add(&sc);
            rows.push((s.name.clone(), s.samples.len(), sc));
        }
        assert!(
            alerts.keys().all(|k| windows.contains_key(k)),
            "{query}: alerts for an unknown series: {:?}",
            alerts.keys().collect::<Vec<_>>()
        );
        print_table(query, &rows, &total);
        totals.insert(query.as_str(), total);
    }

    // Both queries together, and what chance alone would give: the share of the series' time
    // that the labelled windows cover is the share of randomly placed alerts that land in one.
    let mut either = Score::default();
    let (mut covered, mut span) = (0i64, 0i64);
    for s in &series {
        let alerts: Vec<Span> = results
            .values()
            .filter_map(|by_series| by_series.get(&s.name))
            .flatten()
            .copied()
            .collect();
        either.add(&score(labelled(s), &alerts, EPISODE_GAP));
        let (first, last) = (s.samples[0].0, s.samples[s.samples.len() - 1].0);
        span += last - first;
        covered += labelled(s)
            .iter()
            .map(|w| w.end.min(last) - w.start.max(first))
            .filter(|d| *d > 0)
            .sum::<i64>();
    }
    println!();
    println!(
        "either query: {} of {} windows hit, {} alerts ({} in windows), {} outside episodes",
        either.hit, either.windows, either.alerts, either.inside, either.episodes
    );
    println!(
        "the labelled windows cover {:.1}% of the series' time: the share of alerts a detector \
         firing at random would place in them",
        100.0 * covered as f64 / span as f64
    );

    // What the queries reach today: a change that finds fewer windows, or raises more alert
    // episodes outside them, fails here (and should update these figures, and eval/README.md,
    // on purpose).
    let spike = totals["metric_spike"];
    assert_eq!(spike.windows, 49);
    assert!(spike.hit >= 34, "metric_spike: {spike:?}");
    assert!(spike.episodes <= 375, "metric_spike: {spike:?}");
    let shift = totals["level_shift"];
    assert!(shift.hit >= 30, "level_shift: {shift:?}");
    assert!(shift.episodes <= 148, "level_shift: {shift:?}");
}

#[test]
fn a_missing_data_set_is_skipped() {
    assert!(data_dir("no-such-data-set").is_none());
}
