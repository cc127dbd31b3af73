//! The bounds that keep one statement, query or client from taking the server down, in one
//! place. Statement shape (size, nesting, expression depth) is checked before sqlparser,
//! DataFusion or our planner recurse over it; the rest are enforced where the memory is
//! held. Every bound ends in an error with a 53xxx/54xxx SQLSTATE that names it.

/// Longest statement text accepted (54001). COPY data does not count.
pub const MAX_STATEMENT_BYTES: usize = 1 << 20;

/// Deepest nesting of parentheses and brackets in a statement (54001), checked on the
/// tokens before anything recurses over them (below [`PARSER_RECURSION_LIMIT`], which
/// nesting reaches first inside expressions).
pub const MAX_NESTING: usize = 40;

/// Most operators in a row with no operand between them (`NOT NOT ...`, `- - ...`), each a
/// level of recursion in the parser (54001).
pub const MAX_PREFIX_RUN: usize = 20;

/// Deepest recursion sqlparser may take while parsing (its own default): parenthesised and
/// prefix expressions (`NOT NOT ...`, `- - ...`, nested CASE) past it fail with 54001.
pub const PARSER_RECURSION_LIMIT: usize = 50;

/// Deepest expression tree, counted in operators from the root (54001): `1+1+...+1` with
/// more terms than this is refused. Statements are parsed and planned on threads with
/// [`THREAD_STACK_BYTES`] of stack, enough for this depth in sqlparser, DataFusion and our
/// planner (also in a debug build).
pub const MAX_EXPR_DEPTH: usize = 256;

/// Stack of the threads that parse, plan and run statements in `saql serve` (its tokio
/// runtime and the keyed-operator workers). A program that embeds [`crate::Engine`] should
/// run statements on threads this large too: 2 MiB does not hold [`MAX_EXPR_DEPTH`] in a
/// debug build.
pub const THREAD_STACK_BYTES: usize = 64 << 20;

/// Most windows one row may fall into: a HOP whose size is more than this many slides is
/// refused at CREATE (54000).
pub const MAX_WINDOWS_PER_ROW: i64 = 1000;

/// Most match attempts (threads) one MATCH_RECOGNIZE partition may hold (53200).
pub const MAX_PATTERN_THREADS: usize = 10_000;

/// Most rows one MATCH_RECOGNIZE partition may hold for matches in progress, counted both
/// as rows buffered and as rows mapped by each open attempt (53200).
pub const MAX_PATTERN_ROWS: usize = 1_000_000;

/// Most keys one `SUPPRESS` clause may hold within their intervals at once (53200).
pub const MAX_SUPPRESS_KEYS: usize = 1_000_000;

/// Largest `n` of a window Top-N (`WHERE rn <= n` over `ROW_NUMBER()`), refused at CREATE
/// past it (54000).
pub const MAX_TOP_N: u64 = 10_000;

/// Most rows an `EVIDENCE(..., n)` call may keep per window and group, refused at CREATE past
/// it (54000): the state of every open group holds up to `n` rendered rows.
pub const MAX_EVIDENCE_ROWS: u64 = 10_000;

/// Most rows a reference table holds unless its `WITH (max_rows = ...)` says otherwise
/// (53400 past it).
pub const DEFAULT_TABLE_MAX_ROWS: usize = 10_000_000;

/// Most bytes a reference table's rows take unless its `WITH (max_bytes = ...)` says
/// otherwise (53400 past it).
pub const DEFAULT_TABLE_MAX_BYTES: usize = 2 << 30;
