//! `-o yaml`.

use serde::Serialize;

/// The value as one YAML document.
pub fn render<T: Serialize + ?Sized>(value: &T) -> Result<String, yaml_serde::Error> {
    yaml_serde::to_string(value)
}
