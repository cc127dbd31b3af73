//! The built-in generator behind `saql serve --demo`: seeded, deterministic background activity
//! of a small fleet of Linux and Windows hosts (long-running services that read and write their
//! own files, start a small stable set of children and talk to a few peers, plus the odd ssh
//! login), one `host_metrics` row per host per second, and attacks that can be injected so the
//! demo queries have something to find.
//!
//! Every second of every host is drawn from its own seed, and metrics are smooth functions of
//! time, so output depends only on the seed, the fleet, the rate and the asked range:
//! `generate(a, c)` yields the same rows as `generate(a, b)` followed by `generate(b, c)`.

use crate::error::sqlstate;
use std::collections::HashMap;
use std::f64::consts::TAU;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::error::{Error, Result};
use crate::time::EventTime;

/// Name of the stream of process, file, network and login events.
pub const PROC_EVENTS: &str = "proc_events";
/// Name of the stream of per-host, per-second resource metrics.
pub const HOST_METRICS: &str = "host_metrics";

const STREAMS_DDL: &str = "CREATE STREAM proc_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, user_name TEXT, exe TEXT,
  op TEXT, obj_type TEXT, obj_name TEXT, dst_ip TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
CREATE STREAM host_metrics (
  ts TIMESTAMP NOT NULL, host TEXT, cpu DOUBLE PRECISION, mem DOUBLE PRECISION,
  net_out BIGINT, disk_io BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');";

const NANOS: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
/// Longest range one `generate` call accepts.
const MAX_RANGE: i64 = 86_400 * NANOS;
/// Ranges must stay this far inside the `i64` nanosecond range (roughly years 1824 to 2116).
const TIME_LIMIT: i64 = i64::MAX / 2;
const FAILED_LOGINS_PER_HOUR: f64 = 3.0;
const LOGINS_PER_HOUR: f64 = 4.0;
const DEFAULT_RATE: f64 = 20.0;
const MAX_RATE: f64 = 1_000_000.0;

// Seed domains, so that the draws for different purposes never share a stream.
const TAG_FLEET: u64 = 1;
const TAG_EVENTS: u64 = 2;
const TAG_ATTACK: u64 = 3;
const TAG_CPU_SLOW: u64 = 4;
const TAG_CPU_SLOWER: u64 = 5;
const TAG_CPU_NOISE: u64 = 6;
const TAG_MEM_SLOW: u64 = 7;
const TAG_MEM_SLOWER: u64 = 8;
const TAG_NET: u64 = 9;
const TAG_DISK: u64 = 10;

const CMD: &str = r"C:\Windows\System32\cmd.exe";
const OSQL: &str = r"C:\Program Files\Microsoft SQL Server\150\Tools\Binn\osql.exe";
const DUMP: &str =
    r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\Backup\sales.dmp";
const DROPPER: &str = r"C:\Users\Public\sbblv.exe";
const EXFIL_IP: &str = "203.0.113.66";
const OUTLIER_IP: &str = "203.0.113.7";
const DOWNLOAD_IP: &str = "203.0.113.9";
const BRUTE_FORCE_IP: &str = "203.0.113.23";

/// A long-running service and what it does in normal operation. The lists hold `|`-separated
/// entries: files it reads, files it writes, peers it sends to, children it starts.
struct ServiceSpec {
    exe: &'static str,
    user: &'static str,
    /// Share of the host's activity, relative to the host's other services.
    weight: f64,
    reads: &'static str,
    writes: &'static str,
    peers: &'static str,
    children: &'static str,
}

const SSHD: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/sshd",
    user: "root",
    weight: 0.5,
    reads: "/etc/ssh/sshd_config|/etc/passwd|/etc/shadow",
    writes: "/var/log/auth.log",
    peers: "10.0.0.5",
    children: "",
};
const CRON: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/cron",
    user: "root",
    weight: 0.3,
    reads: "/etc/crontab|/var/spool/cron/crontabs/root",
    writes: "/var/log/syslog",
    peers: "",
    children: "/bin/sh|/usr/sbin/logrotate",
};
const NGINX: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/nginx",
    user: "www-data",
    weight: 3.0,
    reads: "/etc/nginx/nginx.conf|/var/www/html/index.html|/var/www/html/static/app.js",
    writes: "/var/log/nginx/access.log|/var/log/nginx/error.log",
    peers: "10.0.1.21|198.51.100.53",
    children: "",
};
const APACHE2: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/apache2",
    user: "www-data",
    weight: 2.0,
    reads: "/etc/apache2/apache2.conf|/var/www/app/index.php|/var/www/app/config.php",
    writes: "/var/log/apache2/access.log|/var/log/apache2/error.log",
    peers: "10.0.2.10|10.0.1.21",
    children: "/usr/sbin/php-fpm8.2|/bin/sh",
};
const HTTPD: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/httpd",
    user: "apache",
    weight: 3.0,
    reads: "/etc/httpd/conf/httpd.conf|/var/www/html/index.php|/var/www/html/login.php",
    writes: "/var/log/httpd/access_log|/var/log/httpd/error_log",
    peers: "10.0.2.10|198.51.100.20",
    children: "/usr/sbin/php-fpm|/bin/sh",
};
const POSTGRES: ServiceSpec = ServiceSpec {
    exe: "/usr/lib/postgresql/16/bin/postgres",
    user: "postgres",
    weight: 3.0,
    reads: "/var/lib/postgresql/16/main/base/16384/2619|/etc/postgresql/16/main/postgresql.conf",
    writes: "/var/lib/postgresql/16/main/pg_wal/000000010000000000000042\
             |/var/log/postgresql/postgresql-16-main.log",
    peers: "10.0.1.11|10.0.1.21",
    children: "/usr/lib/postgresql/16/bin/postgres",
};
const JAVA: ServiceSpec = ServiceSpec {
    exe: "/usr/bin/java",
    user: "app",
    weight: 3.0,
    reads: "/opt/app/config/application.yml|/opt/app/lib/app.jar",
    writes: "/opt/app/logs/app.log|/opt/app/data/cache.bin",
    peers: "10.0.2.10|198.51.100.20|192.0.2.80",
    children: "",
};
const SQLSERVR: ServiceSpec = ServiceSpec {
    exe: r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\Binn\sqlservr.exe",
    user: r"NT SERVICE\MSSQLSERVER",
    weight: 3.0,
    reads: concat!(
        r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\DATA\master.mdf|",
        r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\DATA\sales.mdf",
    ),
    writes: concat!(
        r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\DATA\sales_log.ldf|",
        r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\Log\ERRORLOG",
    ),
    peers: "10.0.1.21|10.0.1.11",
    children: "",
};
const SVCHOST: ServiceSpec = ServiceSpec {
    exe: r"C:\Windows\System32\svchost.exe",
    user: r"NT AUTHORITY\SYSTEM",
    weight: 1.5,
    reads: r"C:\Windows\System32\config\SOFTWARE|C:\Windows\System32\drivers\etc\hosts",
    writes: r"C:\Windows\System32\winevt\Logs\System.evtx",
    peers: "10.0.0.2|192.0.2.80",
    children: r"C:\Windows\System32\wbem\WmiPrvSE.exe|C:\Windows\System32\taskhostw.exe",
};
const EXPLORER: ServiceSpec = ServiceSpec {
    exe: r"C:\Windows\explorer.exe",
    user: r"CORP\alice",
    weight: 0.7,
    reads: r"C:\Users\alice\Documents\Q3 report, final.xlsx|C:\Users\alice\Desktop\notes.txt",
    writes: r"C:\Users\alice\AppData\Local\Temp\~DF3A1C.tmp",
    peers: "10.0.0.3",
    children: r"C:\Windows\System32\cmd.exe|C:\Windows\System32\notepad.exe",
};

