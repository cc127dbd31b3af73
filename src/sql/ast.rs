//! The AST of saql's own statements. Every node prints back to SQL that parses to the same
//! node (the round-trip tests in `parser.rs` check this), so the catalog can persist
//! statements as text.

use std::fmt;
use std::time::Duration;

use datafusion::sql::sqlparser::ast::{self as sq, Ident, ObjectName};

/// A parsed statement: one of ours, or plain SQL for sqlparser's AST.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `CREATE STREAM name (cols..., WATERMARK FOR ts AS ts - INTERVAL ...) [WITH (...)]`
    CreateStream(CreateStream),
    /// `DROP STREAM [IF EXISTS] name [CASCADE | RESTRICT]`
    DropStream {
        /// The stream.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
        /// Drop the queries that read it too (`CASCADE`); otherwise they must be dropped first.
        cascade: bool,
    },
    /// `CREATE CONTINUOUS QUERY name AS SELECT ...`
    CreateQuery(CreateQuery),
    /// `DROP QUERY [IF EXISTS] name`
    DropQuery {
        /// The query.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
        /// Drop the queries that read its results too (`CASCADE`).
        cascade: bool,
    },
    /// `CREATE SOURCE name FROM FILE 'path' | KAFKA (options) INTO {STREAM | TABLE} s [(col PATH
    /// '...')]`
    CreateSource(CreateSource),
    /// `DROP SOURCE [IF EXISTS] name`
    DropSource {
        /// The source.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
    },
    /// `SHOW SOURCES`
    ShowSources,
    /// `CREATE SINK name FROM query INTO WEBHOOK | KAFKA | POSTGRES (options)`
    CreateSink(super::sink::CreateSink),
    /// `DROP SINK [IF EXISTS] name`
    DropSink {
        /// The sink.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
    },
    /// `SHOW SINKS`
    ShowSinks,
    /// `CREATE TABLE name (cols..., PRIMARY KEY (k)) [WITH (max_rows = n)]`: a reference table.
    CreateTable(Box<sq::CreateTable>),
    /// `DROP TABLE [IF EXISTS] name [CASCADE | RESTRICT]`
    DropTable {
        /// The table.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
        /// Drop the queries that read it too (`CASCADE`); otherwise they must be dropped first.
        cascade: bool,
    },
    /// `SHOW TABLES`
    ShowTables,
    /// `ALTER CONTINUOUS QUERY name AS SELECT ...`: the query replaced, keeping its state.
    AlterQuery(CreateQuery),
    /// `ALTER STREAM name SET (history = '...')`
    AlterStream {
        /// The stream.
        name: Ident,
        /// The options to set, keys lowercased.
        options: Vec<(String, String)>,
    },
    /// `CREATE VIEW name AS SELECT ...`: a named query over a stream that other queries read
    /// as their stream; it runs only inside the queries that read it.
    CreateView(Box<sq::CreateView>),
    /// `DROP VIEW [IF EXISTS] name [CASCADE | RESTRICT]`
    DropView {
        /// The view.
        name: Ident,
        /// Succeed quietly when it does not exist.
        if_exists: bool,
        /// Drop the queries that read it too (`CASCADE`).
        cascade: bool,
    },
    /// `SHOW STREAMS`
    ShowStreams,
    /// `SHOW QUERIES`
    ShowQueries,
    /// `CHECKPOINT`: write a checkpoint of all state now (as PostgreSQL's CHECKPOINT does).
    Checkpoint,
    /// `SUBSCRIBE [TO] name [FROM n] [WITH SEQ | WITH (SNAPSHOT, SEQ, PROGRESS)]`, also over a
    /// filtered view (`SUBSCRIBE (SELECT ... FROM q WHERE ...)`) and as
    /// `COPY (SUBSCRIBE ...) TO STDOUT [WITH (FORMAT text | csv, HEADER)]`
    Subscribe(Subscribe),
    /// `COPY stream [(cols)] FROM STDIN [WITH (FORMAT csv, HEADER true, ...)]`
    CopyFrom(CopyFrom),
    /// `COPY (query) TO STDOUT`, `COPY stream [(cols)] TO STDOUT`
    CopyTo(super::CopyTo),
    /// `DECLARE name CURSOR FOR SUBSCRIBE q` or `... FOR SELECT ...`: a cursor of the
    /// connection, read with FETCH (psql's `\set FETCH_COUNT` uses this).
    DeclareCursor {
        /// Cursor name.
        name: Ident,
        /// What the cursor reads: `Subscribe` or a `Sql` query.
        target: Box<Statement>,
    },
    /// `FETCH [FORWARD] [n | ALL] [FROM] name [WITH (timeout = '1s')]`. On a subscription it
    /// waits until at least one row exists (or the timeout passes), then returns up to `n`.
    Fetch {
        /// Cursor name.
        name: Ident,
        /// Most rows to return; `None` for ALL.
        count: Option<u64>,
        /// Longest wait for a first row.
        timeout: Option<Duration>,
    },
    /// `CLOSE name` or `CLOSE ALL` (`None`).
    CloseCursor {
        /// Cursor name, or all.
        name: Option<Ident>,
    },
    /// `EXPLAIN [(FORMAT TEXT|JSON)] <continuous query>`: the body of a
    /// `CREATE CONTINUOUS QUERY`, a `SELECT` planned as one, or the name of a registered
    /// query.
    Explain {
        /// JSON rather than text.
        json: bool,
        /// What to explain.
        target: ExplainTarget,
    },
    /// Anything else: sqlparser's own statement (SELECT, INSERT, SET, SHOW, BEGIN, ...).
    Sql(Box<sq::Statement>),
}

