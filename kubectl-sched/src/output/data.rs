//! `-o json` and `-o yaml`: a command's result as programs read it, `kubectl get -o json|yaml`'s way.

use serde::Serialize;

/// A result that cannot be written as JSON or YAML (a bug: every result serializes).
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// serde_json refused the value.
    #[error("rendering JSON")]
    Json(#[source] serde_json::Error),
    /// yaml_serde refused the value.
    #[error("rendering YAML")]
    Yaml(#[source] yaml_serde::Error),
}

/// Pretty JSON with a final newline.
pub fn json<T: Serialize + ?Sized>(value: &T) -> Result<String, RenderError> {
    let mut text = serde_json::to_string_pretty(value).map_err(RenderError::Json)?;
    text.push('\n');
    Ok(text)
}

/// The value as one YAML document.
pub fn yaml<T: Serialize + ?Sized>(value: &T) -> Result<String, RenderError> {
    yaml_serde::to_string(value).map_err(RenderError::Yaml)
}
