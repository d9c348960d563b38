//! `sasl.kerberos.principal.to.local.rules`: how a Kerberos principal
//! (`alice@EXAMPLE.COM`, `kafka/host1@EXAMPLE.COM`) becomes the user name
//! of its Kafka principal, with Kafka's syntax and semantics
//! (`KerberosShortNamer`, after Hadoop's `auth_to_local`). A comma list of
//! rules, tried in order; the first that gives a name wins, and a
//! principal no rule names is refused.
//!
//! - `DEFAULT`: the first component, when the realm is `krb5.conf`'s
//!   default realm (`alice@EXAMPLE.COM` → `alice`,
//!   `kafka/host1@EXAMPLE.COM` → `kafka`).
//! - `RULE:[n:format](match)s/pattern/replacement/g/L`: for a principal of
//!   `n` components, `format` with `$0` the realm, `$1` the first
//!   component and `$2` the second; the rule applies when `match` (a
//!   regular expression) matches that whole string, which is then edited
//!   by the `s/.../.../` substitution (every match with `g`), and
//!   lowercased (`L`) or uppercased (`U`). A name with `/` or `@` left in
//!   it is refused.

use crate::principal_mapping::Case;
use regex_lite::Regex;

/// One rule.
#[derive(Debug, Clone)]
enum Rule {
    Default,
    Custom(Custom),
}

#[derive(Debug, Clone)]
struct Custom {
    components: usize,
    format: String,
    /// `match`, anchored at both ends (Java's `matches()`).
    matches: Option<Regex>,
    /// `s/pattern/replacement/` and whether it is global.
    substitution: Option<(Regex, String, bool)>,
    case: Case,
}

/// A parsed rules value and the realm `DEFAULT` applies to.
#[derive(Debug, Clone)]
pub struct ShortNamer {
    rules: Vec<Rule>,
    default_realm: String,
}

impl ShortNamer {
    /// Parses `rules` (Kafka's list: comma-separated); `DEFAULT` uses
    /// `default_realm`. The error names the rule that does not parse.
    pub fn parse(rules: &str, default_realm: &str) -> Result<ShortNamer, String> {
        let parsed = rules
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(parse_rule)
            .collect::<Result<Vec<Rule>, String>>()?;
        if parsed.is_empty() {
            return Err(String::from("no rule (DEFAULT is the default)"));
        }
        Ok(ShortNamer {
            rules: parsed,
            default_realm: default_realm.to_string(),
        })
    }

    /// The short name of `principal`; `Err` when no rule gives one.
    pub fn short_name(&self, principal: &str) -> Result<String, String> {
        let (service, host, realm) = split(principal)?;
        let Some(realm) = realm else {
            // A principal without a realm is its own short name.
            return Ok(service.to_string());
        };
        let mut params = vec![realm, service];
        params.extend(host);
        for rule in &self.rules {
            if let Some(name) = self.apply(rule, &params)? {
                return Ok(name);
            }
        }
        Err(format!(
            "no rule of sasl.kerberos.principal.to.local.rules applies to {principal}"
        ))
    }

    fn apply(&self, rule: &Rule, params: &[&str]) -> Result<Option<String>, String> {
        let name = match rule {
            Rule::Default => (params[0] == self.default_realm).then(|| params[1].to_string()),
            Rule::Custom(custom) if params.len() - 1 == custom.components => {
                custom.apply(params)?
            }
            Rule::Custom(_) => None,
        };
        match name {
            Some(name) if name.contains(['/', '@']) => Err(format!(
                "a principal.to.local rule left a non-simple name: {name}"
            )),
            other => Ok(other),
        }
    }
}

impl Custom {
    fn apply(&self, params: &[&str]) -> Result<Option<String>, String> {
        let base = fill(&self.format, params)?;
        if self.matches.as_ref().is_some_and(|m| !m.is_match(&base)) {
            return Ok(None);
        }
        let name = match &self.substitution {
            Some((pattern, replacement, true)) => pattern
                .replace_all(&base, replacement.as_str())
                .into_owned(),
            Some((pattern, replacement, false)) => {
                pattern.replace(&base, replacement.as_str()).into_owned()
            }
            None => base,
        };
        Ok(Some(self.case.apply(&name)))
    }
}

/// `service[/host][@realm]`.
fn split(principal: &str) -> Result<(&str, Option<&str>, Option<&str>), String> {
    let (name, realm) = match principal.split_once('@') {
        Some((name, realm)) => (name, Some(realm)),
        None => (principal, None),
    };
    let (service, host) = match name.split_once('/') {
        Some((service, host)) => (service, Some(host)),
        None => (name, None),
    };
    let bad = |part: &str| part.contains(['/', '@']);
    if service.is_empty() || bad(service) || host.is_some_and(bad) || realm.is_some_and(bad) {
        return Err(format!("malformed Kerberos principal {principal}"));
    }
    Ok((service, host, realm))
}

/// `format` with each `$n` replaced by `params[n]`.
fn fill(format: &str, params: &[&str]) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '$' || !chars.peek().is_some_and(char::is_ascii_digit) {
            out.push(c);
            continue;
        }
        let mut digits = String::new();
        while let Some(d) = chars.next_if(char::is_ascii_digit) {
            digits.push(d);
        }
        let param = digits
            .parse::<usize>()
            .ok()
            .and_then(|n| params.get(n))
            .ok_or_else(|| format!("${digits} is out of range in format {format}"))?;
        out.push_str(param);
    }
    Ok(out)
}