/// What an EXPLAIN explains.
#[derive(Debug, Clone, PartialEq)]
pub enum ExplainTarget {
    /// `EXPLAIN CREATE CONTINUOUS QUERY ...`
    Create(CreateQuery),
    /// `EXPLAIN SELECT ... [OUTLIER ... | INVARIANT ...]`, planned as a continuous query.
    Query(Box<sq::Query>, Clauses),
    /// `EXPLAIN name` of a registered query.
    Named(Ident),
}

/// `CREATE STREAM`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateStream {
    /// Stream name.
    pub name: Ident,
    /// Columns in order.
    pub columns: Vec<ColumnDef>,
    /// The event-time column and how far the watermark trails it.
    pub watermark: Option<WatermarkDef>,
    /// `WITH (key = 'value', ...)` options, keys lowercased.
    pub options: Vec<(String, String)>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// `CREATE SOURCE`: rows that saql reads by itself from a file or Kafka into a stream (or
/// into a table, as upserts by its key).
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSource {
    /// Source name.
    pub name: Ident,
    /// Where the rows come from.
    pub connector: SourceConnector,
    /// `(key = 'value', ...)` options, keys lowercased.
    pub options: Vec<(String, String)>,
    /// The stream the rows go into (or the table, with `table`).
    pub stream: Ident,
    /// `INTO TABLE`: each record upserts a table's row by its key.
    pub table: bool,
    /// `(column PATH 'a.b', ...)`: where a JSON record holds each column (by default, the
    /// top-level field of the column's name).
    pub paths: Vec<(Ident, String)>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// What a source reads.
#[derive(Debug, Clone, PartialEq)]
pub enum SourceConnector {
    /// `FROM FILE 'path'`: a file of records, one per line.
    File(String),
    /// `FROM KAFKA`: a Kafka topic (brokers and topic are options).
    Kafka,
}

/// One column of a stream.
#[derive(Debug, Clone, PartialEq)]
pub struct ColumnDef {
    /// Column name.
    pub name: Ident,
    /// SQL type as written.
    pub data_type: sq::DataType,
    /// `NOT NULL`.
    pub not_null: bool,
}

/// `WATERMARK FOR ts AS ts - INTERVAL '5' SECOND`.
#[derive(Debug, Clone, PartialEq)]
pub struct WatermarkDef {
    /// The event-time column.
    pub column: Ident,
    /// How far the watermark trails the largest event time seen.
    pub delay: Duration,
}

/// `CREATE CONTINUOUS QUERY`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateQuery {
    /// Query name.
    pub name: Ident,
    /// `WITH (start = ...)`: first run the query over its stream's history from there.
    pub start: Option<BackfillStart>,
    /// The query body.
    pub query: Box<sq::Query>,
    /// saql's clauses after the body.
    pub clauses: Clauses,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// Where a backfill begins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackfillStart {
    /// `TIMESTAMP '...'`, in nanoseconds since the epoch.
    At(i64),
    /// `INTERVAL '...'`: this far behind the stream's newest event time.
    Back(std::time::Duration),
}