/// A kind of host in the fleet: name prefix, whether it runs Windows, its services, and its
/// typical cpu and mem percentages.
struct Role(&'static str, bool, &'static [ServiceSpec], f64, f64);

/// The fleet cycles through these, so two hosts already mix Linux and Windows.
const ROLES: [Role; 8] = [
    Role("web", false, &[SSHD, CRON, NGINX, APACHE2], 25.0, 45.0),
    Role("win", true, &[SQLSERVR, SVCHOST, EXPLORER], 30.0, 60.0),
    Role("db", false, &[SSHD, CRON, POSTGRES], 35.0, 70.0),
    Role("app", false, &[SSHD, CRON, JAVA], 40.0, 55.0),
    Role("web", false, &[SSHD, CRON, HTTPD], 25.0, 40.0),
    Role("win", true, &[SQLSERVR, SVCHOST, EXPLORER], 30.0, 60.0),
    Role("db", false, &[SSHD, CRON, POSTGRES], 35.0, 70.0),
    Role("app", false, &[SSHD, CRON, JAVA], 40.0, 55.0),
];

/// The lists of a service that one background event draws its object from.
#[derive(Clone, Copy)]
enum Pool {
    Reads = 0,
    Writes = 1,
    Peers = 2,
    Children = 3,
}

