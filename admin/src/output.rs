//! What a command prints: plain aligned tables by default (headers in
//! capitals, columns two spaces apart, as rpk and Kafka's tools print),
//! or one JSON document with `--format json` for scripts. A command builds
//! both from the same answer, in a [`Report`].

use serde_json::Value;

/// `--format`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Aligned columns.
    #[default]
    Table,
    /// One JSON document.
    Json,
}

/// One table: an optional title line, a header row, rows of cells.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    pub title: Option<String>,
    pub headers: Vec<&'static str>,
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with `headers` and no rows yet.
    pub fn new(headers: &[&'static str]) -> Table {
        Table {
            title: None,
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// The same table under a title line.
    pub fn titled(mut self, title: impl Into<String>) -> Table {
        self.title = Some(title.into());
        self
    }

    /// Appends a row (one cell per header).
    pub fn row(&mut self, cells: Vec<String>) {
        debug_assert_eq!(cells.len(), self.headers.len(), "{:?}", self.headers);
        self.rows.push(cells);
    }

    /// The table as text, each column as wide as its widest cell; the last
    /// column is not padded (no trailing blanks).
    pub fn render(&self) -> String {
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.chars().count());
            }
        }
        let mut out = String::new();
        if let Some(title) = &self.title {
            out.push_str(title);
            out.push('\n');
        }
        let headers: Vec<String> = self.headers.iter().map(|h| h.to_string()).collect();
        for cells in std::iter::once(&headers).chain(&self.rows) {
            let mut line = String::new();
            for (index, (cell, width)) in cells.iter().zip(&widths).enumerate() {
                if index + 1 == cells.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  "));
                }
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// A command's result: its tables, its JSON, and the items that failed
/// (each also shown in the output; any makes the exit code non-zero).
#[derive(Debug, Clone, Default)]
pub struct Report {
    pub tables: Vec<Table>,
    pub json: Value,
    pub failures: Vec<String>,
}

impl Report {
    /// A report of one table.
    pub fn single(table: Table, json: Value) -> Report {
        Report {
            tables: vec![table],
            json,
            failures: Vec::new(),
        }
    }

    /// The text printed on stdout for `format`.
    pub fn render(&self, format: Format) -> crate::error::Result<String> {
        match format {
            Format::Json => Ok(serde_json::to_string_pretty(&self.json)? + "\n"),
            Format::Table => Ok(self
                .tables
                .iter()
                .map(Table::render)
                .collect::<Vec<_>>()
                .join("\n")),
        }
    }
}

/// Bytes as text for a table or JSON: UTF-8 where they are, with
/// replacement characters where not (a console consumer's choice too).
pub fn text(bytes: Option<&[u8]>) -> Option<String> {
    bytes.map(|b| String::from_utf8_lossy(b).into_owned())
}

/// A list of ids as `1,2,3`; `-` for none, so that a table's cell is
/// never blank (scripts split rows on blanks).
pub fn id_list(ids: &[i32]) -> String {
    if ids.is_empty() {
        return String::from("-");
    }
    ids.iter().map(i32::to_string).collect::<Vec<_>>().join(",")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align_their_columns() {
        let mut table = Table::new(&["NAME", "PARTITIONS"]).titled("TOPICS");
        table.row(vec!["a-long-name".into(), "3".into()]);
        table.row(vec!["b".into(), "12".into()]);
        assert_eq!(
            table.render(),
            "TOPICS\nNAME         PARTITIONS\na-long-name  3\nb            12\n"
        );
        let empty = Table::new(&["GROUP", "STATE"]);
        assert_eq!(empty.render(), "GROUP  STATE\n");
    }

    #[test]
    fn json_is_the_document_alone() {
        let report = Report::single(Table::new(&["A"]), serde_json::json!({"a": 1}));
        assert_eq!(report.render(Format::Json).unwrap(), "{\n  \"a\": 1\n}\n");
        assert_eq!(report.render(Format::Table).unwrap(), "A\n");
        assert_eq!(id_list(&[1, 2]), "1,2");
        assert_eq!(id_list(&[]), "-");
        assert_eq!(text(Some(b"v")).as_deref(), Some("v"));
    }
}
