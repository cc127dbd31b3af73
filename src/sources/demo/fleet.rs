//! The demo fleet: host roles and their long-running services (what each reads, writes,
//! starts and talks to), the processes acting on a host, and a host's background activity
//! second by second.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::net::MFA_IP;
use super::{
    exponential, log_uniform, mix, pick, DemoGenerator, FAILED_LOGINS_PER_HOUR, LOGINS_PER_HOUR,
    MS, NANOS, TAG_EVENTS, TAG_FLEET, TAG_MFA,
};

/// A long-running service and what it does in normal operation. The lists hold `|`-separated
/// entries: files it reads, files it writes, peers it sends to, children it starts.
pub(super) struct ServiceSpec {
    pub(super) exe: &'static str,
    pub(super) user: &'static str,
    /// Share of the host's activity, relative to the host's other services.
    pub(super) weight: f64,
    pub(super) reads: &'static str,
    pub(super) writes: &'static str,
    pub(super) peers: &'static str,
    pub(super) children: &'static str,
}

pub(super) const SSHD: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/sshd",
    user: "root",
    weight: 0.5,
    reads: "/etc/ssh/sshd_config|/etc/passwd|/etc/shadow",
    writes: "/var/log/auth.log",
    peers: "10.0.0.5",
    children: "",
};
pub(super) const CRON: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/cron",
    user: "root",
    weight: 0.3,
    reads: "/etc/crontab|/var/spool/cron/crontabs/root",
    writes: "/var/log/syslog",
    peers: "",
    children: "/bin/sh|/usr/sbin/logrotate",
};
pub(super) const NGINX: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/nginx",
    user: "www-data",
    weight: 3.0,
    reads: "/etc/nginx/nginx.conf|/var/www/html/index.html|/var/www/html/static/app.js",
    writes: "/var/log/nginx/access.log|/var/log/nginx/error.log",
    peers: "10.0.1.21|198.51.100.53",
    children: "",
};
pub(super) const APACHE2: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/apache2",
    user: "www-data",
    weight: 2.0,
    reads: "/etc/apache2/apache2.conf|/var/www/app/index.php|/var/www/app/config.php",
    writes: "/var/log/apache2/access.log|/var/log/apache2/error.log",
    peers: "10.0.2.10|10.0.1.21",
    children: "/usr/sbin/php-fpm8.2|/bin/sh",
};
pub(super) const HTTPD: ServiceSpec = ServiceSpec {
    exe: "/usr/sbin/httpd",
    user: "apache",
    weight: 3.0,
    reads: "/etc/httpd/conf/httpd.conf|/var/www/html/index.php|/var/www/html/login.php",
    writes: "/var/log/httpd/access_log|/var/log/httpd/error_log",
    peers: "10.0.2.10|198.51.100.20",
    children: "/usr/sbin/php-fpm|/bin/sh",
};
pub(super) const POSTGRES: ServiceSpec = ServiceSpec {
    exe: "/usr/lib/postgresql/16/bin/postgres",
    user: "postgres",
    weight: 3.0,
    reads: "/var/lib/postgresql/16/main/base/16384/2619|/etc/postgresql/16/main/postgresql.conf",
    writes: "/var/lib/postgresql/16/main/pg_wal/000000010000000000000042\
             |/var/log/postgresql/postgresql-16-main.log",
    peers: "10.0.1.11|10.0.1.21",
    children: "/usr/lib/postgresql/16/bin/postgres",
};
pub(super) const JAVA: ServiceSpec = ServiceSpec {
    exe: "/usr/bin/java",
    user: "app",
    weight: 3.0,
    reads: "/opt/app/config/application.yml|/opt/app/lib/app.jar",
    writes: "/opt/app/logs/app.log|/opt/app/data/cache.bin",
    peers: "10.0.2.10|198.51.100.20|192.0.2.80",
    children: "",
};
pub(super) const SQLSERVR: ServiceSpec = ServiceSpec {
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
pub(super) const SVCHOST: ServiceSpec = ServiceSpec {
    exe: r"C:\Windows\System32\svchost.exe",
    user: r"NT AUTHORITY\SYSTEM",
    weight: 1.5,
    reads: r"C:\Windows\System32\config\SOFTWARE|C:\Windows\System32\drivers\etc\hosts",
    writes: r"C:\Windows\System32\winevt\Logs\System.evtx",
    peers: "10.0.0.2|192.0.2.80",
    children: r"C:\Windows\System32\wbem\WmiPrvSE.exe|C:\Windows\System32\taskhostw.exe",
};
pub(super) const EXPLORER: ServiceSpec = ServiceSpec {
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
pub(super) struct Role(
    pub(super) &'static str,
    pub(super) bool,
    pub(super) &'static [ServiceSpec],
    pub(super) f64,
    pub(super) f64,
);

/// The fleet cycles through these, so two hosts already mix Linux and Windows.
pub(super) const ROLES: [Role; 8] = [
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
pub(super) enum Pool {
    Reads = 0,
    Writes = 1,
    Peers = 2,
    Children = 3,
}

/// The background events a service makes: op, object pool, amount range (log-uniform), and
/// relative frequency. A start also brings the child's exit shortly after.
pub(super) const ACTIONS: [(Op, Pool, i64, i64, f64); 5] = [
    (Op::Read, Pool::Reads, 512, 262_144, 0.35),
    (Op::Write, Pool::Writes, 64, 65_536, 0.25),
    (Op::Connect, Pool::Peers, 40, 1_500, 0.08),
    (Op::Write, Pool::Peers, 200, 65_536, 0.22),
    (Op::Start, Pool::Children, 1, 1, 0.10),
];

/// The `op` column.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Op {
    Start,
    Exit,
    Read,
    Write,
    Connect,
    LoginFailed,
    Login,
}

impl Op {
    pub(super) fn as_str(self) -> &'static str {
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
pub(super) enum Obj {
    Proc(&'static str),
    File(&'static str),
    Ip(&'static str),
    User(&'static str),
}

impl Obj {
    /// `obj_type` and `obj_name`.
    pub(super) fn parts(self) -> (&'static str, &'static str) {
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
pub(super) struct Actor {
    pub(super) host: usize,
    pub(super) pid: i64,
    pub(super) ppid: i64,
    pub(super) user: &'static str,
    pub(super) exe: &'static str,
}

impl Actor {
    pub(super) fn at(&self, ts: i64, op: Op, obj: Obj, amount: Option<i64>) -> Event {
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

    pub(super) fn child(&self, pid: i64, exe: &'static str) -> Actor {
        Actor {
            pid,
            ppid: self.pid,
            exe,
            ..*self
        }
    }

    pub(super) fn start(&self, ts: i64, child: &Actor) -> Event {
        self.at(ts, Op::Start, Obj::Proc(child.exe), None)
    }

    pub(super) fn exit(&self, ts: i64) -> Event {
        self.at(ts, Op::Exit, Obj::Proc(self.exe), None)
    }

    /// An ssh login attempt handled by this sshd: `user_name` is the account, `dst_ip` the client.
    pub(super) fn login(
        &self,
        ts: i64,
        op: Op,
        account: &'static str,
        client: &'static str,
    ) -> Event {
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
pub(super) struct Event {
    pub(super) ts: i64,
    pub(super) actor: Actor,
    pub(super) op: Op,
    pub(super) obj: Obj,
    pub(super) dst_ip: Option<&'static str>,
    pub(super) amount: Option<i64>,
}

/// Bytes a host moved in one second, which its next `host_metrics` row reports.
#[derive(Clone, Copy, Default)]
pub(super) struct Traffic {
    pub(super) net: i64,
    pub(super) disk: i64,
}

impl Traffic {
    pub(super) fn add(&mut self, e: &Event) {
        let amount = e.amount.unwrap_or(0);
        match (e.op, e.obj) {
            (Op::Write | Op::Connect, Obj::Ip(_)) => self.net += amount,
            (Op::Read | Op::Write, Obj::File(_)) => self.disk += amount,
            _ => {}
        }
    }
}

/// A running service of one host.
pub(super) struct Service {
    pub(super) actor: Actor,
    pub(super) weight: f64,
    /// Indexed by [`Pool`].
    pub(super) pools: [Vec<&'static str>; 4],
}

pub(super) struct Host {
    pub(super) name: String,
    pub(super) windows: bool,
    pub(super) services: Vec<Service>,
    /// Cumulative weight, service index, index into [`ACTIONS`]: the background event mix.
    pub(super) activities: Vec<(f64, usize, usize)>,
    /// Rows per background activity on average (a start also brings its child's exit).
    pub(super) events_per_activity: f64,
    pub(super) cpu_base: f64,
    pub(super) mem_base: f64,
}

impl Host {
    pub(super) fn new(seed: u64, index: usize, role: &'static Role, name: String) -> Host {
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
    pub(super) fn service(&self, suffix: &str) -> Option<&Service> {
        self.services.iter().find(|s| s.actor.exe.ends_with(suffix))
    }

    /// The busiest service that talks to peers.
    pub(super) fn main_service(&self) -> &Service {
        self.services
            .iter()
            .filter(|s| !s.pools[Pool::Peers as usize].is_empty())
            .max_by(|a, b| a.weight.total_cmp(&b.weight))
            .unwrap_or(&self.services[0])
    }

    pub(super) fn web_server(&self) -> Option<&Service> {
        self.service("/apache2").or_else(|| self.service("/httpd"))
    }

    /// The process of a service (or of the host's first service, which never happens for the
    /// hosts an attack fits).
    pub(super) fn actor(&self, service: Option<&Service>) -> Actor {
        service.unwrap_or(&self.services[0]).actor
    }

    pub(super) fn child_pid(&self, rng: &mut StdRng) -> i64 {
        if self.windows {
            rng.gen_range(500..25_000) * 4
        } else {
            rng.gen_range(2_000..4_194_304)
        }
    }
}

impl DemoGenerator {
    /// The background events of host `h` that start in one second (a started child's exit, or
    /// the second-factor check of a login, may fall in the next second).
    pub(super) fn background_second(&self, h: usize, second: i64, out: &mut Vec<Event>) {
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
                // Its second factor, checked within a second (drawn apart from `rng`, so that
                // it leaves the rest of the second as it was).
                let key = mix(&[self.seed, TAG_MFA, h as u64, second as u64]);
                let check = ts + (150 + (key % 750) as i64) * MS;
                let amount = 900 + (key >> 32) as i64 % 400;
                out.push(
                    sshd.actor
                        .at(check, Op::Connect, Obj::Ip(MFA_IP), Some(amount)),
                );
            }
        }
    }

    pub(super) fn activity(&self, host: &Host, ts: i64, rng: &mut StdRng, out: &mut Vec<Event>) {
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
}