impl fmt::Display for BackfillStart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BackfillStart::At(nanos) => f.write_str(&timestamp_literal(*nanos)),
            BackfillStart::Back(d) => write!(f, "INTERVAL '{}' SECOND", d.as_secs_f64()),
        }
    }
}

/// The anomaly-model clauses that may follow a query body (at most one of them).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Clauses {
    /// `OUTLIER ...`
    pub outlier: Option<OutlierClause>,
    /// `INVARIANT ...`
    pub invariant: Option<InvariantClause>,
    /// `WITHIN INTERVAL '...'` after a `MATCH_RECOGNIZE` pattern. sqlparser does not know
    /// it, so the front end lifts it out of the query body, and [`query_sql`] puts it back.
    pub within: Option<sq::Expr>,
    /// The `PATTERN (...)` of the query's `MATCH_RECOGNIZE`: the front end reads it itself and
    /// leaves `PATTERN (_)` in the query body; [`query_sql`] puts it back.
    pub pattern: Option<super::pattern::RowPattern>,
    /// `SUBSET u = (a, b), ...` after a `MATCH_RECOGNIZE` pattern, lifted out like `within`.
    pub subsets: Vec<SubsetDef>,
    /// `WITHIN ... EMIT TIMEOUT`: a partial match that WITHIN ends is returned too.
    pub emit_timeout: bool,
    /// `SUPPRESS FOR INTERVAL '...' [PER (keys)]`, last of the clauses.
    pub suppress: Option<SuppressClause>,
}

/// `SUPPRESS FOR INTERVAL '10' MINUTE [PER (exprs)]`: after a result row is emitted for a key,
/// the key's further rows whose time is less than the interval after it are counted, not
/// emitted. A row's time is its `window_end` (else `window_start`, else the stream's
/// event-time column) among the result columns.
#[derive(Debug, Clone, PartialEq)]
pub struct SuppressClause {
    /// How long after an emitted row the key's repeats are suppressed.
    pub interval: Duration,
    /// Expressions over the result columns whose values make the key; none: one key.
    pub per: Vec<sq::Expr>,
}

impl fmt::Display for SuppressClause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SUPPRESS FOR {}", interval_sql(self.interval))?;
        if !self.per.is_empty() {
            let per: Vec<String> = self.per.iter().map(ToString::to_string).collect();
            write!(f, " PER ({})", per.join(", "))?;
        }
        Ok(())
    }
}

/// A duration as an SQL interval literal in the largest unit that states it exactly (hours
/// at most, microseconds at least).
pub fn interval_sql(d: Duration) -> String {
    let micros = d.as_micros().max(1);
    let (n, unit) = [
        (3_600_000_000, "HOUR"),
        (60_000_000, "MINUTE"),
        (1_000_000, "SECOND"),
    ]
    .into_iter()
    .find(|(size, _)| micros.is_multiple_of(*size))
    .map_or((micros, "MICROSECOND"), |(size, unit)| {
        (micros / size, unit)
    });
    format!("INTERVAL '{n}' {unit}")
}

/// `u = (a, b)` in a `SUBSET` clause: a union variable standing for the rows of `a` and `b`.
#[derive(Debug, Clone, PartialEq)]
pub struct SubsetDef {
    /// The union variable.
    pub name: sq::Ident,
    /// The pattern variables it stands for.
    pub vars: Vec<sq::Ident>,
}

impl fmt::Display for SubsetDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} = (", self.name)?;
        for (i, v) in self.vars.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{v}")?;
        }
        f.write_str(")")
    }
}

