//! Reports over one or more [`RunResult`]s: a text table for the terminal
//! and a self-contained HTML page with inline SVG.
//!
//! - [`svg`]: line and bar chart primitives.
//! - [`text`]: the comparison table.
//! - [`html`]: the full page.

pub mod html;
pub mod svg;
pub mod text;

use crate::error::Result;
use crate::results::RunResult;
use std::path::Path;

/// Loads result files (from `run` or `compare`) and writes the HTML report; returns the text table.
pub fn report_files(inputs: &[std::path::PathBuf], html_out: &Path) -> Result<String> {
    let mut runs = Vec::new();
    for path in inputs {
        runs.extend(RunResult::load_many(path)?);
    }
    if runs.is_empty() {
        return Err(crate::error::BenchError::Other(
            "report: no results in the input files".into(),
        ));
    }
    std::fs::write(html_out, html::render("rill-bench report", &runs))?;
    Ok(text::table(&runs))
}
