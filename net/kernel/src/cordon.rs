//! Cordoned data dirs (KIP-1066, `cordoned.log.dirs`): which of this
//! broker's dirs take no new partitions, from the file's value or a
//! dynamic one. A dynamic value for this broker wins over one for every
//! broker (resource `""`), which wins over the file, as for Kafka's other
//! dynamic broker configs. The engine places new partitions off cordoned
//! dirs (`engine::log_dirs`); a broker whose dirs are all cordoned says so
//! in its heartbeats, and the controller places no new replica on it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The config's name.
pub const CORDONED_LOG_DIRS: &str = "cordoned.log.dirs";

/// The entries of a comma list, trimmed, empty ones dropped.
pub fn parse_list(value: &str) -> Vec<String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The list in force for broker `broker_id`: its dynamic value, else every
/// broker's, else the file's `static_list`.
pub fn effective_list(
    static_list: &[String],
    dynamic: &BTreeMap<String, BTreeMap<String, String>>,
    broker_id: i32,
) -> Vec<String> {
    let dynamic_value = |resource: &str| {
        dynamic
            .get(resource)
            .and_then(|configs| configs.get(CORDONED_LOG_DIRS))
    };
    match dynamic_value(&broker_id.to_string()).or_else(|| dynamic_value("")) {
        Some(value) => parse_list(value),
        None => static_list.to_vec(),
    }
}

/// For each of `data_dirs`, whether `list` cordons it: `*`, or its path as
/// written or as the file system resolves it.
pub fn cordoned_flags(list: &[String], data_dirs: &[PathBuf]) -> Vec<bool> {
    let resolved = |path: &Path| std::fs::canonicalize(path).ok();
    data_dirs
        .iter()
        .map(|dir| {
            list.iter().any(|entry| {
                let entry = Path::new(entry);
                entry == Path::new("*")
                    || entry == dir
                    || (resolved(entry).is_some() && resolved(entry) == resolved(dir))
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dynamic_value_of_the_broker_wins_then_every_brokers_then_the_file() {
        let file = parse_list(" /a , ,/b");
        assert_eq!(file, vec!["/a", "/b"]);
        let mut dynamic = BTreeMap::new();
        assert_eq!(effective_list(&file, &dynamic, 1), file);
        dynamic.insert(
            String::new(),
            BTreeMap::from([(CORDONED_LOG_DIRS.to_owned(), "*".to_owned())]),
        );
        assert_eq!(effective_list(&file, &dynamic, 1), vec!["*"]);
        dynamic.insert(
            "1".to_owned(),
            BTreeMap::from([(CORDONED_LOG_DIRS.to_owned(), String::new())]),
        );
        assert!(effective_list(&file, &dynamic, 1).is_empty());
        assert_eq!(effective_list(&file, &dynamic, 2), vec!["*"]);
    }

    #[test]
    fn a_dir_is_cordoned_by_star_by_its_path_or_by_the_path_it_resolves_to() {
        let root = tempfile::tempdir().unwrap();
        let a = root.path().join("a");
        let b = root.path().join("b");
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        let dirs = vec![a.clone(), b.clone()];
        assert_eq!(cordoned_flags(&[], &dirs), vec![false, false]);
        assert_eq!(cordoned_flags(&["*".into()], &dirs), vec![true, true]);
        let by_path = vec![b.display().to_string()];
        assert_eq!(cordoned_flags(&by_path, &dirs), vec![false, true]);
        let roundabout = vec![root.path().join("b/../a").display().to_string()];
        assert_eq!(cordoned_flags(&roundabout, &dirs), vec![true, false]);
    }
}