/// Writes `RUNNING(f(...))` and `FINAL(f(...))`, as the front end hands them to sqlparser,
/// back as SQL:2016 spells them: `RUNNING f(...)`, `FINAL f(...)`.
pub fn pattern_semantics_sql(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    // Byte offsets of the `)` to drop.
    let mut drop: Vec<usize> = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while i < text.len() {
        let rest = &text[i..];
        let word = ["RUNNING(", "FINAL("].into_iter().find(|w| {
            // Compared as bytes: `w` is ASCII, and slicing `rest` as text could cut a
            // character of a non-ASCII identifier or literal in two.
            rest.len() >= w.len()
                && rest.as_bytes()[..w.len()].eq_ignore_ascii_case(w.as_bytes())
                && (i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_'))
        });
        if let Some(w) = word {
            // Find the `)` that closes this `(`, outside string literals.
            let mut depth = 0i32;
            let mut quoted = false;
            for (k, c) in text[i + w.len() - 1..].char_indices() {
                match c {
                    '\'' => quoted = !quoted,
                    '(' if !quoted => depth += 1,
                    ')' if !quoted => {
                        depth -= 1;
                        if depth == 0 {
                            drop.push(i + w.len() - 1 + k);
                            break;
                        }
                    }
                    _ => {}
                }
            }
            out.push_str(&w[..w.len() - 1]);
            out.push(' ');
            i += w.len();
            continue;
        }
        let c = rest.chars().next().unwrap_or(' ');
        if !drop.contains(&i) {
            out.push(c);
        }
        i += c.len_utf8();
    }
    out
}

/// A query body with its clauses as SQL: the pattern returns into `PATTERN (...)`, and
/// `SUBSET` and `WITHIN` to their place after it.
pub fn query_sql(query: &sq::Query, clauses: &Clauses) -> String {
    let mut text = pattern_semantics_sql(&query.to_string());
    if let Some(pattern) = &clauses.pattern {
        if let Some(at) = text
            .find("MATCH_RECOGNIZE(")
            .and_then(|m| text[m..].find("PATTERN (_)").map(|p| m + p))
        {
            text.replace_range(
                at..at + "PATTERN (_)".len(),
                &format!("PATTERN ({pattern})"),
            );
        }
    }
    let mut lifted = String::new();
    if !clauses.subsets.is_empty() {
        lifted.push_str(" SUBSET ");
        for (i, s) in clauses.subsets.iter().enumerate() {
            if i > 0 {
                lifted.push_str(", ");
            }
            lifted.push_str(&s.to_string());
        }
    }
    if let Some(within) = &clauses.within {
        lifted.push_str(&format!(" WITHIN {within}"));
        if clauses.emit_timeout {
            lifted.push_str(" EMIT TIMEOUT");
        }
    }
    if !lifted.is_empty() {
        let at = text
            .find("MATCH_RECOGNIZE(")
            .and_then(|m| text[m..].find("PATTERN (").map(|p| m + p))
            .and_then(|p| text[p..].find(") DEFINE ").map(|d| p + d + 1));
        match at {
            Some(at) => text.insert_str(at, &lifted),
            None => text.push_str(&lifted),
        }
    }
    text.push_str(&clauses.to_string());
    text
}

impl fmt::Display for Clauses {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(o) = &self.outlier {
            write!(f, " {o}")?;
        }
        if let Some(i) = &self.invariant {
            write!(f, " {i}")?;
        }
        if let Some(s) = &self.suppress {
            write!(f, " {s}")?;
        }
        Ok(())
    }
}

/// `INVARIANT SET (exprs) | RANGE (expr) [PER (keys)] TRAINING n WINDOWS | INTERVAL '...' |
/// UNTIL TIMESTAMP '...' | BETWEEN TIMESTAMP '...' AND TIMESTAMP '...' [MIN SUPPORT n]
/// [OFFLINE | ONLINE]`:
/// learns, per key, the set of values (or their range) during training, then emits the result
/// rows that break it, with a `violation` column saying how.
#[derive(Debug, Clone, PartialEq)]
pub struct InvariantClause {
    /// Learn a set of values (`SET`) or a numeric range (`RANGE`).
    pub kind: InvariantKind,
    /// The learned expressions over the result columns.
    pub exprs: Vec<sq::Expr>,
    /// One invariant per value of these.
    pub per: Vec<sq::Expr>,
    /// How long to learn.
    pub training: Training,
    /// `MIN SUPPORT n` (SET only): a value is learned only once training has seen it in n
    /// rows, so what training saw rarely (an attack under way while it learns) stays
    /// anomalous. 1 when absent.
    pub min_support: u32,
    /// `ONLINE`: keep learning after training (each new value alerts once).
    pub online: bool,
}

