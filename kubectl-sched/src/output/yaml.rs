//! `-o yaml`.

use serde::Serialize;

/// The value as one YAML document.
pub fn render<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_yaml::Error> {
    serde_yaml::to_string(value)
}
