//! Mutated ordinary SQL never gets an internal error (issue #30): the statements of
//! `queries/*.sql` and `tests/slt/*.slt`, each mutated a few times with a seeded, deterministic
//! generator (a token deleted, duplicated or swapped with the next; a non-ASCII identifier,
//! literal or comment put in), run in an engine holding the file's own streams and queries.
//! Each must succeed or fail with the SQLSTATE PostgreSQL would give (42601, 42703, 42883,
//! 42804, 0A000, 22xxx, ...), never panic and never answer XX000.

use std::collections::BTreeMap;
use std::panic::AssertUnwindSafe;
use std::path::Path;

use saql::{Engine, EngineConfig};

/// Mutants made of each statement (`SAQL_MUTANTS` for more).
const MUTANTS: usize = 12;

/// The generator's seed (`SAQL_MUTATION_SEED` for another sequence).
const SEED: u64 = 0x5eed_5a91;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// xorshift64*: small, seeded, the same sequence on every machine.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// SQL split into tokens: words, numbers, quoted strings and identifiers, single symbols.
/// Whitespace is dropped (tokens are joined with spaces again).
fn tokens(sql: &str) -> Vec<String> {
    let chars: Vec<char> = sql.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let start = i;
        if c.is_whitespace() {
            i += 1;
            continue;
        } else if c == '-' && chars.get(i + 1) == Some(&'-') {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
            }
            continue;
        } else if c == '\'' || c == '"' {
            i += 1;
            while i < chars.len() && chars[i] != c {
                i += 1;
            }
            i += 1;
        } else if c.is_alphanumeric() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
        } else {
            i += 1;
        }
        out.push(chars[start..i.min(chars.len())].iter().collect());
    }
    out
}

const NON_ASCII: &[&str] = &[
    "café",
    "\"naïve\"",
    "'日本語'",
    "'€'",
    "/* ünï */",
    "ß",
    "'é' || 'ü'",
    "\"Ω\"",
];

/// `tokens` with one to three mutations; `pool` holds the tokens of every file, for a token
/// replaced by one from another statement.
fn mutate(tokens: &[String], pool: &[String], rng: &mut Rng) -> String {
    let mut t = tokens.to_vec();
    for _ in 0..=rng.below(3) {
        mutate_once(&mut t, pool, rng);
    }
    t.join(" ")
}

fn mutate_once(t: &mut Vec<String>, pool: &[String], rng: &mut Rng) {
    if t.is_empty() {
        return;
    }
    let i = rng.below(t.len());
    match rng.below(6) {
        5 => t[i] = pool[rng.below(pool.len())].clone(),
        0 => {
            t.remove(i);
        }
        1 => {
            let dup = t[i].clone();
            t.insert(i, dup);
        }
        2 if i + 1 < t.len() => t.swap(i, i + 1),
        3 => {
            // A name or literal replaced by a non-ASCII one.
            let pick = NON_ASCII[rng.below(NON_ASCII.len())].to_string();
            t[i] = pick;
        }
        _ => {
            let pick = NON_ASCII[rng.below(NON_ASCII.len())].to_string();
            t.insert(i, pick);
        }
    }
}

/// The statements of a `.slt` file (the SQL of each `statement` and `query` record) or of a
/// `.sql` file (split at semicolons outside quotes).
fn statements(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap();
    if path.extension().is_some_and(|e| e == "slt") {
        let mut out = Vec::new();
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            if !(line.starts_with("statement") || line.starts_with("query")) {
                continue;
            }
            let sql: Vec<&str> = lines
                .by_ref()
                .take_while(|l| !l.trim().is_empty() && *l != "----")
                .collect();
            out.push(sql.join("\n"));
        }
        return out;
    }
    let mut out = Vec::new();
    let mut current = String::new();
    let mut quote = None;
    for line in text.lines() {
        let line = if quote.is_none() && line.trim_start().starts_with("--") {
            ""
        } else {
            line
        };
        for c in line.chars() {
            match (quote, c) {
                (None, '\'' | '"') => quote = Some(c),
                (Some(q), c) if c == q => quote = None,
                (None, ';') => {
                    out.push(std::mem::take(&mut current));
                    continue;
                }
                _ => {}
            }
            current.push(c);
        }
        current.push('\n');
    }
    out.push(current);
    out.into_iter().filter(|s| !s.trim().is_empty()).collect()
}

