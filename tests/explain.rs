//! EXPLAIN of every query in `queries/`, text and JSON, against golden files in
//! `tests/golden/explain/`. After an intended change, regenerate them with
//! `UPDATE_GOLDEN=1 cargo test --test all explain::` and review the diff.

use std::path::Path;

fn golden(path: &Path, actual: &str) {
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::write(path, actual).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(actual, expected, "{} differs", path.display());
}

#[test]
fn explain_matches_golden_files() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let streams = std::fs::read_to_string(root.join("queries/00_streams.sql")).unwrap();
    let mut catalog = saql::Catalog::from_sql(&streams).unwrap();
    // The reference tables the correlation queries join.
    let tables = std::fs::read_to_string(root.join("queries/01_tables.sql")).unwrap();
    for stmt in saql::parse(&tables).unwrap() {
        if let saql::sql::Statement::CreateTable(ct) = stmt {
            let def = saql::plan::TableDef::try_new(&ct).unwrap();
            catalog.add_table(def).unwrap();
        }
    }
    let mut files: Vec<_> = std::fs::read_dir(root.join("queries"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    let mut pending = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for stmt in saql::parse(&text).unwrap() {
            if let saql::sql::Statement::CreateQuery(cq) = stmt {
                pending.push(cq);
            }
        }
    }
    let mut planned = 0;
    // Queries over queries once what they read is in the catalog (42P01 until then).
    while !pending.is_empty() {
        let before = pending.len();
        let mut waiting = Vec::new();
        for cq in pending {
            let plan = match saql::plan::plan_continuous(&cq.query, &cq.clauses, &catalog) {
                Ok(plan) => plan,
                Err(e) if e.sqlstate() == "42P01" => {
                    waiting.push(cq);
                    continue;
                }
                Err(e) => panic!("{}: {e}", cq.name),
            };
            let name = cq.name.value.to_lowercase();
            let dir = root.join("tests/golden/explain");
            golden(
                &dir.join(format!("{name}.txt")),
                &saql::explain(&plan, false),
            );
            golden(
                &dir.join(format!("{name}.json")),
                &(saql::explain(&plan, true) + "\n"),
            );
            planned += 1;
            catalog.add_query(name, cq).unwrap();
        }
        assert!(waiting.len() < before, "queries read what is not there");
        pending = waiting;
    }
    assert!(planned >= 4, "every query in queries/ is explained");
}