/// The background events a service makes: op, object pool, amount range (log-uniform), and
/// relative frequency. A start also brings the child's exit shortly after.
const ACTIONS: [(Op, Pool, i64, i64, f64); 5] = [
    (Op::Read, Pool::Reads, 512, 262_144, 0.35),
    (Op::Write, Pool::Writes, 64, 65_536, 0.25),
    (Op::Connect, Pool::Peers, 40, 1_500, 0.08),
    (Op::Write, Pool::Peers, 200, 65_536, 0.22),
    (Op::Start, Pool::Children, 1, 1, 0.10),
];

/// The `op` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Start,
    Exit,
    Read,
    Write,
    Connect,
    LoginFailed,
    Login,
}

impl Op {
    fn as_str(self) -> &'static str {
        match self {
            Op::Start => "start",
            Op::Exit => "exit",
            Op::Read => "read",
            Op::Write => "write",
            Op::Connect => "connect",
            Op::LoginFailed => "login_failed",
            Op::Login => "login",
        }
    }
}

/// The object an event acts on: `obj_type` and `obj_name`.
#[derive(Clone, Copy, Debug)]
enum Obj {
    Proc(&'static str),
    File(&'static str),
    Ip(&'static str),
    User(&'static str),
}

impl Obj {
    /// `obj_type` and `obj_name`.
    fn parts(self) -> (&'static str, &'static str) {
        match self {
            Obj::Proc(name) => ("proc", name),
            Obj::File(name) => ("file", name),
            Obj::Ip(name) => ("ip", name),
            Obj::User(name) => ("user", name),
        }
    }
}

/// The process behind an event.
#[derive(Clone, Copy, Debug)]
struct Actor {
    host: usize,
    pid: i64,
    ppid: i64,
    user: &'static str,
    exe: &'static str,
}

impl Actor {
    fn at(&self, ts: i64, op: Op, obj: Obj, amount: Option<i64>) -> Event {
        let dst_ip = match obj {
            Obj::Ip(ip) => Some(ip),
            _ => None,
        };
        Event {
            ts,
            actor: *self,
            op,
            obj,
            dst_ip,
            amount,
        }
    }

    fn child(&self, pid: i64, exe: &'static str) -> Actor {
        Actor {
            pid,
            ppid: self.pid,
            exe,
            ..*self
        }
    }

    fn start(&self, ts: i64, child: &Actor) -> Event {
        self.at(ts, Op::Start, Obj::Proc(child.exe), None)
    }

    fn exit(&self, ts: i64) -> Event {
        self.at(ts, Op::Exit, Obj::Proc(self.exe), None)
    }

    /// An ssh login attempt handled by this sshd: `user_name` is the account, `dst_ip` the client.
    fn login(&self, ts: i64, op: Op, account: &'static str, client: &'static str) -> Event {
        let mut event = Actor {
            user: account,
            ..*self
        }
        .at(ts, op, Obj::User(account), None);
        event.dst_ip = Some(client);
        event
    }
}

/// One `proc_events` row.
#[derive(Clone, Copy, Debug)]
struct Event {
    ts: i64,
    actor: Actor,
    op: Op,
    obj: Obj,
    dst_ip: Option<&'static str>,
    amount: Option<i64>,
}

/// Bytes a host moved in one second, which its next `host_metrics` row reports.
#[derive(Clone, Copy, Default)]
struct Traffic {
    net: i64,
    disk: i64,
}

impl Traffic {
    fn add(&mut self, e: &Event) {
        let amount = e.amount.unwrap_or(0);
        match (e.op, e.obj) {
            (Op::Write | Op::Connect, Obj::Ip(_)) => self.net += amount,
            (Op::Read | Op::Write, Obj::File(_)) => self.disk += amount,
            _ => {}
        }
    }
}

/// A running service of one host.
struct Service {
    actor: Actor,
    weight: f64,
    /// Indexed by [`Pool`].
    pools: [Vec<&'static str>; 4],
}

struct Host {
    name: String,
    windows: bool,
    services: Vec<Service>,
    /// Cumulative weight, service index, index into [`ACTIONS`]: the background event mix.
    activities: Vec<(f64, usize, usize)>,
    /// Rows per background activity on average (a start also brings its child's exit).
    events_per_activity: f64,
    cpu_base: f64,
    mem_base: f64,
}

impl Host {
    fn new(seed: u64, index: usize, role: &'static Role, name: String) -> Host {
        let Role(_, windows, specs, cpu, mem) = *role;
        let mut rng = StdRng::seed_from_u64(mix(&[seed, TAG_FLEET, index as u64]));
        // Windows pids are multiples of 4; services hang off services.exe there, init here.
        let ppid = if windows {
            rng.gen_range(150..250) * 4
        } else {
            1
        };
        let mut services: Vec<Service> = Vec::new();
        for spec in specs {
            let pid = loop {
                let pid = if windows {
                    rng.gen_range(250..2_000) * 4
                } else {
                    rng.gen_range(300..2_000)
                };
                if services.iter().all(|s| s.actor.pid != pid) {
                    break pid;
                }
            };
            let list = |l: &'static str| l.split('|').filter(|x| !x.is_empty()).collect();
            services.push(Service {
                actor: Actor {
                    host: index,
                    pid,
                    ppid,
                    user: spec.user,
                    exe: spec.exe,
                },
                weight: spec.weight,
                pools: [spec.reads, spec.writes, spec.peers, spec.children].map(list),
            });
        }
        let (mut total, mut rows) = (0.0, 0.0);
        let mut activities = Vec::new();
        for (i, service) in services.iter().enumerate() {
            for (a, &(op, pool, _, _, weight)) in ACTIONS.iter().enumerate() {
                if !service.pools[pool as usize].is_empty() {
                    total += weight * service.weight;
                    rows += weight * service.weight * if op == Op::Start { 2.0 } else { 1.0 };
                    activities.push((total, i, a));
                }
            }
        }
        Host {
            name,
            windows,
            services,
            activities,
            events_per_activity: rows / total,
            cpu_base: cpu + rng.gen_range(-5.0..5.0),
            mem_base: mem + rng.gen_range(-5.0..5.0),
        }
    }

    /// The service whose executable ends with `suffix`.
    fn service(&self, suffix: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.actor.exe.ends_with(suffix))
    }

    /// The busiest service that talks to peers.
    fn main_service(&self) -> &Service {
        self.services
            .iter()
            .filter(|s| !s.pools[Pool::Peers as usize].is_empty())
            .max_by(|a, b| a.weight.total_cmp(&b.weight))
            .unwrap_or(&self.services[0])
    }

    fn web_server(&self) -> Option<&Service> {
        self.service("/apache2").or_else(|| self.service("/httpd"))
    }

    /// The process of a service (or of the host's first service, which never happens for the
    /// hosts an attack fits).
    fn actor(&self, service: Option<&Service>) -> Actor {
        service.unwrap_or(&self.services[0]).actor
    }

    fn child_pid(&self, rng: &mut StdRng) -> i64 {
        if self.windows {
            rng.gen_range(500..25_000) * 4
        } else {
            rng.gen_range(2_000..4_194_304)
        }
    }
}

/// An injected attack, expanded into its events when injected.
struct Staged {
    events: Vec<Event>,
    /// Host and `[start, end)` during which its cpu is pinned near 100%.
    cpu_spike: Option<(usize, i64, i64)>,
    /// Time of its last effect.
    end: i64,
}

/// An attack that [`DemoGenerator::inject`] stages on a fitting host of the fleet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Attack {
    /// SAQL's APT chain on a Windows host: cmd.exe starts osql.exe; sqlservr.exe writes a dump
    /// file (obj_name ending in .dmp); a new process (`C:\Users\Public\sbblv.exe`) reads that
    /// dump; it then writes 50,000,000 bytes to an external IP. Steps a few seconds apart.
    DataExfiltration,
    /// One host's busiest service sends about 6,000,000 bytes per 10 s to one IP for a minute,
    /// far above its peers.
    NetworkOutlier,
    /// A web server (apache2/httpd) starts a child it never starts normally: /bin/bash, which
    /// starts /usr/bin/wget.
    UnusualChild,
    /// 40 login_failed for one account within a minute from one host's sshd, then a login.
    BruteForce,
    /// host_metrics cpu jumps to ~99 for 30 s on one host.
    CpuSpike,
}

impl Attack {
    /// Every attack, in declaration order.
    pub const ALL: [Attack; 5] = [
        Attack::DataExfiltration,
        Attack::NetworkOutlier,
        Attack::UnusualChild,
        Attack::BruteForce,
        Attack::CpuSpike,
    ];

    /// The attack's name in snake case, e.g. `data_exfiltration`.
    pub fn name(self) -> &'static str {
        match self {
            Attack::DataExfiltration => "data_exfiltration",
            Attack::NetworkOutlier => "network_outlier",
            Attack::UnusualChild => "unusual_child",
            Attack::BruteForce => "brute_force",
            Attack::CpuSpike => "cpu_spike",
        }
    }

    fn fits(self, host: &Host) -> bool {
        match self {
            Attack::DataExfiltration => host.service("sqlservr.exe").is_some(),
            Attack::UnusualChild => host.web_server().is_some(),
            Attack::BruteForce => host.service("/sshd").is_some(),
            Attack::NetworkOutlier | Attack::CpuSpike => true,
        }
    }
}

/// Generates the demo fleet's `proc_events` and `host_metrics`; see the module docs.
pub struct DemoGenerator {
    seed: u64,
    rate: f64,
    hosts: Vec<Host>,
    staged: Vec<Staged>,
    injected: usize,
}

impl DemoGenerator {
    /// A fleet of `hosts` hosts (at least one) named `web-01`, `win-01`, `db-01`, `app-01`,
    /// `web-02`, ...: any two or more mix Linux and Windows. Same seed, same fleet, same events.
    pub fn new(seed: u64, hosts: usize) -> Self {
        let mut numbers: HashMap<&str, usize> = HashMap::new();
        let hosts = (0..hosts.max(1))
            .map(|i| {
                let role = &ROLES[i % ROLES.len()];
                let number = numbers.entry(role.0).or_default();
                *number += 1;
                Host::new(seed, i, role, format!("{}-{:02}", role.0, number))
            })
            .collect();
        DemoGenerator {
            seed,
            rate: DEFAULT_RATE,
            hosts,
            staged: Vec::new(),
            injected: 0,
        }
    }

    /// The `CREATE STREAM` statements for the streams this generator feeds, separated by `;`
    /// and a newline.
    pub fn streams_ddl() -> &'static str {
        STREAMS_DDL
    }

    /// The Arrow schema of `proc_events`, in DDL column order.
    pub fn proc_events_schema() -> SchemaRef {
        static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
            let text = |name| Field::new(name, DataType::Utf8, true);
            let bigint = |name| Field::new(name, DataType::Int64, true);
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
                text("host"),
                bigint("pid"),
                bigint("ppid"),
                text("user_name"),
                text("exe"),
                text("op"),
                text("obj_type"),
                text("obj_name"),
                text("dst_ip"),
                bigint("amount"),
            ]))
        });
        SCHEMA.clone()
    }

    /// The Arrow schema of `host_metrics`, in DDL column order.
    pub fn host_metrics_schema() -> SchemaRef {
        static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
                Field::new("host", DataType::Utf8, true),
                Field::new("cpu", DataType::Float64, true),
                Field::new("mem", DataType::Float64, true),
                Field::new("net_out", DataType::Int64, true),
                Field::new("disk_io", DataType::Int64, true),
            ]))
        });
        SCHEMA.clone()
    }

    /// Sets the background rate in `proc_events` rows per second per host (default 20).
    /// Negative or NaN rates mean no background events; rates are capped at 1,000,000.
    pub fn with_rate(mut self, events_per_second_per_host: f64) -> Self {
        let rate = events_per_second_per_host;
        self.rate = if rate > 0.0 { rate.min(MAX_RATE) } else { 0.0 };
        self
    }

    /// The fleet's host names, in the order they were created.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }

    /// All events with event time in [from, to), in nondecreasing ts order within each batch,
    /// as (stream name, batch) pairs; roughly `rate` proc events per second per host (rate set
    /// by `with_rate`, default 20). Streams with no rows in the range are left out. A range
    /// longer than a day, or outside the years 1824 to 2116, is rejected (22023).
    pub fn generate(
        &mut self,
        from: EventTime,
        to: EventTime,
    ) -> Result<Vec<(&'static str, RecordBatch)>> {
        let (from, to) = (from.nanos(), to.nanos());
        if from >= to {
            return Ok(Vec::new());
        }
        if from < -TIME_LIMIT || to > TIME_LIMIT || to - from > MAX_RANGE {
            return Err(Error::invalid_input(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!(
                    "demo range [{}, {}) is too long or out of bounds; generate at most one day \
                     at a time, between the years 1824 and 2116",
                    EventTime(from),
                    EventTime(to)
                ),
            ));
        }
        let in_range = |ts: i64| ts >= from && ts < to;
        let staged = || self.staged.iter().flat_map(|s| &s.events);
        let (first, last) = (from.div_euclid(NANOS), (to - 1).div_euclid(NANOS));
        let mut events: Vec<Event> = Vec::new();
        let mut metrics = Vec::with_capacity((last - first + 1) as usize * self.hosts.len());
        let mut previous = vec![Traffic::default(); self.hosts.len()];
        let mut second_events = Vec::new();
        // One second early: children started then may exit inside the range, and the first
        // metrics row reports the traffic of the second before it.
        for second in first - 1..=last {
            let ts = second * NANOS;
            for (h, previous) in previous.iter_mut().enumerate() {
                second_events.clear();
                self.background_second(h, second, &mut second_events);
                if in_range(ts) {
                    let mut traffic = *previous;
                    let before = |e: &&Event| e.actor.host == h && (ts - NANOS..ts).contains(&e.ts);
                    staged().filter(before).for_each(|e| traffic.add(e));
                    let spiking = |(sh, start, end)| sh == h && (start..end).contains(&ts);
                    let spike = self.staged.iter().filter_map(|s| s.cpu_spike).any(spiking);
                    metrics.push(self.metrics_row(h, second, traffic, spike));
                }
                *previous = Traffic::default();
                second_events.iter().for_each(|e| previous.add(e));
                events.extend(second_events.iter().filter(|e| in_range(e.ts)));
            }
        }
        events.extend(staged().filter(|e| in_range(e.ts)));
        events.sort_by_key(|e| e.ts);
        self.staged
            .retain(|s| s.end.saturating_add(2 * NANOS) >= to);

        let mut out = Vec::with_capacity(2);
        if !events.is_empty() {
            out.push((PROC_EVENTS, self.proc_batch(&events)?));
        }
        if !metrics.is_empty() {
            out.push((HOST_METRICS, self.metrics_batch(&metrics)?));
        }
        Ok(out)
    }

    /// Stages `attack` on a fitting host, rotating through the fitting hosts on each injection.
    /// Its events start at `at` and unfold over the following seconds (a minute at most); each
    /// later `generate` call emits the part that falls in its range, so the call whose range
    /// covers `at` emits its first step. Parts that fall before a call's range are never
    /// emitted. An attack no host of the fleet can stage (DataExfiltration needs a Windows host)
    /// is skipped with a warning.
    pub fn inject(&mut self, attack: Attack, at: EventTime) {
        let fitting: Vec<usize> = (0..self.hosts.len())
            .filter(|&h| attack.fits(&self.hosts[h]))
            .collect();
        if fitting.is_empty() {
            tracing::warn!(
                attack = attack.name(),
                "no host in the demo fleet can stage this attack; skipped"
            );
            return;
        }
        let h = fitting[self.injected % fitting.len()];
        self.injected += 1;
        let at = at.nanos().clamp(-TIME_LIMIT, TIME_LIMIT);
        let mut rng = StdRng::seed_from_u64(mix(&[
            self.seed,
            TAG_ATTACK,
            self.injected as u64,
            at as u64,
        ]));
        let staged = self.stage(attack, h, at, &mut rng);
        self.staged.push(staged);
    }

    fn stage(&self, attack: Attack, h: usize, at: i64, rng: &mut StdRng) -> Staged {
        let host = &self.hosts[h];
        let ms = |n: i64| at + n * MS;
        let mut events = Vec::new();
        let mut cpu_spike = None;
        match attack {
            Attack::DataExfiltration => {
                let sql = host.actor(host.service("sqlservr.exe"));
                let shell = Actor {
                    host: h,
                    pid: host.child_pid(rng),
                    ppid: host.child_pid(rng),
                    user: r"CORP\svc_backup",
                    exe: CMD,
                };
                let osql = shell.child(host.child_pid(rng), OSQL);
                let dropper = shell.child(host.child_pid(rng), DROPPER);
                let dump_size = 48_213_504;
                events.extend([
                    shell.start(ms(0), &osql),
                    osql.at(ms(500), Op::Connect, Obj::Ip("127.0.0.1"), Some(612)),
                    sql.at(ms(3_000), Op::Write, Obj::File(DUMP), Some(dump_size)),
                    osql.exit(ms(3_500)),
                    shell.start(ms(6_000), &dropper),
                    dropper.at(ms(7_000), Op::Read, Obj::File(DUMP), Some(dump_size)),
                    dropper.at(ms(10_000), Op::Connect, Obj::Ip(EXFIL_IP), Some(517)),
                    dropper.at(ms(11_000), Op::Write, Obj::Ip(EXFIL_IP), Some(50_000_000)),
                    dropper.exit(ms(13_000)),
                ]);
            }
            Attack::NetworkOutlier => {
                let sender = host.main_service().actor;
                let write =
                    |ts, amount| sender.at(ts, Op::Write, Obj::Ip(OUTLIER_IP), Some(amount));
                events.push(sender.at(ms(0), Op::Connect, Obj::Ip(OUTLIER_IP), Some(517)));
                for i in 0..240 {
                    let amount = rng.gen_range(120_000..180_000);
                    events.push(write(ms(100 + 250 * i), amount));
                }
            }
            Attack::UnusualChild => {
                let web = host.actor(host.web_server());
                let bash = web.child(host.child_pid(rng), "/bin/bash");
                let wget = bash.child(host.child_pid(rng), "/usr/bin/wget");
                let kit = "/tmp/.cache/kit.tar.gz";
                events.extend([
                    web.start(ms(0), &bash),
                    bash.start(ms(1_000), &wget),
                    wget.at(ms(1_500), Op::Connect, Obj::Ip(DOWNLOAD_IP), Some(320)),
                    wget.at(ms(2_000), Op::Write, Obj::File(kit), Some(1_843_200)),
                    wget.exit(ms(2_500)),
                    bash.at(ms(3_000), Op::Read, Obj::File(kit), Some(1_843_200)),
                    bash.exit(ms(4_000)),
                ]);
            }
            Attack::BruteForce => {
                let sshd = host.actor(host.service("/sshd"));
                for i in 0..40 {
                    let ts = ms(1_200 * i + rng.gen_range(0..300));
                    events.push(sshd.login(ts, Op::LoginFailed, "admin", BRUTE_FORCE_IP));
                }
                events.push(sshd.login(ms(50_000), Op::Login, "admin", BRUTE_FORCE_IP));
            }
            Attack::CpuSpike => cpu_spike = Some((h, at, ms(30_000))),
        }
        let end = events
            .iter()
            .map(|e| e.ts)
            .max()
            .unwrap_or(at)
            .max(cpu_spike.map_or(at, |s| s.2));
        Staged {
            events,
            cpu_spike,
            end,
        }
    }

    /// The background events of host `h` that start in one second (a started child's exit may
    /// fall in the next second).
    fn background_second(&self, h: usize, second: i64, out: &mut Vec<Event>) {
        let host = &self.hosts[h];
        let mut rng = StdRng::seed_from_u64(mix(&[self.seed, TAG_EVENTS, h as u64, second as u64]));
        let start = second * NANOS;
        let lambda = self.rate / host.events_per_activity;
        if lambda > 0.0 {
            let mut t = exponential(&mut rng, lambda);
            while t < 1.0 {
                self.activity(host, start + (t * NANOS as f64) as i64, &mut rng, out);
                t += exponential(&mut rng, lambda);
            }
        }
        if let Some(sshd) = host.service("/sshd") {
            if rng.gen::<f64>() < FAILED_LOGINS_PER_HOUR / 3600.0 {
                let account = pick(&mut rng, &["root", "admin", "test", "oracle", "ubuntu"]);
                let client = pick(&mut rng, &["198.51.100.31", "198.51.100.77", "192.0.2.140"]);
                let ts = start + rng.gen_range(0..NANOS);
                out.push(sshd.actor.login(ts, Op::LoginFailed, account, client));
            }
            if rng.gen::<f64>() < LOGINS_PER_HOUR / 3600.0 {
                let account = pick(&mut rng, &["deploy", "alice", "ops"]);
                let ts = start + rng.gen_range(0..NANOS);
                out.push(sshd.actor.login(ts, Op::Login, account, "10.0.0.5"));
            }
        }
    }

    fn activity(&self, host: &Host, ts: i64, rng: &mut StdRng, out: &mut Vec<Event>) {
        let total = host.activities.last().map_or(0.0, |a| a.0);
        let x = rng.gen::<f64>() * total;
        let i = host
            .activities
            .partition_point(|a| a.0 <= x)
            .min(host.activities.len() - 1);
        let (_, s, a) = host.activities[i];
        let (op, pool, lo, hi, _) = ACTIONS[a];
        let service = &host.services[s];
        let name = pick(rng, &service.pools[pool as usize]);
        let obj = match pool {
            Pool::Reads | Pool::Writes => Obj::File(name),
            Pool::Peers => Obj::Ip(name),
            Pool::Children => {
                let child = service.actor.child(host.child_pid(rng), name);
                out.push(service.actor.start(ts, &child));
                out.push(child.exit(ts + rng.gen_range(5..900) * MS));
                return;
            }
        };
        out.push(
            service
                .actor
                .at(ts, op, obj, Some(log_uniform(rng, lo, hi))),
        );
    }

    /// The `host_metrics` row of host `h` at the start of `second`; `traffic` is what its
    /// processes moved during the second before.
    fn metrics_row(&self, h: usize, second: i64, traffic: Traffic, spike: bool) -> MetricsRow {
        let host = &self.hosts[h];
        let key = |tag: u64| mix(&[self.seed, tag, h as u64]);
        let t = second as f64;
        let cpu = if spike {
            97.0 + 2.9 * unit(key(TAG_CPU_NOISE), second)
        } else {
            // Busiest around 14:00 UTC.
            let daily = (TAU * (t.rem_euclid(86_400.0) / 86_400.0 - 8.0 / 24.0)).sin();
            host.cpu_base
                + 10.0 * daily
                + 8.0 * smooth_noise(key(TAG_CPU_SLOW), t / 60.0)
                + 4.0 * smooth_noise(key(TAG_CPU_SLOWER), t / 600.0)
                + 2.0 * (2.0 * unit(key(TAG_CPU_NOISE), second) - 1.0)
        };
        let mem = host.mem_base
            + 6.0 * smooth_noise(key(TAG_MEM_SLOW), t / 1_800.0)
            + 2.0 * smooth_noise(key(TAG_MEM_SLOWER), t / 300.0);
        let net_out = traffic.net + 2_000 + (6_000.0 * unit(key(TAG_NET), second)) as i64;
        let disk_io = traffic.disk + 10_000 + (50_000.0 * unit(key(TAG_DISK), second)) as i64;
        let round = |x: f64| (x.clamp(0.0, 100.0) * 100.0).round() / 100.0;
        let (cpu, mem) = (round(cpu), round(mem));
        MetricsRow {
            ts: second * NANOS,
            host: h,
            cpu,
            mem,
            net_out,
            disk_io,
        }
    }

    fn proc_batch(&self, events: &[Event]) -> Result<RecordBatch> {
        let text = |f: fn(&Event) -> &'static str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(events.iter().map(f)))
        };
        let int = |f: fn(&Event) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(events.iter().map(f)))
        };
        let hosts = events
            .iter()
            .map(|e| self.hosts[e.actor.host].name.as_str());
        let columns = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                events.iter().map(|e| e.ts),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(hosts)),
            int(|e| e.actor.pid),
            int(|e| e.actor.ppid),
            text(|e| e.actor.user),
            text(|e| e.actor.exe),
            text(|e| e.op.as_str()),
            text(|e| e.obj.parts().0),
            text(|e| e.obj.parts().1),
            Arc::new(events.iter().map(|e| e.dst_ip).collect::<StringArray>()),
            Arc::new(events.iter().map(|e| e.amount).collect::<Int64Array>()),
        ];
        Ok(RecordBatch::try_new(Self::proc_events_schema(), columns)?)
    }

    fn metrics_batch(&self, rows: &[MetricsRow]) -> Result<RecordBatch> {
        let float = |f: fn(&MetricsRow) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
        };
        let int = |f: fn(&MetricsRow) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let hosts = rows.iter().map(|r| self.hosts[r.host].name.as_str());
        let columns = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.ts),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(hosts)),
            float(|r| r.cpu),
            float(|r| r.mem),
            int(|r| r.net_out),
            int(|r| r.disk_io),
        ];
        Ok(RecordBatch::try_new(Self::host_metrics_schema(), columns)?)
    }
}