/// What an invariant learns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum InvariantKind {
    /// The set of distinct values.
    Set,
    /// The minimum and maximum.
    Range,
}

/// An invariant's training period.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Training {
    /// The first n windows with results.
    Windows(u64),
    /// Until the watermark has advanced this far past the first row.
    Interval(Duration),
    /// A fixed period of event time, `[from, until)` in nanoseconds since the epoch: a clean
    /// period the user vouches for. Rows before `from` are neither learned nor checked.
    Between {
        /// The first instant learned from; from the first row when absent.
        from: Option<i64>,
        /// The first instant checked.
        until: i64,
    },
}

/// A timestamp in nanoseconds as `TIMESTAMP '...'` SQL text.
pub fn timestamp_literal(nanos: i64) -> String {
    let t = chrono::DateTime::from_timestamp_nanos(nanos).naive_utc();
    format!("TIMESTAMP '{}'", t.format("%Y-%m-%d %H:%M:%S%.f"))
}

impl fmt::Display for InvariantClause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[sq::Expr]| {
            v.iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let kind = match self.kind {
            InvariantKind::Set => "SET",
            InvariantKind::Range => "RANGE",
        };
        write!(f, "INVARIANT {kind} ({})", list(&self.exprs))?;
        if !self.per.is_empty() {
            write!(f, " PER ({})", list(&self.per))?;
        }
        match self.training {
            Training::Windows(n) => write!(f, " TRAINING {n} WINDOWS")?,
            Training::Interval(d) => {
                write!(f, " TRAINING INTERVAL '{}' MILLISECOND", d.as_millis())?
            }
            Training::Between { from, until } => {
                let until = timestamp_literal(until);
                match from {
                    Some(from) => write!(
                        f,
                        " TRAINING BETWEEN {} AND {until}",
                        timestamp_literal(from)
                    )?,
                    None => write!(f, " TRAINING UNTIL {until}")?,
                }
            }
        }
        if self.min_support > 1 {
            write!(f, " MIN SUPPORT {}", self.min_support)?;
        }
        f.write_str(if self.online { " ONLINE" } else { " OFFLINE" })
    }
}

/// `OUTLIER method(args) ON (columns) [PARTITION BY exprs] [HAVING condition]`: marks, among
/// the complete group results of each window, the rows that are outliers. Adds the columns
/// `is_outlier` and `outlier_score`; the trailing `HAVING` may filter on them.
#[derive(Debug, Clone, PartialEq)]
pub struct OutlierClause {
    /// The detection method.
    pub method: OutlierMethod,
    /// Numeric result columns that make up each point.
    pub on: Vec<Ident>,
    /// Outliers are found among rows with equal values of these.
    pub partition_by: Vec<sq::Expr>,
    /// Condition over the result columns plus `is_outlier` and `outlier_score`.
    pub having: Option<sq::Expr>,
}

/// How outliers are found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum OutlierMethod {
    /// Density clustering: points that are not within `eps` of a core point (one with at
    /// least `min_points` neighbours, itself included) are outliers. Score: distance to the
    /// nearest core point.
    Dbscan {
        /// Neighbourhood radius.
        eps: f64,
        /// Neighbours (including the point) that make a core point.
        min_points: usize,
    },
    /// k-means (deterministic initialisation): points farther than `threshold` from their
    /// centroid are outliers. Score: that distance.
    Kmeans {
        /// Number of clusters.
        k: usize,
        /// Distance beyond which a point is an outlier.
        threshold: f64,
    },
    /// Score: largest absolute z-score over the columns (population standard deviation).
    Zscore {
        /// Score above which a point is an outlier.
        threshold: f64,
    },
    /// Score: largest robust z-score, 0.6745 * |x - median| / MAD.
    Mad {
        /// Score above which a point is an outlier.
        threshold: f64,
    },
    /// Outside [Q1 - factor * IQR, Q3 + factor * IQR]. Score: distance beyond the fence in
    /// IQRs.
    Iqr {
        /// Fence factor, usually 1.5.
        factor: f64,
    },
}

