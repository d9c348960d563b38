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
    let runs = inputs
        .iter()
        .map(|p| RunResult::load(p))
        .collect::<Result<Vec<_>>>()?;
    std::fs::write(html_out, html::render("rill-bench report", &runs))?;
    Ok(text::table(&runs))
}