/// One rule: `DEFAULT` or `RULE:[n:format](match)s/from/to/g/L`.
fn parse_rule(text: &str) -> Result<Rule, String> {
    if text == "DEFAULT" {
        return Ok(Rule::Default);
    }
    let invalid = |why: &str| format!("invalid rule {text}: {why}");
    let body = text
        .strip_prefix("RULE:[")
        .ok_or_else(|| invalid("expected DEFAULT or RULE:[n:format]"))?;
    let (spec, mut rest) = body.split_once(']').ok_or_else(|| invalid("no ']'"))?;
    let (count, format) = spec
        .split_once(':')
        .ok_or_else(|| invalid("no ':' in [n:format]"))?;
    let components = count
        .parse::<usize>()
        .ok()
        .filter(|n| (1..=2).contains(n))
        .ok_or_else(|| invalid("the component count is 1 or 2"))?;
    let compile = |p: &str| Regex::new(p).map_err(|e| invalid(&e.to_string()));
    let mut matches = None;
    if let Some(after) = rest.strip_prefix('(') {
        let (pattern, after) = after.split_once(')').ok_or_else(|| invalid("no ')'"))?;
        matches = Some(compile(&format!("^(?:{pattern})$"))?);
        rest = after;
    }
    let mut substitution = None;
    if let Some(after) = rest.strip_prefix("s/") {
        let mut parts = after.splitn(3, '/');
        let (Some(from), Some(to), Some(after)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(invalid("s/pattern/replacement/ is not closed"));
        };
        let (global, after) = match after.strip_prefix('g') {
            Some(after) => (true, after),
            None => (false, after),
        };
        let replacement = crate::principal_mapping::rust_replacement(to);
        substitution = Some((compile(from)?, replacement, global));
        rest = after;
    }
    let rest = rest.strip_prefix('/').unwrap_or(rest);
    let case = match rest {
        "" => Case::Keep,
        "L" => Case::Lower,
        "U" => Case::Upper,
        other => return Err(invalid(&format!("unexpected {other:?}"))),
    };
    Ok(Rule::Custom(Custom {
        components,
        format: format.to_string(),
        matches,
        substitution,
        case,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn namer(rules: &str) -> ShortNamer {
        ShortNamer::parse(rules, "EXAMPLE.COM").unwrap()
    }

    #[test]
    fn default_takes_the_first_component_in_the_default_realm() {
        let n = namer("DEFAULT");
        assert_eq!(n.short_name("alice@EXAMPLE.COM").unwrap(), "alice");
        assert_eq!(
            n.short_name("kafka/host1.example.com@EXAMPLE.COM").unwrap(),
            "kafka"
        );
        assert_eq!(n.short_name("alice").unwrap(), "alice");
        assert!(n
            .short_name("alice@OTHER.ORG")
            .unwrap_err()
            .contains("no rule"));
    }

    #[test]
    fn rules_apply_in_order_as_kafkas_tests_show() {
        // Kafka's KerberosNameTest.testParse rules.
        let n = namer(
            "RULE:[1:$1@$0](.*@FOO.COM)s/@.*//,\
             RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/g,\
             RULE:[2:$1](App\\..*)s/App\\.(.*)/$1/,\
             DEFAULT",
        );
        assert_eq!(
            n.short_name("App.service-name/example.com@REALM.COM")
                .unwrap(),
            "service-name"
        );
        assert_eq!(
            n.short_name("App.service-name/example.com@EXAMPLE.COM")
                .unwrap(),
            "service-name"
        );
        assert_eq!(n.short_name("user/host@EXAMPLE.COM").unwrap(), "user");
        assert_eq!(n.short_name("user@FOO.COM").unwrap(), "user");
        assert!(n.short_name("user/host@REALM.COM").is_err());
    }

    #[test]
    fn case_flags_and_global_substitution() {
        let n = namer("RULE:[1:$1]/L,RULE:[2:$1_$2]s/\\./-/g/U");
        assert_eq!(n.short_name("Alice@ANY.ORG").unwrap(), "alice");
        assert_eq!(n.short_name("svc/a.b.c@ANY.ORG").unwrap(), "SVC_A-B-C");
        let first_only = namer("RULE:[2:$1_$2]s/\\./-/");
        assert_eq!(
            first_only.short_name("svc/a.b.c@ANY.ORG").unwrap(),
            "svc_a-b.c"
        );
    }

    #[test]
    fn a_name_with_a_slash_or_at_is_refused() {
        let n = namer("RULE:[2:$1/$2]");
        assert!(n
            .short_name("svc/host@ANY.ORG")
            .unwrap_err()
            .contains("non-simple"));
    }

    #[test]
    fn bad_rules_are_refused_with_the_rule() {
        for bad in [
            "RULE:[3:$1]",
            "RULE:[1:$1",
            "RULE:[1:$1](abc",
            "RULE:[1:$1]s/a/b",
            "RULE:[1:$1]X",
            "RULE:[1:$1]((",
            "NOPE",
        ] {
            let error = ShortNamer::parse(bad, "R").unwrap_err();
            assert!(error.contains("invalid rule"), "{bad}: {error}");
        }
        assert!(ShortNamer::parse(" , ", "R").is_err());
        let out_of_range = namer("RULE:[1:$2]");
        assert!(out_of_range
            .short_name("a@R")
            .unwrap_err()
            .contains("out of range"));
    }
}
