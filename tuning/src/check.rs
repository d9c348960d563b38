//! The check model: one row of `rill tune check`, the report, and the fixes
//! `rill tune apply` derives from it.

use serde::{Deserialize, Serialize};

/// Outcome of one check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    /// The host is set up as rill wants.
    Pass,
    /// Works, but costs throughput or latency.
    Warn,
    /// rill will not run, or will run badly enough that it matters.
    Fail,
    /// The source is missing (VM, container, old kernel): nothing to judge.
    Skip,
}

impl Status {
    /// Lower-case label used in the table.
    pub fn label(self) -> &'static str {
        match self {
            Status::Pass => "pass",
            Status::Warn => "warn",
            Status::Fail => "fail",
            Status::Skip => "skip",
        }
    }
}

/// One write `rill tune apply` would do: the host path, the new value, and the
/// value found there (normalized so that writing it back restores the setting,
/// e.g. `mq-deadline` rather than `none [mq-deadline] kyber`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fix {
    /// Absolute host path (`/proc/sys/vm/swappiness`), mapped under the root on use.
    pub path: String,
    /// Value to write.
    pub value: String,
    /// Value before, as it must be written back to restore it.
    pub previous: String,
}

/// One row of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable dotted name (`vm.swappiness`, `disk.scheduler`).
    pub name: String,
    /// What the host has now ("unknown" when unreadable).
    pub current: String,
    /// What rill recommends.
    pub recommended: String,
    /// Why it matters for rill.
    pub why: String,
    /// Verdict.
    pub status: Status,
    /// Writes that would bring the host to the recommendation (empty when none
    /// can be made from software, or nothing needs to change).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub fixes: Vec<Fix>,
}

impl Check {
    /// A check with no fixes.
    pub fn new(
        name: &str,
        current: impl Into<String>,
        recommended: impl Into<String>,
        why: &str,
        status: Status,
    ) -> Self {
        Check {
            name: name.to_string(),
            current: current.into(),
            recommended: recommended.into(),
            why: why.to_string(),
            status,
            fixes: Vec::new(),
        }
    }

    /// A "skip" row for a source that is missing on this host.
    pub fn skip(name: &str, recommended: impl Into<String>, why: &str) -> Self {
        Check::new(name, "unknown", recommended, why, Status::Skip)
    }

    /// Adds fixes, kept only when the check is not already passing.
    pub fn with_fixes(mut self, fixes: Vec<Fix>) -> Self {
        if matches!(self.status, Status::Warn | Status::Fail) {
            self.fixes = fixes;
        }
        self
    }
}

/// The whole `rill tune check` result.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Rows in display order.
    pub checks: Vec<Check>,
}

impl Report {
    /// True when any check failed; `rill tune check` exits non-zero then.
    pub fn has_failures(&self) -> bool {
        self.checks.iter().any(|c| c.status == Status::Fail)
    }

    /// The row with this name.
    pub fn get(&self, name: &str) -> Option<&Check> {
        self.checks.iter().find(|c| c.name == name)
    }

    /// All fixes of failing or warning checks, in report order.
    pub fn fixes(&self) -> Vec<Fix> {
        self.checks.iter().flat_map(|c| c.fixes.clone()).collect()
    }

    /// A fixed-width text table for humans.
    pub fn to_table(&self) -> String {
        let headers = ["STATUS", "CHECK", "CURRENT", "RECOMMENDED", "WHY"];
        let rows: Vec<[String; 5]> = self
            .checks
            .iter()
            .map(|c| {
                [
                    c.status.label().to_string(),
                    c.name.clone(),
                    truncate(&c.current, 40),
                    truncate(&c.recommended, 30),
                    c.why.clone(),
                ]
            })
            .collect();
        let mut widths = headers.map(str::len);
        for row in &rows {
            for (width, cell) in widths.iter_mut().zip(row.iter()) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        let mut push_row = |cells: [&str; 5]| {
            let mut line = String::new();
            for (index, cell) in cells.iter().enumerate() {
                if index == cells.len() - 1 {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[index]));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        };
        push_row(headers);
        for row in &rows {
            push_row([&row[0], &row[1], &row[2], &row[3], &row[4]]);
        }
        out
    }
}

fn truncate(text: &str, max_chars: usize) -> String {
    if text.chars().count() <= max_chars {
        text.to_string()
    } else {
        let kept: String = text.chars().take(max_chars - 1).collect();
        format!("{kept}…")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixes_only_kept_for_failing_rows() {
        let fix = Fix {
            path: "/proc/sys/vm/swappiness".into(),
            value: "1".into(),
            previous: "60".into(),
        };
        let passing = Check::new("a", "1", "1", "", Status::Pass).with_fixes(vec![fix.clone()]);
        let warning = Check::new("b", "60", "1", "", Status::Warn).with_fixes(vec![fix.clone()]);
        assert!(passing.fixes.is_empty());
        assert_eq!(warning.fixes, vec![fix.clone()]);
        let report = Report {
            checks: vec![passing, warning],
        };
        assert_eq!(report.fixes(), vec![fix]);
        assert!(!report.has_failures());
        let table = report.to_table();
        assert!(table.lines().count() == 3);
        assert!(table.contains("warn") && table.contains("STATUS"));
    }
}
