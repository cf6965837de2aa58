//! `explain`'s output: the table for people ([`table`], also `-o wide`), the block for a ticket
//! ([`markdown`]), or the data as JSON or YAML; a pod group's text is [`pod_group`]'s.

pub mod markdown;
pub mod pod_group;
pub mod table;

use super::Rendered;
use super::data::{RenderError, json, yaml};
use crate::cli::ExplainFormat;
use crate::commands::explain::ExplainResult;

/// `explain`'s answer in the requested format.
pub fn render(result: &ExplainResult, format: ExplainFormat) -> Result<Rendered, RenderError> {
    let text = match (result, format) {
        (ExplainResult::One(r), ExplainFormat::Table) => table::report(r, false),
        (ExplainResult::One(r), ExplainFormat::Wide) => table::report(r, true),
        (ExplainResult::One(r), ExplainFormat::Json) => json(r)?,
        (ExplainResult::One(r), ExplainFormat::Yaml) => yaml(r)?,
        (ExplainResult::One(r), ExplainFormat::Markdown) => markdown::report(r),
        (ExplainResult::Group(g), ExplainFormat::Table) => pod_group::report(g, false),
        (ExplainResult::Group(g), ExplainFormat::Wide) => pod_group::report(g, true),
        (ExplainResult::Group(g), ExplainFormat::Json) => json(g)?,
        (ExplainResult::Group(g), ExplainFormat::Yaml) => yaml(g)?,
        (ExplainResult::Group(g), ExplainFormat::Markdown) => {
            format!("```\n{}```\n", pod_group::report(g, false))
        }
        (ExplainResult::AllPending { entries, .. }, ExplainFormat::Json) => json(entries)?,
        (ExplainResult::AllPending { entries, .. }, ExplainFormat::Yaml) => yaml(entries)?,
        (ExplainResult::AllPending { entries, what_if, .. }, ExplainFormat::Markdown) => {
            markdown::pending(entries, what_if)
        }
        (
            ExplainResult::AllPending {
                entries,
                scope,
                what_if,
            },
            ExplainFormat::Table | ExplainFormat::Wide,
        ) => {
            return Ok(Rendered {
                stdout: (table::what_if_line(what_if) + &table::pending(entries)).into_bytes(),
                nothing_found: entries.is_empty().then(|| format!("No pending pods in {scope}.")),
            });
        }
    };
    Ok(text.into())
}
