//! Tests of the demo generator: determinism, rates, schemas and each attack's signature.

use super::attacks::{EXFIL_IP, OUTLIER_IP};
use super::*;
use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{Float64Type, Int64Type, TimestampNanosecondType};

/// 2024-05-01 00:00:00.123456789 UTC: deliberately not on a second boundary.
const T0: i64 = 1_714_521_600_123_456_789;

fn t(seconds: f64) -> EventTime {
    EventTime(T0 + (seconds * NANOS as f64) as i64)
}

/// One `proc_events` row, owned, for assertions.
#[derive(Debug, Clone, PartialEq)]
struct Row {
    ts: i64,
    host: String,
    pid: i64,
    user: String,
    exe: String,
    op: String,
    obj_type: String,
    obj_name: String,
    dst_ip: Option<String>,
    amount: Option<i64>,
}

fn batch<'a>(out: &'a [(&str, RecordBatch)], stream: &str) -> Option<&'a RecordBatch> {
    out.iter().find(|(name, _)| *name == stream).map(|(_, b)| b)
}

fn proc_rows(out: &[(&str, RecordBatch)]) -> Vec<Row> {
    let Some(b) = batch(out, PROC_EVENTS) else {
        return Vec::new();
    };
    let text = |i: usize, r: usize| {
        let c = b.column(i).as_string::<i32>();
        c.is_valid(r).then(|| c.value(r).to_string())
    };
    let int = |i: usize, r: usize| {
        let c = b.column(i).as_primitive::<Int64Type>();
        c.is_valid(r).then(|| c.value(r))
    };
    let ts = b.column(0).as_primitive::<TimestampNanosecondType>();
    (0..b.num_rows())
        .map(|r| Row {
            ts: ts.value(r),
            host: text(1, r).unwrap(),
            pid: int(2, r).unwrap(),
            user: text(4, r).unwrap(),
            exe: text(5, r).unwrap(),
            op: text(6, r).unwrap(),
            obj_type: text(7, r).unwrap(),
            obj_name: text(8, r).unwrap(),
            dst_ip: text(9, r),
            amount: int(10, r),
        })
        .collect()
}

/// One `host_metrics` row, owned, for assertions.
struct Metric {
    ts: i64,
    host: String,
    cpu: f64,
    mem: f64,
    net_out: i64,
}

fn metric_rows(out: &[(&str, RecordBatch)]) -> Vec<Metric> {
    let Some(b) = batch(out, HOST_METRICS) else {
        return Vec::new();
    };
    let float = |i: usize, r: usize| b.column(i).as_primitive::<Float64Type>().value(r);
    let ts = b.column(0).as_primitive::<TimestampNanosecondType>();
    (0..b.num_rows())
        .map(|r| Metric {
            ts: ts.value(r),
            host: b.column(1).as_string::<i32>().value(r).to_string(),
            cpu: float(2, r),
            mem: float(3, r),
            net_out: b.column(4).as_primitive::<Int64Type>().value(r),
        })
        .collect()
}

/// Bytes written to each IP by each process, per 10-second window.
fn sent_per_10s(rows: &[Row]) -> HashMap<(String, i64, String, i64), i64> {
    let mut sums = HashMap::new();
    for r in rows
        .iter()
        .filter(|r| r.op == "write" && r.obj_type == "ip")
    {
        let window = r.ts.div_euclid(10 * NANOS);
        let key = (r.host.clone(), r.pid, r.obj_name.clone(), window);
        *sums.entry(key).or_default() += r.amount.unwrap();
    }
    sums
}

/// Name, type and nullability of each column in a `CREATE STREAM` statement.
fn ddl_columns(statement: &str) -> (String, Vec<(String, DataType, bool)>) {
    let open = statement.find('(').unwrap();
    let name = statement[..open]
        .trim()
        .trim_start_matches("CREATE STREAM")
        .trim()
        .to_string();
    let body = &statement[open + 1..statement.find("WATERMARK").unwrap()];
    let columns = body
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|column| {
            let (name, ty) = column.split_once(' ').unwrap();
            let nullable = !ty.ends_with("NOT NULL");
            let ty = match ty.trim_end_matches("NOT NULL").trim() {
                "TIMESTAMP" => DataType::Timestamp(TimeUnit::Nanosecond, None),
                "TEXT" => DataType::Utf8,
                "BIGINT" => DataType::Int64,
                "DOUBLE PRECISION" => DataType::Float64,
                other => panic!("unexpected type {other}"),
            };
            (name.to_string(), ty, nullable)
        })
        .collect();
    (name, columns)
}

