//! Rendering: `table` for people, `markdown` for tickets, `json` and `yaml` for programs. Renderers
//! only format what the commands computed.

pub mod json;
pub mod markdown;
pub mod random;
pub mod simulate;
pub mod table;
pub mod triage;
pub mod yaml;
