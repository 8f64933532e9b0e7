//! Dates and durations as people type them and as Taskwarrior writes them.
//!
//! Everything inside spice is microseconds since the Unix epoch (UTC). Input accepts
//! Taskwarrior's compact form (`20261101T120000Z`), RFC 3339, and a plain date
//! (`2026-12-01`, taken as midnight UTC). Durations use humantime (`90s`, `15m`, `2h30m`)
//! and are at most [`MAX_DURATION`] (10 years): every duration field (`--lease`, `--ttl`,
//! lane-file `lease`/`renew`/`start_timeout`, the console's `ttl`/`lease`) goes through
//! [`parse_duration`], so a typo such as `300000y` is refused instead of overflowing
//! into a lease "until 1970".

use crate::clock::Micros;
use chrono::{DateTime, NaiveDate, NaiveDateTime, TimeZone, Utc};

/// Parses a date in any accepted form; the error says which forms are accepted.
pub fn parse_date(text: &str) -> Result<Micros, String> {
    let t = text.trim();
    if let Ok(dt) = NaiveDateTime::parse_from_str(t, "%Y%m%dT%H%M%SZ") {
        return Ok(Utc.from_utc_datetime(&dt).timestamp_micros());
    }
    if let Ok(dt) = DateTime::parse_from_rfc3339(t) {
        return Ok(dt.timestamp_micros());
    }
    if let Ok(dt) = NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S") {
        return Ok(Utc.from_utc_datetime(&dt).timestamp_micros());
    }
    if let Ok(d) = NaiveDate::parse_from_str(t, "%Y-%m-%d") {
        let dt = d.and_hms_opt(0, 0, 0).expect("midnight exists");
        return Ok(Utc.from_utc_datetime(&dt).timestamp_micros());
    }
    Err(format!(
        "invalid date '{t}': expected YYYY-MM-DD, RFC 3339 or YYYYMMDDTHHMMSSZ"
    ))
}

/// Taskwarrior's export form: `20261101T120000Z` (seconds precision).
pub fn taskwarrior(micros: Micros) -> String {
    to_datetime(micros).format("%Y%m%dT%H%M%SZ").to_string()
}

/// RFC 3339 in UTC, with a fraction only when the moment has one (JSON output).
pub fn rfc3339(micros: Micros) -> String {
    to_datetime(micros).to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true)
}

/// `2026-11-01 12:00` in UTC, for tables.
pub fn short(micros: Micros) -> String {
    to_datetime(micros).format("%Y-%m-%d %H:%M").to_string()
}

fn to_datetime(micros: Micros) -> DateTime<Utc> {
    DateTime::from_timestamp_micros(micros).unwrap_or_default()
}

/// The longest duration any field accepts: 10 years (of 365.25 days, as humantime
/// counts them). Far beyond any sensible lease or TTL, and far inside the range of a
/// microsecond timestamp, so `now + duration` can never overflow.
pub const MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(10 * 31_557_600);

/// The maximum as people read it, for error messages and help.
pub const MAX_DURATION_TEXT: &str = "10 years";

/// Parses a positive duration (`30s`, `15m`, `2h 30m`, `1d`) of at most [`MAX_DURATION`].
pub fn parse_duration(text: &str) -> Result<std::time::Duration, String> {
    let t = text.trim();
    let d = humantime::parse_duration(t)
        .map_err(|e| format!("invalid duration '{t}': {e} (try 30s, 15m, 2h)"))?;
    if d.is_zero() {
        return Err(format!("invalid duration '{t}': must be positive"));
    }
    check_duration(d).map_err(|_| too_long(t))?;
    Ok(d)
}

/// Refuses a duration longer than [`MAX_DURATION`], for durations that reach the
/// library without being parsed from text (the store checks leases and TTLs with it).
pub fn check_duration(d: std::time::Duration) -> Result<(), String> {
    if d > MAX_DURATION {
        return Err(too_long(&format!("{}s", d.as_secs())));
    }
    Ok(())
}

fn too_long(text: &str) -> String {
    format!("{text} exceeds the maximum duration of {MAX_DURATION_TEXT}")
}

/// A duration in microseconds, saturating.
pub fn micros(d: std::time::Duration) -> Micros {
    i64::try_from(d.as_micros()).unwrap_or(i64::MAX)
}

/// A span counted in whole seconds, in [`span`]'s form (`0s`, not `0ms`, for none).
pub fn seconds(s: i64) -> String {
    if s == 0 {
        return "0s".into();
    }
    span(s.saturating_mul(1_000_000))
}

/// A short human form of a signed span: `3h12m`, `-45s`.
pub fn span(mut us: Micros) -> String {
    let neg = us < 0;
    us = us.abs();
    let s = us / 1_000_000;
    let (d, h, m, sec) = (s / 86_400, (s / 3600) % 24, (s / 60) % 60, s % 60);
    let body = if d > 0 {
        format!("{d}d{h}h")
    } else if h > 0 {
        format!("{h}h{m}m")
    } else if m > 0 {
        format!("{m}m{sec}s")
    } else if s > 0 {
        format!("{sec}s")
    } else {
        format!("{}ms", us / 1000)
    };
    if neg {
        format!("-{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn taskwarrior_round_trip() {
        let m = parse_date("20261101T120000Z").unwrap();
        assert_eq!(taskwarrior(m), "20261101T120000Z");
        assert_eq!(rfc3339(m), "2026-11-01T12:00:00Z");
        assert_eq!(parse_date("2026-11-01T12:00:00Z").unwrap(), m);
        assert_eq!(parse_date("2026-11-01").unwrap() + 12 * 3_600_000_000, m);
        assert!(parse_date("tomorrowish")
            .unwrap_err()
            .contains("tomorrowish"));
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("90s").unwrap().as_secs(), 90);
        assert_eq!(parse_duration("2h 30m").unwrap().as_secs(), 9000);
        assert!(parse_duration("0s").is_err());
        assert!(parse_duration("soon").unwrap_err().contains("soon"));
        assert_eq!(span(-45_000_000), "-45s");
        assert_eq!(parse_duration("10y").unwrap(), MAX_DURATION);
        assert!(check_duration(MAX_DURATION).is_ok());
        assert_eq!(span(3 * 3_600_000_000 + 12 * 60_000_000), "3h12m");
    }

    /// Regression (#14): `300000y` overflowed a microsecond timestamp, and the lease
    /// it made read "until 1970-01-01".
    #[test]
    fn absurd_durations_are_refused_against_the_documented_maximum() {
        for text in ["300000y", "10y 1s", "3653d"] {
            let e = parse_duration(text).unwrap_err();
            assert_eq!(
                e,
                format!("{text} exceeds the maximum duration of 10 years"),
                "{text}"
            );
        }
        assert!(check_duration(MAX_DURATION + std::time::Duration::from_secs(1)).is_err());
        // The maximum added to any plausible clock still fits a timestamp.
        assert!(crate::clock::Micros::MAX - micros(MAX_DURATION) > 4_102_444_800_000_000);
    }
}
