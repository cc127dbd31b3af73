//! The lookup join against a direct evaluation of each row: a random table, random probes
//! (NULLs and misses included), every kind of join, with and without a residual condition.

use std::sync::Arc;

use datafusion::arrow::array::{Array, Int64Array, RecordBatch, StringArray};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::logical_expr::Operator as Op;
use datafusion::physical_expr::expressions::{col, lit, BinaryExpr};
use datafusion::physical_plan::PhysicalExpr;

use super::*;

fn table_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("k", DataType::Int64, false),
        Field::new("tag", DataType::Utf8, true),
    ]))
}

fn input_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new("x", DataType::Int64, true)]))
}

fn joined_schema(nullable_right: bool) -> SchemaRef {
    Arc::new(Schema::new(vec![
        Field::new("x", DataType::Int64, true),
        Field::new("k", DataType::Int64, nullable_right),
        Field::new("tag", DataType::Utf8, true),
    ]))
}

/// A small deterministic generator (no dependency on a seeded crate here).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self, n: u64) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) % n
    }
}

#[test]
fn every_kind_of_lookup_equals_a_row_by_row_evaluation() {
    for seed in 0..20u64 {
        let mut rng = Lcg(seed);
        let store = Arc::new(TableStore::try_new("t", table_schema(), vec![0]).unwrap());
        let keys: Vec<i64> = (0..rng.next(8) as i64).map(|i| i * 2).collect();
        let tags: Vec<Option<String>> = keys
            .iter()
            .map(|k| (k % 3 != 0).then(|| format!("tag{}", k % 4)))
            .collect();
        let rows = RecordBatch::try_new(
            table_schema(),
            vec![
                Arc::new(Int64Array::from(keys.clone())),
                Arc::new(StringArray::from(tags.clone())),
            ],
        )
        .unwrap();
        store.restore(&[rows], Default::default(), 1).unwrap();
        let probes: Vec<Option<i64>> = (0..30)
            .map(|_| (rng.next(5) != 0).then(|| rng.next(16) as i64))
            .collect();
        let input = RecordBatch::try_new(
            input_schema(),
            vec![Arc::new(Int64Array::from(probes.clone()))],
        )
        .unwrap();
        let tag_of = |x: Option<i64>| -> Option<Option<String>> {
            let x = x?;
            keys.iter().position(|k| *k == x).map(|i| tags[i].clone())
        };
        for residual in [false, true] {
            // Residual: tag = 'tag2' (over the joined schema: column 2).
            let res: Option<Arc<dyn PhysicalExpr>> = residual.then(|| {
                Arc::new(BinaryExpr::new(
                    col("tag", &joined_schema(false)).unwrap(),
                    Op::Eq,
                    lit("tag2"),
                )) as Arc<dyn PhysicalExpr>
            });
            let passes = |t: &Option<String>| !residual || t.as_deref() == Some("tag2");
            let kinds = [
                LookupKind::Inner,
                LookupKind::Left,
                LookupKind::Semi,
                LookupKind::Anti { null_aware: false },
                LookupKind::Anti { null_aware: true },
            ];
            for kind in kinds {
                let out_schema = match kind {
                    LookupKind::Inner => joined_schema(false),
                    LookupKind::Left => joined_schema(true),
                    _ => input_schema(),
                };
                let mut join = LookupJoin::new(
                    store.clone(),
                    kind,
                    vec![col("x", &input_schema()).unwrap()],
                    res.clone(),
                    joined_schema(false),
                    out_schema,
                )
                .unwrap();
                let got = render(&join.process_batch(input.clone()).unwrap());
                let mut want = Vec::new();
                for &x in &probes {
                    let hit = tag_of(x).filter(|t| passes(t));
                    let xs = x.map_or("NULL".to_string(), |v| v.to_string());
                    let show = |t: &Option<String>| t.clone().unwrap_or("NULL".into());
                    match kind {
                        LookupKind::Inner => {
                            if let Some(t) = &hit {
                                want.push(format!("{xs}|{xs}|{}", show(t)));
                            }
                        }
                        LookupKind::Left => match &hit {
                            Some(t) => want.push(format!("{xs}|{xs}|{}", show(t))),
                            None => want.push(format!("{xs}|NULL|NULL")),
                        },
                        LookupKind::Semi => {
                            if hit.is_some() {
                                want.push(xs);
                            }
                        }
                        LookupKind::Anti { null_aware } => {
                            let unknown = null_aware && x.is_none() && !keys.is_empty();
                            if hit.is_none() && !unknown {
                                want.push(xs);
                            }
                        }
                    }
                }
                assert_eq!(got, want, "seed {seed}, {kind:?}, residual {residual}");
            }
        }
    }
}

fn render(batches: &[RecordBatch]) -> Vec<String> {
    let mut out = Vec::new();
    for b in batches {
        for r in 0..b.num_rows() {
            let cells: Vec<String> = b
                .columns()
                .iter()
                .map(|c| {
                    if c.is_null(r) {
                        "NULL".to_string()
                    } else {
                        datafusion::arrow::util::display::array_value_to_string(c, r).unwrap()
                    }
                })
                .collect();
            out.push(cells.join("|"));
        }
    }
    out
}