impl fmt::Display for OutlierMethod {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OutlierMethod::Dbscan { eps, min_points } => {
                write!(f, "DBSCAN(eps => {eps}, min_points => {min_points})")
            }
            OutlierMethod::Kmeans { k, threshold } => {
                write!(f, "KMEANS(k => {k}, threshold => {threshold})")
            }
            OutlierMethod::Zscore { threshold } => write!(f, "ZSCORE(threshold => {threshold})"),
            OutlierMethod::Mad { threshold } => write!(f, "MAD(threshold => {threshold})"),
            OutlierMethod::Iqr { factor } => write!(f, "IQR(factor => {factor})"),
        }
    }
}

impl fmt::Display for OutlierClause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let on: Vec<String> = self.on.iter().map(|c| c.to_string()).collect();
        write!(f, "OUTLIER {} ON ({})", self.method, on.join(", "))?;
        if !self.partition_by.is_empty() {
            let p: Vec<String> = self.partition_by.iter().map(|e| e.to_string()).collect();
            write!(f, " PARTITION BY ({})", p.join(", "))?;
        }
        if let Some(h) = &self.having {
            write!(f, " HAVING {h}")?;
        }
        Ok(())
    }
}

/// `SUBSCRIBE`: a continuous query's results as they come.
#[derive(Debug, Clone, PartialEq)]
pub struct Subscribe {
    /// The continuous query whose results to stream.
    pub query: Ident,
    /// `SUBSCRIBE (SELECT ... FROM q WHERE ...)`: the projection and filter applied to each
    /// result row (one query in FROM, no aggregates, joins, ORDER BY or LIMIT).
    pub view: Option<Box<sq::Query>>,
    /// COPY framing, when the rows go out as COPY data rather than as a result set.
    pub copy: Option<CopyOut>,
    /// Resume after this result sequence number: retained rows numbered above it come
    /// first, then live rows.
    pub from: Option<u64>,
    /// Prepend each row's sequence number as a `seq` column.
    pub seq: bool,
    /// Start with the retained rows (as many as `--retain-rows` keeps), then live rows.
    pub snapshot: bool,
    /// Add `progressed` and `watermark` columns and a progress row (`progressed` true, the
    /// stream's new watermark, NULL elsewhere) each time the watermark moves.
    pub progress: bool,
}

impl Subscribe {
    /// `SUBSCRIBE query`, with no options.
    pub fn to(query: Ident) -> Self {
        Subscribe {
            query,
            view: None,
            copy: None,
            from: None,
            seq: false,
            snapshot: false,
            progress: false,
        }
    }
}

impl fmt::Display for Subscribe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut target = match &self.view {
            Some(view) => format!("SUBSCRIBE ({view})"),
            None => format!("SUBSCRIBE {}", self.query),
        };
        if let Some(n) = self.from {
            target.push_str(&format!(" FROM {n}"));
        }
        let options: Vec<&str> = [
            (self.snapshot, "SNAPSHOT"),
            (self.seq, "SEQ"),
            (self.progress, "PROGRESS"),
        ]
        .into_iter()
        .filter_map(|(on, name)| on.then_some(name))
        .collect();
        if !options.is_empty() {
            target.push_str(&format!(" WITH ({})", options.join(", ")));
        }
        match self.copy {
            None => f.write_str(&target),
            Some(CopyOut::Text) => write!(f, "COPY ({target}) TO STDOUT"),
            Some(CopyOut::Csv { header }) => write!(
                f,
                "COPY ({target}) TO STDOUT WITH (FORMAT csv{})",
                if header { ", HEADER" } else { "" }
            ),
        }
    }
}

/// The framing of `COPY (SUBSCRIBE q) TO STDOUT`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CopyOut {
    /// PostgreSQL's text format (tab-separated, `\N` for NULL).
    Text,
    /// CSV, with a header line of column names first when `header`.
    Csv { header: bool },
}

