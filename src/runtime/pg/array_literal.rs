//! PostgreSQL's array input syntax in a string literal (`'{r,p,v,"",NULL}'`), which psql,
//! pgcli and pgJDBC compare against with `= ANY ('{...}')` or `<> ALL ('{...}'::text[])`:
//! read into its elements, so that the comparison can be planned as an IN list.

/// The elements of a one-dimensional array literal: `None` for an unquoted `NULL`, the text
/// of each element otherwise (quotes removed, backslash escapes resolved). `None` when `text`
/// is not such a literal (nested arrays, unbalanced quotes).
pub(in crate::runtime) fn parse(text: &str) -> Option<Vec<Option<String>>> {
    let inner = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    if inner.trim().is_empty() {
        return Some(out);
    }
    let mut chars = inner.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let element = if chars.next_if_eq(&'"').is_some() {
            let mut s = String::new();
            loop {
                match chars.next()? {
                    '"' => break,
                    '\\' => s.push(chars.next()?),
                    c => s.push(c),
                }
            }
            while chars.next_if(|c| c.is_whitespace()).is_some() {}
            Some(s)
        } else {
            let mut s = String::new();
            while let Some(c) = chars.next_if(|c| *c != ',') {
                match c {
                    '{' | '}' | '"' => return None,
                    '\\' => s.push(chars.next()?),
                    c => s.push(c),
                }
            }
            let s = s.trim_end().to_string();
            (!s.eq_ignore_ascii_case("null")).then_some(s)
        };
        out.push(element);
        match chars.next() {
            None => return Some(out),
            Some(',') => continue,
            Some(_) => return None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn some(items: &[&str]) -> Vec<Option<String>> {
        items.iter().map(|s| Some(s.to_string())).collect()
    }

    #[test]
    fn reads_postgresql_array_literals() {
        assert_eq!(
            parse(r#"{r,p,v,m,S,f,""}"#),
            Some(some(&["r", "p", "v", "m", "S", "f", ""]))
        );
        assert_eq!(parse("{}"), Some(vec![]));
        assert_eq!(
            parse(r#"{ a , "b,c", NULL, "NULL", d\,e }"#),
            Some(vec![
                Some("a".into()),
                Some("b,c".into()),
                None,
                Some("NULL".into()),
                Some("d,e".into())
            ])
        );
        assert_eq!(parse(r#"{"a\"b"}"#), Some(some(&["a\"b"])));
        assert_eq!(parse("{{1,2},{3,4}}"), None);
        assert_eq!(parse("not an array"), None);
        assert_eq!(parse(r#"{"open}"#), None);
    }
}
