//! Go's duration strings (`time.ParseDuration`): what kube-scheduler's plugin args (`filterTimeout`,
//! `bindingTimeout`) and kubectl's `--request-timeout` are written in.

use std::time::Duration;

/// Parses `1m30s`, `500ms`, `2h`, `1.5s`, `0`: decimal numbers each followed by a unit (`ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`). Negative durations and anything else are `None`.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    if text == "0" {
        return Some(Duration::ZERO);
    }
    if text.is_empty() {
        return None;
    }
    let mut total = Duration::ZERO;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
        if digits == 0 {
            return None;
        }
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let unit_len = rest.find(|c: char| c.is_ascii_digit()).unwrap_or(rest.len());
        let seconds = match &rest[..unit_len] {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            _ => return None,
        };
        rest = &rest[unit_len..];
        total += Duration::try_from_secs_f64(value * seconds).ok()?;
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        let cases = [
            ("0", Some(Duration::ZERO)),
            ("10s", Some(Duration::from_secs(10))),
            ("1m30s", Some(Duration::from_secs(90))),
            ("250ms", Some(Duration::from_millis(250))),
            ("1.5h", Some(Duration::from_secs(5400))),
            ("", None),
            ("10", None),
            ("ten", None),
            ("-1s", None),
            ("5d", None),
        ];
        for (text, want) in cases {
            assert_eq!(parse_go_duration(text), want, "{text}");
        }
    }
}
