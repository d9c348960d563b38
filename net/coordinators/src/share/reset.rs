//! `share.auto.offset.reset`: where a share group starts on a partition it
//! holds no state for. Kafka 4.x's three strategies: `earliest`, `latest`
//! (the default) and `by_duration:<ISO-8601 duration>` (KIP-1106), the
//! last one the first record no older than the duration, as ListOffsets by
//! timestamp finds it.
//!
//! The duration is Java's `Duration.parse` grammar, as Kafka validates it:
//! `PnDTnHnMn.nS`, case-insensitive, each number optionally signed, the
//! seconds with up to nine decimals; the whole must not be negative.

/// Where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ShareAutoOffsetReset {
    /// At the log start.
    Earliest,
    /// At the high watermark: only records produced from now on.
    #[default]
    Latest,
    /// At the first record whose timestamp is at most this many
    /// milliseconds before now; at the high watermark when none is.
    ByDurationMs(i64),
}

impl ShareAutoOffsetReset {
    /// The strategy a config value names; `None` for a value Kafka refuses.
    pub fn parse(value: &str) -> Option<ShareAutoOffsetReset> {
        match value {
            "earliest" => Some(ShareAutoOffsetReset::Earliest),
            "latest" => Some(ShareAutoOffsetReset::Latest),
            _ => {
                let duration = value.strip_prefix("by_duration:")?;
                let ms = iso_duration_ms(duration.trim())?;
                (ms >= 0).then_some(ShareAutoOffsetReset::ByDurationMs(ms))
            }
        }
    }

    /// The timestamp a `by_duration` start looks records up from, at
    /// `now_ms`; `None` for the other strategies.
    pub fn lookup_timestamp_ms(self, now_ms: i64) -> Option<i64> {
        match self {
            ShareAutoOffsetReset::ByDurationMs(ms) => Some(now_ms.saturating_sub(ms).max(0)),
            _ => None,
        }
    }
}

/// An ISO-8601 duration (`PnDTnHnMn.nS`) in milliseconds, truncated below
/// the millisecond; `None` when it does not parse or overflows.
fn iso_duration_ms(text: &str) -> Option<i64> {
    let upper = text.to_ascii_uppercase();
    let (negated, rest) = match upper.as_bytes().first()? {
        b'-' => (true, &upper[1..]),
        b'+' => (false, &upper[1..]),
        _ => (false, upper.as_str()),
    };
    let rest = rest.strip_prefix('P')?;
    let (date, time) = match rest.split_once('T') {
        Some((date, time)) if !time.is_empty() => (date, Some(time)),
        Some(_) => return None,
        None => (rest, None),
    };
    let mut total_ms = 0i64;
    let mut components = 0;
    if !date.is_empty() {
        let days = date.strip_suffix('D')?;
        total_ms = total_ms.checked_add(whole(days)?.checked_mul(86_400_000)?)?;
        components += 1;
    }
    if let Some(time) = time {
        let mut left = time;
        for (unit, ms) in [('H', 3_600_000i64), ('M', 60_000)] {
            if let Some((number, after)) = left.split_once(unit) {
                total_ms = total_ms.checked_add(whole(number)?.checked_mul(ms)?)?;
                components += 1;
                left = after;
            }
        }
        if !left.is_empty() {
            total_ms = total_ms.checked_add(seconds_ms(left.strip_suffix('S')?)?)?;
            components += 1;
        }
    }
    (components > 0).then_some(if negated { -total_ms } else { total_ms })
}

/// A signed whole number of at least one digit.
fn whole(text: &str) -> Option<i64> {
    let digits = text.trim_start_matches(['+', '-']);
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) || text.len() > 20 {
        return None;
    }
    text.parse().ok()
}

/// Signed seconds with up to nine decimals (`.` or `,`), in milliseconds.
fn seconds_ms(text: &str) -> Option<i64> {
    let (integer, fraction) = match text.split_once(['.', ',']) {
        Some((integer, fraction)) => (integer, fraction),
        None => (text, ""),
    };
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let seconds = whole(integer)?;
    let millis: i64 = format!("{fraction:0<3}")[..3].parse().ok()?;
    let millis = if integer.starts_with('-') {
        -millis
    } else {
        millis
    };
    seconds.checked_mul(1_000)?.checked_add(millis)
}

#[cfg(test)]
mod tests {
    use super::ShareAutoOffsetReset::{ByDurationMs, Earliest, Latest};
    use super::*;

    #[test]
    fn the_three_strategies_parse() {
        assert_eq!(ShareAutoOffsetReset::parse("earliest"), Some(Earliest));
        assert_eq!(ShareAutoOffsetReset::parse("latest"), Some(Latest));
        assert_eq!(
            ShareAutoOffsetReset::parse("by_duration:PT1H"),
            Some(ByDurationMs(3_600_000))
        );
        for refused in [
            "",
            "none",
            "Earliest",
            "by_duration:",
            "by_duration:1h",
            "duration:PT1H",
        ] {
            assert_eq!(ShareAutoOffsetReset::parse(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn durations_follow_java_duration_parse() {
        let cases = [
            ("P1D", 86_400_000),
            ("PT15M", 900_000),
            ("PT10S", 10_000),
            ("PT0.5S", 500),
            ("PT0,25S", 250),
            ("PT1.123456789S", 1_123),
            (
                "P2DT3H4M5.6S",
                2 * 86_400_000 + 3 * 3_600_000 + 4 * 60_000 + 5_600,
            ),
            ("pt1h30m", 5_400_000),
            ("PT0S", 0),
            ("+PT1S", 1_000),
            ("P1DT-1H", 23 * 3_600_000),
            ("PT-0.5S", -500),
            ("-PT1M", -60_000),
        ];
        for (text, ms) in cases {
            assert_eq!(iso_duration_ms(text), Some(ms), "{text}");
        }
        for refused in [
            "",
            "P",
            "PT",
            "P1DT",
            "1D",
            "PT1",
            "P1H",
            "PT1D",
            "PT1.S1",
            "PT1.1234567890S",
            "PTS",
            "PT1M1H",
            "P-D",
        ] {
            assert_eq!(iso_duration_ms(refused), None, "{refused:?}");
        }
    }

    #[test]
    fn a_negative_duration_is_refused() {
        assert_eq!(ShareAutoOffsetReset::parse("by_duration:-PT1H"), None);
        assert_eq!(ShareAutoOffsetReset::parse("by_duration:PT-1S"), None);
        assert_eq!(
            ShareAutoOffsetReset::parse("by_duration:PT0S"),
            Some(ByDurationMs(0))
        );
    }

    #[test]
    fn the_lookup_goes_back_by_the_duration() {
        assert_eq!(ByDurationMs(1_000).lookup_timestamp_ms(5_000), Some(4_000));
        assert_eq!(ByDurationMs(10_000).lookup_timestamp_ms(5_000), Some(0));
        assert_eq!(Earliest.lookup_timestamp_ms(5_000), None);
        assert_eq!(Latest.lookup_timestamp_ms(5_000), None);
    }
}
