//! The "did you mean" hint of an unknown function (42883), chosen the same way every time:
//! DataFusion picks among equally close names in hash order, so the hint changed from call to
//! call. Here the closest name by edit distance wins, ties broken alphabetically.

use datafusion::common::utils::datafusion_strsim::levenshtein;
use datafusion::prelude::SessionContext;

use crate::error::{sqlstate, Error};

/// `e` with a deterministic hint when it is an unknown function, else `e` unchanged.
pub(in crate::runtime) fn with_hint(e: Error, ctx: &SessionContext) -> Error {
    let Error::Plan {
        sqlstate: code,
        message,
        location,
    } = e
    else {
        return e;
    };
    if code != sqlstate::UNDEFINED_FUNCTION {
        return Error::Plan {
            sqlstate: code,
            message,
            location,
        };
    }
    let base = message
        .split("; did you mean")
        .next()
        .unwrap_or(&message)
        .to_string();
    let name = base
        .strip_prefix("function \"")
        .and_then(|rest| rest.split('"').next())
        .map(str::to_lowercase);
    let state = ctx.state();
    let known = state
        .scalar_functions()
        .keys()
        .chain(state.aggregate_functions().keys())
        .chain(state.window_functions().keys());
    let message = match name.and_then(|n| closest(&n, known)) {
        Some(hint) => format!("{base}; did you mean \"{hint}\""),
        None => base,
    };
    Error::Plan {
        sqlstate: code,
        message,
        location,
    }
}

/// The name in `known` closest to `name` (at most half its length away), the first
/// alphabetically among equally close ones.
fn closest<'a>(name: &str, known: impl Iterator<Item = &'a String>) -> Option<&'a str> {
    known
        .filter(|k| !k.is_empty() && *k != name)
        .map(|k| (levenshtein(name, k), k.as_str()))
        .filter(|(d, _)| *d <= name.len().div_ceil(2))
        .min()
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_closest_name_wins_and_ties_go_alphabetically() {
        let known: Vec<String> = ["cosh", "position", "acosh", "sum", "count"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(closest("coun", known.iter()), Some("count"));
        assert_eq!(closest("cos", known.iter()), Some("cosh"));
        let tied: Vec<String> = ["abd", "abc"].iter().map(|s| s.to_string()).collect();
        assert_eq!(closest("abx", tied.iter()), Some("abc"));
        assert_eq!(closest("nosuchfn", known.iter()), None);
    }

    #[test]
    fn the_hint_is_the_same_every_time() {
        let ctx = SessionContext::new();
        let unknown = || {
            Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                "function \"cont\" does not exist; did you mean \"random\"",
            )
        };
        let first = with_hint(unknown(), &ctx).to_string();
        assert!(first.contains("did you mean \"cot\""), "{first}");
        for _ in 0..20 {
            assert_eq!(with_hint(unknown(), &ctx).to_string(), first);
        }
    }
}
