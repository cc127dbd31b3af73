//! The SQL front end: any text through `parse`, then `plan` and both EXPLAIN renderings
//! against a small catalog. Errors are expected; a panic or a stack overflow is a bug.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use saql::Catalog;

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        Catalog::from_sql(
            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, exe TEXT, \
               amount BIGINT, cpu DOUBLE PRECISION, ok BOOLEAN, \
               WATERMARK FOR ts AS ts - INTERVAL '5' SECOND); \
             CREATE STREAM t (ts TIMESTAMP NOT NULL, k TEXT, v BIGINT, WATERMARK FOR ts AS ts)",
        )
        .expect("the fuzz catalog")
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(sql) = std::str::from_utf8(data) else {
        return;
    };
    // Statements run on threads with saql's stack, as the server runs them.
    let sql = sql.to_string();
    std::thread::Builder::new()
        .stack_size(saql::limits::THREAD_STACK_BYTES)
        .spawn(move || {
            let _ = saql::parse(&sql);
            if let Ok(plan) = saql::plan(&sql, catalog()) {
                let _ = saql::explain(&plan, false);
                let _ = saql::explain(&plan, true);
            }
        })
        .expect("a thread")
        .join()
        .expect("no panic");
});