#[test]
fn schemas_match_the_ddl() {
    let statements: Vec<&str> = DemoGenerator::streams_ddl().split(";\n").collect();
    assert_eq!(statements.len(), 3);
    let schemas = [
        (PROC_EVENTS, DemoGenerator::proc_events_schema()),
        (HOST_METRICS, DemoGenerator::host_metrics_schema()),
        (NET_EVENTS, DemoGenerator::net_events_schema()),
    ];
    for (statement, (stream, schema)) in statements.iter().zip(schemas) {
        let (name, columns) = ddl_columns(statement);
        assert_eq!(name, stream);
        let fields: Vec<_> = schema
            .fields()
            .iter()
            .map(|f| (f.name().clone(), f.data_type().clone(), f.is_nullable()))
            .collect();
        assert_eq!(fields, columns, "{stream}");
    }
}

#[test]
fn same_seed_gives_identical_batches() {
    let run = |seed| {
        let mut g = DemoGenerator::new(seed, 4);
        g.inject(Attack::DataExfiltration, t(10.0));
        g.generate(t(0.0), t(30.0)).unwrap()
    };
    let (a, b) = (run(7), run(7));
    assert_eq!(a.len(), 3);
    assert_eq!(a, b);
    assert_ne!(proc_rows(&a), proc_rows(&run(8)));
}

#[test]
fn split_calls_give_the_same_rows() {
    let mut whole = DemoGenerator::new(3, 3);
    let mut split = DemoGenerator::new(3, 3);
    for g in [&mut whole, &mut split] {
        g.inject(Attack::BruteForce, t(5.0));
        g.inject(Attack::CpuSpike, t(5.0));
    }
    let all = whole.generate(t(0.0), t(40.0)).unwrap();
    let mut parts = Vec::new();
    for (a, b) in [(0.0, 0.3), (0.3, 7.25), (7.25, 7.5), (7.5, 40.0)] {
        parts.extend(split.generate(t(a), t(b)).unwrap());
    }
    for stream in [PROC_EVENTS, HOST_METRICS, NET_EVENTS] {
        let pieces: Vec<RecordBatch> = parts
            .iter()
            .filter(|(s, _)| *s == stream)
            .map(|(_, b)| b.clone())
            .collect();
        let joined = concat_batches(&pieces[0].schema(), &pieces).unwrap();
        assert_eq!(&joined, batch(&all, stream).unwrap(), "{stream}");
    }
}

#[test]
fn timestamps_are_in_range_and_sorted() {
    let mut g = DemoGenerator::new(1, 5);
    g.inject(Attack::UnusualChild, t(20.0));
    g.inject(Attack::StolenKey, t(40.0));
    let (from, to) = (t(0.0), t(75.5));
    let out = g.generate(from, to).unwrap();
    for (stream, b) in &out {
        let ts = b
            .column(0)
            .as_primitive::<TimestampNanosecondType>()
            .values();
        assert!(
            ts.iter().all(|&x| x >= from.nanos() && x < to.nanos()),
            "{stream}"
        );
        assert!(ts.windows(2).all(|w| w[0] <= w[1]), "{stream}");
    }
    let metrics = metric_rows(&out);
    assert_eq!(metrics.len(), 75 * 5, "one row per host per second");
    let percent = 0.0..=100.0;
    assert!(metrics
        .iter()
        .all(|m| m.ts % NANOS == 0 && percent.contains(&m.cpu)));
    assert!(metrics.iter().all(|m| percent.contains(&m.mem)));
    assert!(g.generate(to, from).unwrap().is_empty());
    let err = g.generate(t(0.0), t(86_401.0)).unwrap_err();
    assert_eq!(err.sqlstate(), "22023");
}

