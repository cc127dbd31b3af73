//! The COPY decoder: the first byte picks the format (text, csv, binary) and where the data is
//! cut into two chunks; the rest is the data. Every outcome is a batch or an error.
#![no_main]

use std::sync::{Arc, OnceLock};

use libfuzzer_sys::fuzz_target;
use saql::sources::csv::{CopyDecoder, CopyFormat, CopyOptions};
use saql::{Engine, EngineConfig};

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let engine = Engine::open(EngineConfig::default()).expect("an engine");
        engine
            .execute_blocking(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                 cpu DOUBLE PRECISION, ok BOOLEAN, WATERMARK FOR ts AS ts)",
            )
            .expect("the stream");
        engine
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&head, data)) = data.split_first() else {
        return;
    };
    let mut options = match head % 3 {
        0 => CopyOptions::text(),
        1 => CopyOptions::csv(),
        _ => CopyOptions {
            format: CopyFormat::Binary,
            ..CopyOptions::text()
        },
    };
    options.header = head & 0x80 != 0;
    let engine = engine();
    let schema = engine.stream_schema("s").expect("the stream's schema");
    let columns = (0..schema.fields().len()).collect();
    let Ok(decoder) = CopyDecoder::new(Arc::clone(&schema), columns, options) else {
        return;
    };
    let mut decoder = decoder.with_limits(1 << 16, 1 << 20);
    let cut = usize::from(head >> 2).min(data.len());
    if decoder.feed(&data[..cut]).is_err() || decoder.feed(&data[cut..]).is_err() {
        return;
    }
    if let Ok(batch) = decoder.finish() {
        let _ = engine.insert_batch("s", batch);
    }
});
