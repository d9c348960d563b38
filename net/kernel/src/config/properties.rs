//! Kafka's `server.properties` syntax (Java's `Properties.load`): `key=value`
//! or `key: value` or `key value`, `#` and `!` comment lines, a trailing odd
//! backslash continuing the line, and the `\t \n \r \f \uXXXX` escapes.
//!
//! A key given twice keeps its last value, as Java does.

use std::collections::BTreeMap;

/// Parses a properties document into `name -> value`.
pub fn parse_properties(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in logical_lines(text) {
        let (key, value) = split_key_value(&line);
        if !key.is_empty() {
            out.insert(key, value);
        }
    }
    out
}

/// Joins continued lines and drops blank and comment lines. A line ending in
/// an odd number of backslashes continues on the next, whose leading
/// whitespace is dropped.
fn logical_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current: Option<String> = None;
    for raw in text.lines() {
        let trimmed = raw.trim_start();
        let line = match current.take() {
            Some(mut pending) => {
                pending.push_str(trimmed);
                pending
            }
            None => {
                if trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with('!') {
                    continue;
                }
                trimmed.to_string()
            }
        };
        let trailing = line.chars().rev().take_while(|c| *c == '\\').count();
        if trailing % 2 == 1 {
            let mut kept = line;
            kept.pop();
            current = Some(kept);
        } else {
            out.push(line);
        }
    }
    if let Some(last) = current {
        out.push(last);
    }
    out
}

/// Splits one logical line at the first unescaped `=`, `:` or whitespace.
fn split_key_value(line: &str) -> (String, String) {
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    let mut key_end = chars.len();
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '=' | ':' | ' ' | '\t' | '\u{c}' => {
                key_end = i;
                break;
            }
            _ => i += 1,
        }
    }
    let key_end = key_end.min(chars.len());
    let mut j = key_end;
    while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
        j += 1;
    }
    if j < chars.len() && matches!(chars[j], '=' | ':') {
        j += 1;
        while j < chars.len() && matches!(chars[j], ' ' | '\t' | '\u{c}') {
            j += 1;
        }
    }
    let key: String = chars[..key_end].iter().collect();
    let value: String = chars[j..].iter().collect();
    (unescape(&key), unescape(&value))
}

fn unescape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                    Some(decoded) => out.push(decoded),
                    None => {
                        out.push_str("\\u");
                        out.push_str(&hex);
                    }
                }
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    out
}

/// Whether a file is in properties syntax: by its extension, else by its
/// content (a document TOML cannot parse, such as `listeners=PLAINTEXT://:9092`).
pub fn looks_like_properties(path: &std::path::Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()) {
        Some("properties") => true,
        Some("toml") => false,
        _ => text.parse::<toml::Table>().is_err(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn java_properties_syntax() {
        let text = "# comment\n! also a comment\n\n  node.id=1\nlisteners = PLAINTEXT://:9092,\\\n    CONTROLLER://:9093\nlog.dirs: /tmp/kraft\nnum.partitions 3\nkey\\=with\\:colon=v\\u0041\nempty=\nlast=x\\\\\nnode.id=2\n";
        let p = parse_properties(text);
        assert_eq!(p["node.id"], "2");
        assert_eq!(p["listeners"], "PLAINTEXT://:9092,CONTROLLER://:9093");
        assert_eq!(p["log.dirs"], "/tmp/kraft");
        assert_eq!(p["num.partitions"], "3");
        assert_eq!(p["key=with:colon"], "vA");
        assert_eq!(p["empty"], "");
        assert_eq!(p["last"], "x\\");
        assert_eq!(p.len(), 7);
    }

    #[test]
    fn syntax_is_chosen_by_extension_then_content() {
        use std::path::Path;
        assert!(looks_like_properties(Path::new("a.properties"), "a = 1"));
        assert!(!looks_like_properties(Path::new("a.toml"), "a=b c"));
        assert!(looks_like_properties(
            Path::new("a.conf"),
            "listeners=PLAINTEXT://:9092"
        ));
        assert!(!looks_like_properties(
            Path::new("a.conf"),
            "\"num.partitions\" = 3"
        ));
    }
}
