//! `ssl.principal.mapping.rules`: how a client certificate's subject
//! becomes a principal name, with Kafka's syntax and semantics
//! (`SslPrincipalMapper`): a comma list of `DEFAULT` and
//! `RULE:pattern/replacement/[LU]` entries, tried in order. A rule applies
//! when its pattern matches the whole subject (RFC 2253 form, e.g.
//! `CN=alice,OU=eng,O=Acme`); the name is then the subject with the
//! pattern replaced (`$1` for a group), lowercased (`L`) or uppercased
//! (`U`). `DEFAULT` applies always and keeps the subject as it is. When no
//! rule applies, the client is refused, as Kafka refuses it.
//!
//! `\/` writes a `/` inside a pattern or a replacement. Patterns are
//! regular expressions in the common subset of Java's and Rust's syntax.

use regex_lite::Regex;

/// One rule.
#[derive(Debug, Clone)]
enum Rule {
    /// `DEFAULT`: the subject itself.
    Default,
    /// `RULE:pattern/replacement/[LU]`.
    Replace {
        /// The pattern anchored at both ends (Java's `matches()`).
        whole: Regex,
        /// The pattern as written, for the replacement.
        pattern: Regex,
        /// The replacement, in Rust's syntax (`${1}`).
        replacement: String,
        case: Case,
    },
}

/// A rule's `L` or `U` flag (also Kerberos' principal rules').
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Case {
    Keep,
    Lower,
    Upper,
}

impl Case {
    /// `name` as the flag wants it.
    pub(crate) fn apply(self, name: &str) -> String {
        match self {
            Case::Keep => name.to_string(),
            Case::Lower => name.to_lowercase(),
            Case::Upper => name.to_uppercase(),
        }
    }
}

/// A parsed `ssl.principal.mapping.rules` value.
#[derive(Debug, Clone)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    text: String,
}

impl Default for PrincipalMapper {
    /// `DEFAULT`, Kafka's default.
    fn default() -> Self {
        PrincipalMapper {
            rules: vec![Rule::Default],
            text: String::from("DEFAULT"),
        }
    }
}

impl PrincipalMapper {
    /// Parses a rules value; the error names what is wrong.
    pub fn parse(text: &str) -> Result<PrincipalMapper, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim_start();
        while !rest.is_empty() {
            let (rule, after) = parse_rule(rest)?;
            rules.push(rule);
            rest = after.trim_start();
            match rest.strip_prefix(',') {
                Some(after_comma) => rest = after_comma.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("expected ',' between rules at '{rest}'")),
            }
        }
        if rules.is_empty() {
            return Err(String::from("no rule (DEFAULT is the default)"));
        }
        Ok(PrincipalMapper {
            rules,
            text: text.trim().to_string(),
        })
    }

    /// The principal name of `subject`, from the first rule that applies;
    /// `Err` when none does.
    pub fn apply(&self, subject: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(subject.to_string()),
                Rule::Replace {
                    whole,
                    pattern,
                    replacement,
                    case,
                } if whole.is_match(subject) => {
                    let name = pattern.replace_all(subject, replacement.as_str());
                    return Ok(case.apply(&name));
                }
                Rule::Replace { .. } => {}
            }
        }
        Err(format!(
            "no rule of ssl.principal.mapping.rules '{}' applies to '{subject}'",
            self.text
        ))
    }
}

/// One rule at the start of `text`, and the text after it.
fn parse_rule(text: &str) -> Result<(Rule, &str), String> {
    if let Some(after) = text.strip_prefix("DEFAULT") {
        return Ok((Rule::Default, after));
    }
    let Some(body) = text.strip_prefix("RULE:") else {
        return Err(format!("expected DEFAULT or RULE: at '{text}'"));
    };
    let (pattern, after) =
        until_slash(body).ok_or_else(|| format!("no '/' after the pattern in '{text}'"))?;
    let (replacement, after) =
        until_slash(after).ok_or_else(|| format!("no '/' after the replacement in '{text}'"))?;
    let (case, after) = match after.chars().next() {
        Some('L') => (Case::Lower, &after[1..]),
        Some('U') => (Case::Upper, &after[1..]),
        _ => (Case::Keep, after),
    };
    let compile = |p: &str| Regex::new(p).map_err(|e| format!("pattern '{pattern}': {e}"));
    let rule = Rule::Replace {
        whole: compile(&format!("^(?:{pattern})$"))?,
        pattern: compile(&pattern)?,
        replacement: rust_replacement(&replacement),
        case,
    };
    Ok((rule, after))
}

/// The text up to the first `/` not written `\/`, unescaped, and the text
/// after that `/`.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if text[i + 1..].starts_with('/') => {
                out.push('/');
                chars.next();
            }
            '/' => return Some((out, &text[i + 1..])),
            _ => out.push(c),
        }
    }
    None
}

/// A Java replacement (`$1`, `\$`) in Rust's syntax (`${1}`, `$$`), so
/// that `$1a` stays group 1 followed by `a`, as in Java.
pub(crate) fn rust_replacement(java: &str) -> String {
    let mut out = String::new();
    let mut chars = java.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => out.push('\\'),
            },
            '$' if chars.peek().is_some_and(char::is_ascii_digit) => {
                out.push_str("${");
                while let Some(d) = chars.next_if(char::is_ascii_digit) {
                    out.push(d);
                }
                out.push('}');
            }
            '$' => out.push_str("$$"),
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(rules: &str, subject: &str) -> Result<String, String> {
        PrincipalMapper::parse(rules)?.apply(subject)
    }

    #[test]
    fn kafkas_documented_rules_map_as_in_kafka() {
        // Kafka's SslPrincipalMapperTest and its docs' examples.
        let rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT";
        let subject = "CN=Duke,OU=ServiceUsers,O=Org,C=US";
        assert_eq!(map(rules, subject).unwrap(), "Duke");
        let subject = "CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US";
        assert_eq!(map(rules, subject).unwrap(), "duke@sme");
        assert_eq!(
            map(rules, "cn=duke,OU=JavaSoft,O=Sun Microsystems").unwrap(),
            "DUKE"
        );
        assert_eq!(
            map(rules, "OU=JavaSoft,O=Sun Microsystems,C=US").unwrap(),
            "OU=JavaSoft,O=Sun Microsystems,C=US"
        );
        assert_eq!(map("DEFAULT", "CN=a,O=b").unwrap(), "CN=a,O=b");
    }

    #[test]
    fn no_rule_refuses_and_bad_rules_do_not_parse() {
        let refused = map("RULE:^CN=(.*),OU=eng$/$1/", "CN=bob,OU=ops").unwrap_err();
        assert!(refused.contains("no rule"), "{refused}");
        for bad in [
            "",
            "RULE:^CN=(.*)$/$1",
            "RULE:(/x/",
            "NOPE",
            "DEFAULT DEFAULT",
        ] {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn slashes_and_dollars_are_escaped_as_in_java() {
        assert_eq!(
            map(r"RULE:^CN=(.*)\/(.*)$/$2\/$1/", "CN=a/b").unwrap(),
            "b/a"
        );
        assert_eq!(
            map(r"RULE:^CN=(.*)$/$1a/", "CN=x").unwrap(),
            "xa",
            "group 1, then a"
        );
        assert_eq!(map(r"RULE:^CN=(.*)$/\$$1/", "CN=x").unwrap(), "$x");
    }
}