/// `COPY stream FROM STDIN`.
#[derive(Debug, Clone, PartialEq)]
pub struct CopyFrom {
    /// Target stream.
    pub stream: ObjectName,
    /// Explicit column list, in input order; empty means all columns.
    pub columns: Vec<Ident>,
    /// `csv` or `text` (the default, as in PostgreSQL).
    pub csv: bool,
    /// `FORMAT binary`.
    pub binary: bool,
    /// `HEADER [true]`.
    pub header: bool,
    /// `DELIMITER 'c'`.
    pub delimiter: Option<char>,
    /// `NULL 'text'`.
    pub null: Option<String>,
    /// `QUOTE 'c'`.
    pub quote: Option<char>,
}

/// `DROP <what> [IF EXISTS] name [CASCADE]`.
fn drop_sql(
    f: &mut fmt::Formatter<'_>,
    what: &str,
    name: &Ident,
    if_exists: bool,
    cascade: bool,
) -> fmt::Result {
    let ie = if if_exists { "IF EXISTS " } else { "" };
    let cascade = if cascade { " CASCADE" } else { "" };
    write!(f, "DROP {what} {ie}{name}{cascade}")
}

impl fmt::Display for Statement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Statement::CreateStream(s) => s.fmt(f),
            Statement::DropStream {
                name,
                if_exists,
                cascade,
            } => drop_sql(f, "STREAM", name, *if_exists, *cascade),
            Statement::CreateQuery(q) => q.fmt(f),
            Statement::DropQuery {
                name,
                if_exists,
                cascade,
            } => drop_sql(f, "QUERY", name, *if_exists, *cascade),
            Statement::CreateSource(s) => s.fmt(f),
            Statement::DropSource { name, if_exists } => {
                drop_sql(f, "SOURCE", name, *if_exists, false)
            }
            Statement::ShowSources => f.write_str("SHOW SOURCES"),
            Statement::CreateSink(s) => s.fmt(f),
            Statement::DropSink { name, if_exists } => drop_sql(f, "SINK", name, *if_exists, false),
            Statement::ShowSinks => f.write_str("SHOW SINKS"),
            Statement::CreateTable(t) => t.fmt(f),
            Statement::DropTable {
                name,
                if_exists,
                cascade,
            } => drop_sql(f, "TABLE", name, *if_exists, *cascade),
            Statement::ShowTables => f.write_str("SHOW TABLES"),
            Statement::AlterQuery(q) => {
                let start = match &q.start {
                    Some(start) => format!(" WITH (start = {start})"),
                    None => String::new(),
                };
                write!(
                    f,
                    "ALTER CONTINUOUS QUERY {}{start} AS {}",
                    q.name,
                    query_sql(&q.query, &q.clauses)
                )
            }
            Statement::AlterStream { name, options } => {
                let options: Vec<String> = options
                    .iter()
                    .map(|(k, v)| format!("{k} = '{}'", v.replace('\'', "''")))
                    .collect();
                write!(f, "ALTER STREAM {name} SET ({})", options.join(", "))
            }
            Statement::CreateView(v) => v.fmt(f),
            Statement::DropView {
                name,
                if_exists,
                cascade,
            } => drop_sql(f, "VIEW", name, *if_exists, *cascade),
            Statement::ShowStreams => f.write_str("SHOW STREAMS"),
            Statement::ShowQueries => f.write_str("SHOW QUERIES"),
            Statement::Checkpoint => f.write_str("CHECKPOINT"),
            Statement::Subscribe(sub) => sub.fmt(f),
            Statement::CopyFrom(c) => c.fmt(f),
            Statement::CopyTo(c) => c.fmt(f),
            Statement::DeclareCursor { name, target } => {
                write!(f, "DECLARE {name} CURSOR FOR {target}")
            }
            Statement::Fetch {
                name,
                count,
                timeout,
            } => {
                match count {
                    Some(n) => write!(f, "FETCH {n} FROM {name}")?,
                    None => write!(f, "FETCH ALL FROM {name}")?,
                }
                if let Some(t) = timeout {
                    write!(f, " WITH (timeout = '{}ms')", t.as_millis())?;
                }
                Ok(())
            }
            Statement::CloseCursor { name: Some(n) } => write!(f, "CLOSE {n}"),
            Statement::CloseCursor { name: None } => f.write_str("CLOSE ALL"),
            Statement::Explain { json, target } => {
                f.write_str("EXPLAIN ")?;
                if *json {
                    f.write_str("(FORMAT JSON) ")?;
                }
                match target {
                    ExplainTarget::Create(c) => c.fmt(f),
                    ExplainTarget::Query(q, c) => f.write_str(&query_sql(q, c)),
                    ExplainTarget::Named(n) => n.fmt(f),
                }
            }
            Statement::Sql(s) => s.fmt(f),
        }
    }
}