#[test]
fn rate_is_roughly_as_asked() {
    for rate in [5.0, 20.0, 100.0] {
        let mut g = DemoGenerator::new(11, 4).with_rate(rate);
        let n = proc_rows(&g.generate(t(0.0), t(60.0)).unwrap()).len() as f64;
        let expected = rate * 60.0 * 4.0;
        assert!(
            (n - expected).abs() < 0.3 * expected,
            "rate {rate}: {n} rows, expected {expected}"
        );
    }
    let mut idle = DemoGenerator::new(11, 4).with_rate(-1.0);
    assert!(proc_rows(&idle.generate(t(0.0), t(60.0)).unwrap()).len() < 5);
}

#[test]
fn fleet_mixes_linux_and_windows() {
    let names: Vec<String> = DemoGenerator::new(0, 6).hosts().map(String::from).collect();
    assert_eq!(
        names,
        ["web-01", "win-01", "db-01", "app-01", "web-02", "win-02"]
    );
    assert_eq!(DemoGenerator::new(0, 0).hosts().count(), 1);
    // A Linux-only fleet cannot stage the Windows attack chain: it is skipped, not faked.
    let mut g = DemoGenerator::new(0, 1);
    g.inject(Attack::DataExfiltration, t(1.0));
    assert!(proc_rows(&g.generate(t(0.0), t(30.0)).unwrap())
        .iter()
        .all(|r| !r.exe.ends_with(".exe")));
}

#[test]
fn net_out_follows_writes_to_ips() {
    let mut g = DemoGenerator::new(5, 2);
    g.inject(Attack::NetworkOutlier, t(3.0));
    let out = g.generate(t(0.0), t(20.0)).unwrap();
    let rows = proc_rows(&out);
    for m in metric_rows(&out).iter().filter(|m| m.ts >= t(1.0).nanos()) {
        let second = m.ts - NANOS..m.ts;
        let sent: i64 = rows
            .iter()
            .filter(|r| r.host == m.host && r.obj_type == "ip" && second.contains(&r.ts))
            .filter_map(|r| r.amount)
            .sum();
        let (host, net_out) = (&m.host, m.net_out);
        assert!(
            (2_000..8_000).contains(&(net_out - sent)),
            "{host}: {net_out} vs {sent}"
        );
    }
}

#[test]
fn data_exfiltration_chain() {
    let mut g = DemoGenerator::new(9, 4);
    g.inject(Attack::DataExfiltration, t(30.0));
    assert!(proc_rows(&g.generate(t(0.0), t(29.0)).unwrap())
        .iter()
        .all(|r| !r.obj_name.ends_with("osql.exe")));
    let rows = proc_rows(&g.generate(t(29.0), t(60.0)).unwrap());
    let osql = rows
        .iter()
        .find(|r| {
            r.op == "start" && r.exe.ends_with(r"\cmd.exe") && r.obj_name.ends_with(r"\osql.exe")
        })
        .expect("cmd.exe starts osql.exe");
    assert_eq!((osql.ts, osql.host.as_str()), (t(30.0).nanos(), "win-01"));
    let dump = rows
        .iter()
        .find(|r| {
            r.op == "write" && r.exe.ends_with("sqlservr.exe") && r.obj_name.ends_with(".dmp")
        })
        .expect("sqlservr.exe writes a dump");
    let reader = rows
        .iter()
        .find(|r| {
            r.op == "read" && r.obj_name == dump.obj_name && r.pid != dump.pid && r.ts > dump.ts
        })
        .expect("another process reads the dump");
    let sent = rows
        .iter()
        .find(|r| r.op == "write" && r.obj_type == "ip" && r.pid == reader.pid && r.ts > reader.ts)
        .expect("the reader sends it out");
    assert!(sent.amount.unwrap() >= 50_000_000 && sent.dst_ip.as_deref() == Some(EXFIL_IP));
    assert!(sent.ts - osql.ts < 60 * NANOS);
}