/// One `host_metrics` row.
struct MetricsRow {
    ts: i64,
    host: usize,
    cpu: f64,
    mem: f64,
    net_out: i64,
    disk_io: i64,
}

/// Folds values into one well-mixed seed (SplitMix64 finalizer over each step).
fn mix(values: &[u64]) -> u64 {
    values.iter().fold(0x9E37_79B9_7F4A_7C15, |acc, &v| {
        let mut z = (acc ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// A uniform value in [0, 1) fixed by `key` and `i`.
fn unit(key: u64, i: i64) -> f64 {
    (mix(&[key, i as u64]) >> 11) as f64 / (1u64 << 53) as f64
}

/// Smooth value noise in [-1, 1]: random values at integer `x`, eased in between.
fn smooth_noise(key: u64, x: f64) -> f64 {
    let k = x.floor();
    let f = x - k;
    let (a, b) = (unit(key, k as i64), unit(key, k as i64 + 1));
    let eased = f * f * (3.0 - 2.0 * f);
    2.0 * (a + (b - a) * eased) - 1.0
}

/// A gap between Poisson arrivals at `lambda` per second, in seconds.
fn exponential(rng: &mut StdRng, lambda: f64) -> f64 {
    -(1.0 - rng.gen::<f64>()).ln() / lambda
}

/// A whole number between `lo` and `hi`, uniform in its logarithm: mostly small, some large.
fn log_uniform(rng: &mut StdRng, lo: i64, hi: i64) -> i64 {
    (lo as f64 * (hi as f64 / lo as f64).powf(rng.gen::<f64>())) as i64
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.gen_range(0..items.len())]
}

#[cfg(test)]
mod tests {
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
        assert_eq!(statements.len(), 2);
        let schemas = [
            (PROC_EVENTS, DemoGenerator::proc_events_schema()),
            (HOST_METRICS, DemoGenerator::host_metrics_schema()),
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
        assert_eq!(a.len(), 2);
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
        for stream in [PROC_EVENTS, HOST_METRICS] {
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
                r.op == "start"
                    && r.exe.ends_with(r"\cmd.exe")
                    && r.obj_name.ends_with(r"\osql.exe")
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
            .find(|r| {
                r.op == "write" && r.obj_type == "ip" && r.pid == reader.pid && r.ts > reader.ts
            })
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
        assert!(failed.iter().all(|r| r.host == failed[0].host
            && r.exe == "/usr/sbin/sshd"
            && r.obj_type == "user"));
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
}
