//! When a request's answer is due: the API server tells each webhook call how long it will wait (the
//! `timeout` query parameter it adds to the URL, from the configuration's `timeoutSeconds`), and a call
//! it gives up on is handled by `failurePolicy` whatever the webhook did meanwhile. So the reads a
//! request makes (the objects the watches have not delivered yet) stop once most of that time is
//! gone: the rest is kept for deciding and answering. Admission writes nothing (the controller does,
//! after the pod is stored), so there is nothing to take back.

use std::time::{Duration, Instant};

/// The share of the API server's timeout kept for deciding and answering.
const RESERVE_FRACTION: u32 = 5;
/// The least time kept back, however short the timeout.
const MIN_RESERVE: Duration = Duration::from_millis(500);

/// The instant after which no retry starts, for a request that arrived at `arrived` with the URL query
/// `query`; `None` when the query has no (valid) `timeout`.
pub fn from_query(query: Option<&str>, arrived: Instant) -> Option<Instant> {
    let timeout = query?
        .split('&')
        .find_map(|pair| pair.strip_prefix("timeout="))
        .and_then(parse_go_duration)?;
    let reserve = (timeout / RESERVE_FRACTION).max(MIN_RESERVE).min(timeout / 2);
    arrived.checked_add(timeout - reserve)
}

/// Parses a Go `time.Duration` string as `Duration.String()` writes it (`5s`, `1m30s`, `2.5s`,
/// `500ms`); `None` for anything else, negative and unrepresentably large durations included.
pub fn parse_go_duration(text: &str) -> Option<Duration> {
    // Longer units first, so that "ms" is not read as minutes.
    const UNITS: [(&str, f64); 7] = [
        ("ns", 1e-9),
        ("us", 1e-6),
        ("µs", 1e-6),
        ("ms", 1e-3),
        ("h", 3600.0),
        ("m", 60.0),
        ("s", 1.0),
    ];
    if text == "0" {
        return Some(Duration::ZERO);
    }
    let mut rest = text;
    let mut seconds = 0.0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let value: f64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, scale) = UNITS.iter().find(|(unit, _)| rest.starts_with(unit))?;
        seconds += value * scale;
        rest = &rest[unit.len()..];
    }
    // try_: a duration too large for `Duration` is refused, not a panic in the request's handler.
    (!text.is_empty())
        .then(|| Duration::try_from_secs_f64(seconds).ok())
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations_parse() {
        let cases: &[(&str, Option<f64>)] = &[
            ("5s", Some(5.0)),
            ("30s", Some(30.0)),
            ("1m0s", Some(60.0)),
            ("1m30s", Some(90.0)),
            ("2.5s", Some(2.5)),
            ("500ms", Some(0.5)),
            ("1h", Some(3600.0)),
            ("1500us", Some(0.0015)),
            ("0", Some(0.0)),
            ("", None),
            ("5", None),
            ("s", None),
            ("-5s", None),
            ("5x", None),
            ("5s junk", None),
            ("99999999999999999999999999h", None),
        ];
        for (text, want) in cases {
            assert_eq!(
                parse_go_duration(text).map(|d| d.as_secs_f64()),
                *want,
                "{text:?}"
            );
        }
    }

    #[test]
    fn deadline_keeps_a_reserve_before_the_api_servers_timeout() {
        let now = Instant::now();
        let at = |q: &str| from_query(Some(q), now).map(|d| d - now);
        // A fifth of the timeout is kept back...
        assert_eq!(at("timeout=5s"), Some(Duration::from_secs(4)));
        assert_eq!(at("timeout=10s"), Some(Duration::from_secs(8)));
        // ...but at least half a second, and never more than half of it.
        assert_eq!(at("timeout=2s"), Some(Duration::from_millis(1500)));
        assert_eq!(at("timeout=600ms"), Some(Duration::from_millis(300)));
        // The parameter among others; none, or unreadable: no deadline.
        assert_eq!(at("a=b&timeout=5s&c"), Some(Duration::from_secs(4)));
        assert_eq!(at("a=b"), None);
        assert_eq!(at("timeout=soon"), None);
        // Representable, but beyond any clock: no deadline rather than a panic.
        assert_eq!(at("timeout=4000000000000000h"), None);
        assert_eq!(from_query(None, now), None);
    }
}
