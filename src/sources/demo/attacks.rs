//! The attacks the demo can inject, each staged on a fitting host as a short chain of
//! events (or a cpu spike) the demo queries are written to find.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::fleet::{Actor, Obj, Op};
use super::{mix, DemoGenerator, Event, EventTime, Host, MS, TAG_ATTACK, TIME_LIMIT};

pub(super) const CMD: &str = r"C:\Windows\System32\cmd.exe";
pub(super) const OSQL: &str = r"C:\Program Files\Microsoft SQL Server\150\Tools\Binn\osql.exe";
pub(super) const DUMP: &str =
    r"C:\Program Files\Microsoft SQL Server\MSSQL16.MSSQLSERVER\MSSQL\Backup\sales.dmp";
pub(super) const DROPPER: &str = r"C:\Users\Public\sbblv.exe";
pub(super) const EXFIL_IP: &str = "203.0.113.66";
pub(super) const OUTLIER_IP: &str = "203.0.113.7";
pub(super) const DOWNLOAD_IP: &str = "203.0.113.9";
pub(super) const BRUTE_FORCE_IP: &str = "203.0.113.23";
pub(super) const INTRUDER_IP: &str = "198.51.100.99";
pub(super) const STAGER_IP: &str = "203.0.113.45";

/// An injected attack, expanded into its events when injected.
pub(super) struct Staged {
    pub(super) events: Vec<Event>,
    /// Host and `[start, end)` during which its cpu is pinned near 100%.
    pub(super) cpu_spike: Option<(usize, i64, i64)>,
    /// Time of its last effect.
    pub(super) end: i64,
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
    /// A stolen key: an ssh login as `deploy` from an outside address (198.51.100.99) whose
    /// second factor is never checked (sshd makes no call to the MFA service); the session's
    /// shell starts /usr/bin/curl, which connects out to 203.0.113.45 and saves a script.
    StolenKey,
}

impl Attack {
    /// Every attack, in declaration order.
    pub const ALL: [Attack; 6] = [
        Attack::DataExfiltration,
        Attack::NetworkOutlier,
        Attack::UnusualChild,
        Attack::BruteForce,
        Attack::CpuSpike,
        Attack::StolenKey,
    ];

    /// The attack's name in snake case, e.g. `data_exfiltration`.
    pub fn name(self) -> &'static str {
        match self {
            Attack::DataExfiltration => "data_exfiltration",
            Attack::NetworkOutlier => "network_outlier",
            Attack::UnusualChild => "unusual_child",
            Attack::BruteForce => "brute_force",
            Attack::CpuSpike => "cpu_spike",
            Attack::StolenKey => "stolen_key",
        }
    }

    pub(super) fn fits(self, host: &Host) -> bool {
        match self {
            Attack::DataExfiltration => host.service("sqlservr.exe").is_some(),
            Attack::UnusualChild => host.web_server().is_some(),
            Attack::BruteForce | Attack::StolenKey => host.service("/sshd").is_some(),
            Attack::NetworkOutlier | Attack::CpuSpike => true,
        }
    }
}

impl DemoGenerator {
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

    pub(super) fn stage(&self, attack: Attack, h: usize, at: i64, rng: &mut StdRng) -> Staged {
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
            Attack::StolenKey => {
                let sshd = host.actor(host.service("/sshd"));
                let session = Actor {
                    user: "deploy",
                    ..sshd
                };
                let shell = session.child(host.child_pid(rng), "/bin/bash");
                let curl = shell.child(host.child_pid(rng), "/usr/bin/curl");
                let script = "/tmp/.x/update.sh";
                events.extend([
                    sshd.login(ms(0), Op::Login, "deploy", INTRUDER_IP),
                    session.start(ms(800), &shell),
                    shell.start(ms(2_000), &curl),
                    curl.at(ms(2_300), Op::Connect, Obj::Ip(STAGER_IP), Some(412)),
                    curl.at(ms(2_900), Op::Write, Obj::File(script), Some(8_192)),
                    curl.exit(ms(3_000)),
                    shell.at(ms(4_000), Op::Read, Obj::File(script), Some(8_192)),
                ]);
            }
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
}