#[test]
fn network_outlier_dwarfs_its_peers() {
    let mut g = DemoGenerator::new(2, 4);
    g.inject(Attack::NetworkOutlier, t(10.0));
    let rows = proc_rows(&g.generate(t(0.0), t(120.0)).unwrap());
    let sums = sent_per_10s(&rows);
    let (top, rest): (Vec<_>, Vec<_>) = sums.iter().partition(|(k, _)| k.2 == OUTLIER_IP);
    let top = top.iter().map(|(_, &v)| v).max().unwrap();
    let rest = rest.iter().map(|(_, &v)| v).max().unwrap();
    assert!(
        top > 1_000_000 && top > 5 * rest,
        "outlier {top}, others at most {rest}"
    );
}

#[test]
fn unusual_child_of_a_web_server() {
    let mut g = DemoGenerator::new(4, 5);
    g.inject(Attack::UnusualChild, t(10.0));
    g.inject(Attack::UnusualChild, t(10.0));
    let rows = proc_rows(&g.generate(t(0.0), t(20.0)).unwrap());
    let bash: Vec<&Row> = rows
        .iter()
        .filter(|r| r.op == "start" && r.obj_name == "/bin/bash")
        .collect();
    let hosts: Vec<&str> = bash.iter().map(|r| r.host.as_str()).collect();
    assert_eq!(
        hosts,
        ["web-01", "web-02"],
        "injections rotate over the fitting hosts"
    );
    assert!(bash
        .iter()
        .all(|r| r.exe.ends_with("/apache2") || r.exe.ends_with("/httpd")));
    assert!(rows
        .iter()
        .any(|r| r.op == "start" && r.exe == "/bin/bash" && r.obj_name == "/usr/bin/wget"));
}

#[test]
fn brute_force_fails_many_logins() {
    let mut g = DemoGenerator::new(6, 3);
    g.inject(Attack::BruteForce, t(5.0));
    let rows = proc_rows(&g.generate(t(0.0), t(70.0)).unwrap());
    let failed: Vec<&Row> = rows
        .iter()
        .filter(|r| r.op == "login_failed" && r.user == "admin")
        .collect();
    assert!(failed.len() >= 30);
    assert!(failed
        .iter()
        .all(|r| r.host == failed[0].host && r.exe == "/usr/sbin/sshd" && r.obj_type == "user"));
    assert!(failed.last().unwrap().ts - failed[0].ts < 60 * NANOS);
}

#[test]
fn cpu_spike_pins_one_host() {
    let mut g = DemoGenerator::new(8, 3);
    g.inject(Attack::CpuSpike, t(10.0));
    let metrics = metric_rows(&g.generate(t(0.0), t(60.0)).unwrap());
    let hot: Vec<&Metric> = metrics.iter().filter(|m| m.cpu > 95.0).collect();
    assert_eq!(hot.len(), 30);
    let spike = t(10.0).nanos()..t(40.0).nanos();
    assert!(hot
        .iter()
        .all(|m| m.host == "web-01" && spike.contains(&m.ts)));
}

#[test]
fn background_has_no_attack_signatures() {
    for seed in [0, 1] {
        let mut g = DemoGenerator::new(seed, 8);
        let out = g.generate(t(0.0), t(600.0)).unwrap();
        let rows = proc_rows(&out);
        assert!(!rows
            .iter()
            .any(|r| r.op == "start" && r.obj_name.to_lowercase().ends_with("osql.exe")));
        assert!(!rows
            .iter()
            .any(|r| r.obj_type == "ip" && r.amount.unwrap_or(0) > 1_000_000));
        let web = rows.iter().filter(|r| {
            r.op == "start" && (r.exe.ends_with("/apache2") || r.exe.ends_with("/httpd"))
        });
        assert!(web.clone().count() > 0);
        assert!(web
            .clone()
            .all(|r| r.obj_name.contains("php-fpm") || r.obj_name == "/bin/sh"));
        let worst = sent_per_10s(&rows).into_iter().max_by_key(|e| e.1).unwrap();
        assert!(worst.1 < 1_000_000, "{worst:?}");
        let mut failed: HashMap<(&str, i64), usize> = HashMap::new();
        for r in rows.iter().filter(|r| r.op == "login_failed") {
            *failed
                .entry((&r.host, r.ts.div_euclid(60 * NANOS)))
                .or_default() += 1;
        }
        assert!(failed.values().all(|&n| n <= 5));
        assert!(metric_rows(&out).iter().all(|m| m.cpu < 90.0));
    }
}

