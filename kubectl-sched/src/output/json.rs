//! `-o json`: the value pretty-printed, as `kubectl get -o json` does.

use serde::Serialize;

/// Pretty JSON with a final newline.
pub fn render<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let mut text = serde_json::to_string_pretty(value)?;
    text.push('\n');
    Ok(text)
}
