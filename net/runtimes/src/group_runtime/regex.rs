//! KIP-848 regular-expression subscriptions: the topics a member's
//! `SubscribedTopicRegex` matches, resolved against this shard's topic
//! table each time its group is stepped (so topics created or deleted
//! later join or leave the subscription at the next heartbeat).
//!
//! As in Kafka: the expression must match a whole topic name (Kafka uses
//! RE2/J's `matches`; `regex-lite` has RE2's syntax), and internal topics
//! (`__consumer_offsets`, ...) never match.

use kernel::topics::TopicTable;
use regex_lite::Regex;
use std::cell::RefCell;
use std::collections::HashMap;

/// Compiled expressions kept, so a group's heartbeats do not compile its
/// members' expressions again; cleared when it grows past this.
const CACHED_EXPRESSIONS: usize = 256;

thread_local! {
    static COMPILED: RefCell<HashMap<String, Option<Regex>>> = RefCell::new(HashMap::new());
}

/// `expression` compiled to match whole names; `None` when it does not
/// compile.
pub fn whole_name_regex(expression: &str) -> Option<Regex> {
    Regex::new(&format!("^(?:{expression})$")).ok()
}

/// The topics of `table` that `expression` matches, internal ones aside
/// (none when it does not compile: the handler refused such a one).
pub(super) fn matching_topics(table: &TopicTable, expression: &str) -> Vec<String> {
    COMPILED.with(|compiled| {
        let mut compiled = compiled.borrow_mut();
        if compiled.len() >= CACHED_EXPRESSIONS && !compiled.contains_key(expression) {
            compiled.clear();
        }
        let regex = compiled
            .entry(expression.to_string())
            .or_insert_with(|| whole_name_regex(expression));
        let Some(regex) = regex else {
            return Vec::new();
        };
        table
            .iter()
            .map(|entry| &entry.name)
            .filter(|name| !name.starts_with("__") && regex.is_match(name))
            .cloned()
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expressions_match_whole_names_only() {
        let regex = whole_name_regex("orders-.*").expect("compiles");
        assert!(regex.is_match("orders-eu"));
        assert!(!regex.is_match("old-orders-eu"));
        let alternation = whole_name_regex("a|b").expect("compiles");
        assert!(alternation.is_match("a") && !alternation.is_match("ab"));
        assert!(whole_name_regex("(").is_none());
    }
}