/// What describing `sql` (as the extended protocol's Describe does) and then running it
/// gave: None when each succeeded or failed with a SQLSTATE other than XX000; the message
/// otherwise (a panic is reported as one).
fn internal_error(engine: &Engine, sql: &str) -> Option<String> {
    let describe = std::panic::catch_unwind(AssertUnwindSafe(|| {
        futures::executor::block_on(engine.describe(sql)).map(|_| ())
    }));
    let run = describe.and_then(|described| match described {
        Err(e) if e.sqlstate() == "XX000" => Ok(Err(e)),
        _ => std::panic::catch_unwind(AssertUnwindSafe(|| {
            engine.execute_blocking(sql).map(|_| ())
        })),
    });
    match run {
        Ok(Ok(_)) => None,
        Ok(Err(e)) if e.sqlstate() == "XX000" => Some(e.to_string()),
        Ok(Err(_)) => None,
        Err(panic) => Some(format!(
            "panic: {}",
            panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default()
        )),
    }
}

/// A message with its numbers and quoted names taken out: one per source of the error.
fn source_of(message: &str) -> String {
    let mut out = String::new();
    let mut quoted = false;
    for c in message.chars().take(120) {
        match c {
            '"' | '\'' => {
                quoted = !quoted;
                out.push('…');
            }
            _ if quoted => {}
            c if c.is_ascii_digit() => {}
            c => out.push(c),
        }
    }
    out
}

#[test]
fn mutated_statements_never_give_an_internal_error() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files: Vec<_> = ["queries", "tests/slt"]
        .iter()
        .flat_map(|dir| std::fs::read_dir(root.join(dir)).unwrap())
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql" || e == "slt"))
        .collect();
    files.sort();
    // The queries/ files read the streams of queries/00_streams.sql.
    let streams = statements(&root.join("queries/00_streams.sql"));
    let mut pool: Vec<String> = files
        .iter()
        .flat_map(|f| statements(f))
        .flat_map(|s| tokens(&s))
        .collect();
    pool.sort();
    pool.dedup();
    let mut found: BTreeMap<String, (String, String)> = BTreeMap::new();
    let mut rng = Rng(env_or("SAQL_MUTATION_SEED", SEED).max(1));
    let mutants = env_or("SAQL_MUTANTS", MUTANTS as u64) as usize;
    let mut runs = 0;
    for file in &files {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        let own = statements(file);
        let setup = if file.extension().is_some_and(|e| e == "sql") {
            streams.iter().chain(&own).collect::<Vec<_>>()
        } else {
            own.iter().collect()
        };
        for sql in &setup {
            let _ = engine.execute_blocking(sql);
        }
        for sql in &own {
            let t = tokens(sql);
            for _ in 0..mutants {
                let mutant = mutate(&t, &pool, &mut rng);
                runs += 1;
                if let Some(message) = internal_error(&engine, &mutant) {
                    let name = file.file_name().unwrap().to_string_lossy().into_owned();
                    found
                        .entry(source_of(&message))
                        .or_insert((format!("{name}: {mutant}"), message));
                }
            }
        }
    }
    eprintln!("{runs} mutated statements run");
    let report: Vec<String> = found
        .values()
        .map(|(sql, message)| format!("{message}\n    from {sql}"))
        .collect();
    assert!(
        found.is_empty(),
        "{} distinct internal errors in {runs} mutated statements:\n{}",
        found.len(),
        report.join("\n")
    );
}