impl fmt::Display for CreateStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ine = if self.if_not_exists {
            "IF NOT EXISTS "
        } else {
            ""
        };
        write!(f, "CREATE STREAM {ine}{} (", self.name)?;
        for (i, c) in self.columns.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{} {}", c.name, c.data_type)?;
            if c.not_null {
                f.write_str(" NOT NULL")?;
            }
        }
        if let Some(w) = &self.watermark {
            write!(f, ", {w}")?;
        }
        f.write_str(")")?;
        if !self.options.is_empty() {
            f.write_str(" WITH (")?;
            for (i, (k, v)) in self.options.iter().enumerate() {
                if i > 0 {
                    f.write_str(", ")?;
                }
                write!(f, "{k} = '{}'", v.replace('\'', "''"))?;
            }
            f.write_str(")")?;
        }
        Ok(())
    }
}

impl fmt::Display for CreateSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let quote = |s: &str| format!("'{}'", s.replace('\'', "''"));
        let ine = if self.if_not_exists {
            "IF NOT EXISTS "
        } else {
            ""
        };
        write!(f, "CREATE SOURCE {ine}{} FROM ", self.name)?;
        match &self.connector {
            SourceConnector::File(path) => write!(f, "FILE {}", quote(path))?,
            SourceConnector::Kafka => f.write_str("KAFKA")?,
        }
        if !self.options.is_empty() {
            let opts: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| format!("{k} = {}", quote(v)))
                .collect();
            write!(f, " ({})", opts.join(", "))?;
        }
        let kind = if self.table { "TABLE" } else { "STREAM" };
        write!(f, " INTO {kind} {}", self.stream)?;
        if !self.paths.is_empty() {
            let paths: Vec<String> = self
                .paths
                .iter()
                .map(|(c, p)| format!("{c} PATH {}", quote(p)))
                .collect();
            write!(f, " ({})", paths.join(", "))?;
        }
        Ok(())
    }
}

impl fmt::Display for WatermarkDef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "WATERMARK FOR {} AS {}", self.column, self.column)?;
        if !self.delay.is_zero() {
            write!(f, " - {}", interval_sql(self.delay))?;
        }
        Ok(())
    }
}

impl fmt::Display for CreateQuery {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ine = if self.if_not_exists {
            "IF NOT EXISTS "
        } else {
            ""
        };
        let start = match &self.start {
            Some(start) => format!(" WITH (start = {start})"),
            None => String::new(),
        };
        write!(
            f,
            "CREATE CONTINUOUS QUERY {ine}{}{start} AS {}",
            self.name,
            query_sql(&self.query, &self.clauses)
        )
    }
}

impl fmt::Display for CopyFrom {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "COPY {}", self.stream)?;
        if !self.columns.is_empty() {
            let cols: Vec<String> = self.columns.iter().map(|c| c.to_string()).collect();
            write!(f, " ({})", cols.join(", "))?;
        }
        f.write_str(" FROM STDIN")?;
        let format = match (self.binary, self.csv) {
            (true, _) => "binary",
            (false, true) => "csv",
            (false, false) => "text",
        };
        let mut opts = vec![format!("FORMAT {format}")];
        if self.header {
            opts.push("HEADER true".into());
        }
        if let Some(d) = self.delimiter {
            opts.push(format!("DELIMITER '{}'", escape_char(d)));
        }
        if let Some(n) = &self.null {
            opts.push(format!("NULL '{}'", n.replace('\'', "''")));
        }
        if let Some(q) = self.quote {
            opts.push(format!("QUOTE '{}'", escape_char(q)));
        }
        write!(f, " WITH ({})", opts.join(", "))
    }
}

fn escape_char(c: char) -> String {
    if c == '\'' {
        "''".into()
    } else {
        c.to_string()
    }
}
