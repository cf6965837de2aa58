//! Rendering: `table` for people, `json` and `yaml` for programs. Renderers only format what the
//! commands computed.

pub mod json;
pub mod table;
pub mod yaml;
