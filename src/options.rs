//! The `WITH (key = 'value', ...)` options of a `CREATE SOURCE` or `CREATE SINK`, read by
//! type. One parser for every connector, so that an unknown key, a key given twice, a missing
//! one and a bad value are refused the same way whatever the statement: 42601 for the first
//! three (naming the keys the connector takes), 22023 for a value (naming what was expected).

use std::collections::BTreeMap;
use std::ops::RangeInclusive;

use crate::error::{sqlstate, Error, Result};

/// A statement's options, checked against the keys its connector takes.
pub struct Options<'a> {
    /// What takes them, as messages name it: `file source`, `Kafka sink`.
    what: String,
    values: BTreeMap<&'a str, &'a str>,
}

impl<'a> Options<'a> {
    /// The options `pairs` of `what` (e.g. "Kafka source"), which takes the keys `allowed`.
    pub fn new(
        pairs: &'a [(String, String)],
        allowed: &[&str],
        what: impl Into<String>,
    ) -> Result<Options<'a>> {
        let what = what.into();
        let mut values = BTreeMap::new();
        for (k, v) in pairs {
            if !allowed.contains(&k.as_str()) {
                return Err(Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!(
                        "unknown option \"{k}\" for a {what}: use {}",
                        allowed.join(", ")
                    ),
                ));
            }
            if values.insert(k.as_str(), v.as_str()).is_some() {
                return Err(Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!("option \"{k}\" given twice"),
                ));
            }
        }
        Ok(Options { what, values })
    }

    /// The value of `key` as written, if given.
    pub fn text(&self, key: &str) -> Option<&'a str> {
        self.values.get(key).copied()
    }

    /// The value of `key`, which must be given and not blank.
    pub fn required(&self, key: &str) -> Result<&'a str> {
        self.text(key)
            .filter(|v| !v.trim().is_empty())
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!("a {} needs option \"{key}\"", self.what),
                )
            })
    }

    /// A whole number in `range`; `default` when not given.
    pub fn number(&self, key: &str, range: RangeInclusive<u64>, default: u64) -> Result<u64> {
        match self.text(key) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| range.contains(n))
                .ok_or_else(|| {
                    bad_value(
                        key,
                        v,
                        &format!("a whole number from {} to {}", range.start(), range.end()),
                    )
                }),
        }
    }

    /// One of `values` (case-insensitive, returned as listed); `default` when not given.
    pub fn choice(
        &self,
        key: &str,
        values: &[&'static str],
        default: &'static str,
    ) -> Result<&'static str> {
        match self.text(key) {
            None => Ok(default),
            Some(v) => values
                .iter()
                .copied()
                .find(|c| c.eq_ignore_ascii_case(v.trim()))
                .ok_or_else(|| bad_value(key, v, &values.join(" or "))),
        }
    }

    /// `true`/`on` or `false`/`off`; `default` when not given.
    pub fn boolean(&self, key: &str, default: bool) -> Result<bool> {
        match self.text(key).map(|v| v.trim().to_ascii_lowercase()) {
            None => Ok(default),
            Some(v) if v == "true" || v == "on" => Ok(true),
            Some(v) if v == "false" || v == "off" => Ok(false),
            Some(v) => Err(bad_value(key, &v, "true or false")),
        }
    }

    /// The comma-separated items of `key` (blank items dropped), which must be given.
    pub fn required_list(&self, key: &str) -> Result<Vec<String>> {
        let items: Vec<String> = self
            .required(key)?
            .split(',')
            .map(|b| b.trim().to_string())
            .filter(|b| !b.is_empty())
            .collect();
        if items.is_empty() {
            return Err(bad_value(
                key,
                self.text(key).unwrap_or(""),
                "a comma-separated list",
            ));
        }
        Ok(items)
    }
}

/// 22023: `value` is not what option `key` takes (`expected`).
pub fn bad_value(key: &str, value: &str, expected: &str) -> Error {
    Error::invalid_input(
        sqlstate::INVALID_PARAMETER_VALUE,
        format!("invalid value for option \"{key}\": \"{value}\" (expected {expected})"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn reads_each_kind_and_refuses_alike() {
        let given = pairs(&[
            ("n", " 42 "),
            ("flag", "OFF"),
            ("mode", "End"),
            ("hosts", "a:1, ,b:2"),
        ]);
        let o = Options::new(
            &given,
            &["n", "flag", "mode", "hosts", "topic"],
            "Kafka sink",
        )
        .unwrap();
        assert_eq!(o.number("n", 1..=100, 7).unwrap(), 42);
        assert_eq!(o.number("missing", 1..=100, 7).unwrap(), 7);
        assert!(!o.boolean("flag", true).unwrap());
        assert_eq!(
            o.choice("mode", &["beginning", "end"], "beginning")
                .unwrap(),
            "end"
        );
        assert_eq!(o.required_list("hosts").unwrap(), vec!["a:1", "b:2"]);
        let e = o.number("n", 1..=10, 7).unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::INVALID_PARAMETER_VALUE);
        assert!(e.to_string().contains("a whole number from 1 to 10"), "{e}");
        let e = o.required("topic").unwrap_err();
        assert_eq!(e.sqlstate(), sqlstate::SYNTAX_ERROR);
        assert!(
            e.to_string()
                .contains("a Kafka sink needs option \"topic\""),
            "{e}"
        );

        let e = Options::new(&pairs(&[("colour", "red")]), &["n"], "file source")
            .err()
            .unwrap();
        assert!(
            e.to_string()
                .contains("unknown option \"colour\" for a file source: use n"),
            "{e}"
        );
        let twice = pairs(&[("n", "1"), ("n", "2")]);
        let e = Options::new(&twice, &["n"], "file source").err().unwrap();
        assert!(e.to_string().contains("option \"n\" given twice"), "{e}");
    }
}