/// One `net_events` row, owned, for assertions.
#[derive(Debug)]
struct Flow {
    ts: i64,
    host: String,
    pid: i64,
    ppid: i64,
    exe: String,
    dst_ip: String,
    dst_port: i64,
}

fn net_rows(out: &[(&str, RecordBatch)]) -> Vec<Flow> {
    let Some(b) = batch(out, NET_EVENTS) else {
        return Vec::new();
    };
    let text = |i: usize, r: usize| b.column(i).as_string::<i32>().value(r).to_string();
    let int = |i: usize, r: usize| b.column(i).as_primitive::<Int64Type>().value(r);
    let ts = b.column(0).as_primitive::<TimestampNanosecondType>();
    (0..b.num_rows())
        .map(|r| Flow {
            ts: ts.value(r),
            host: text(1, r),
            pid: int(2, r),
            ppid: int(3, r),
            exe: text(4, r),
            dst_ip: text(6, r),
            dst_port: int(7, r),
        })
        .collect()
}

#[test]
fn the_network_sensor_sees_every_connection_soon_after() {
    let mut g = DemoGenerator::new(3, 6);
    g.inject(Attack::UnusualChild, t(20.0));
    let out = g.generate(t(0.0), t(120.0)).unwrap();
    let connects: Vec<Row> = proc_rows(&out)
        .into_iter()
        .filter(|r| r.op == "connect")
        .collect();
    let flows = net_rows(&out);
    assert!(connects.len() > 100, "{} connections", connects.len());
    assert_eq!(flows.len(), connects.len());
    for c in &connects {
        let seen = flows.iter().find(|f| {
            f.host == c.host
                && f.pid == c.pid
                && f.exe == c.exe
                && Some(&f.dst_ip) == c.dst_ip.as_ref()
                && (c.ts + 1..=c.ts + 40 * MS).contains(&f.ts)
        });
        assert!(seen.is_some(), "{c:?}");
    }
    // wget, started by the web server's shell, is reported with the shell as its parent.
    let wget = flows.iter().find(|f| f.exe == "/usr/bin/wget").unwrap();
    let rows = proc_rows(&out);
    let shell_start = rows
        .iter()
        .find(|r| r.op == "start" && r.obj_name == "/usr/bin/wget")
        .unwrap();
    assert_eq!((wget.ppid, wget.dst_port), (shell_start.pid, 443));
}

#[test]
fn every_background_login_has_its_mfa_check() {
    let mut g = DemoGenerator::new(5, 8).with_rate(1.0);
    let out = g.generate(t(0.0), t(4.0 * 3600.0)).unwrap();
    let logins: Vec<Row> = proc_rows(&out)
        .into_iter()
        .filter(|r| r.op == "login")
        .collect();
    assert!(logins.len() > 20, "{} logins", logins.len());
    let flows = net_rows(&out);
    for l in &logins {
        let checked = flows.iter().any(|f| {
            f.host == l.host
                && f.pid == l.pid
                && f.dst_ip == "10.0.0.9"
                && (l.ts..l.ts + 2 * NANOS).contains(&f.ts)
        });
        assert!(checked, "{l:?}");
    }
}

#[test]
fn stolen_key_skips_mfa_and_downloads() {
    let mut g = DemoGenerator::new(6, 3);
    g.inject(Attack::StolenKey, t(5.0));
    let out = g.generate(t(0.0), t(60.0)).unwrap();
    let rows = proc_rows(&out);
    let login = rows
        .iter()
        .find(|r| r.op == "login" && r.user == "deploy")
        .unwrap();
    assert_eq!(login.dst_ip.as_deref(), Some(super::attacks::INTRUDER_IP));
    let flows = net_rows(&out);
    assert!(!flows
        .iter()
        .any(|f| f.host == login.host && f.dst_ip == "10.0.0.9" && f.ts >= login.ts));
    let curl = flows.iter().find(|f| f.exe == "/usr/bin/curl").unwrap();
    assert_eq!(curl.host, login.host);
    assert!(curl.ts - login.ts < 10 * NANOS);
}
