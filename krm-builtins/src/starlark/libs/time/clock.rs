//! The time model under `time.star`: an instant with the zone it is shown
//! in, its fields on that zone's clock, and Go's calendar arithmetic
//! (`time.Date`'s normalising). Both the module's functions and Go's
//! layouts ([`super::layout`]) work on it.

pub(super) const NANOS: i128 = 1_000_000_000;

/// An instant and the zone it is shown in.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Time {
    /// Seconds since 1970-01-01 UTC.
    pub(super) sec: i64,
    pub(super) nsec: u32,
    /// Seconds east of UTC.
    pub(super) offset: i32,
    pub(super) zone: String,
}

/// A time's fields on its zone's clock.
pub(super) struct Civil {
    pub(super) year: i64,
    pub(super) month: u32,
    pub(super) day: u32,
    pub(super) hour: u32,
    pub(super) minute: u32,
    pub(super) second: u32,
    /// 0 for Sunday.
    pub(super) weekday: u32,
    /// 1 for January 1st.
    pub(super) yday: u32,
}

/// Days since 1970-01-01 of a date (proleptic Gregorian).
fn days_from_civil(year: i128, month: u32, day: u32) -> i128 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let m = i128::from(month);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i128::from(day) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of a day since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = i128::from(days) + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i128::from(month <= 2);
    (
        i64::try_from(year).unwrap_or(i64::MAX),
        u32::try_from(month).unwrap_or(1),
        u32::try_from(day).unwrap_or(1),
    )
}

pub(super) fn is_leap(year: i64) -> bool {
    year % 4 == 0 && (year % 100 != 0 || year % 400 == 0)
}

pub(super) fn days_in(month: u32, year: i64) -> u32 {
    match month {
        2 if is_leap(year) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

impl Time {
    fn utc(sec: i64, nsec: u32) -> Time {
        Time {
            sec,
            nsec,
            offset: 0,
            zone: "UTC".into(),
        }
    }

    /// The instant `ns` nanoseconds after the epoch (UTC), if it fits.
    pub(super) fn from_nanos(ns: i128) -> Option<Time> {
        let sec = i64::try_from(ns.div_euclid(NANOS)).ok()?;
        let nsec = u32::try_from(ns.rem_euclid(NANOS)).ok()?;
        Some(Time::utc(sec, nsec))
    }

    pub(super) fn civil(&self) -> Civil {
        let local = i128::from(self.sec) + i128::from(self.offset);
        let days = i64::try_from(local.div_euclid(86_400)).unwrap_or(0);
        let secs = u32::try_from(local.rem_euclid(86_400)).unwrap_or(0);
        let (year, month, day) = civil_from_days(days);
        let yday = days - i64::try_from(days_from_civil(i128::from(year), 1, 1)).unwrap_or(days);
        Civil {
            year,
            month,
            day,
            hour: secs / 3600,
            minute: secs / 60 % 60,
            second: secs % 60,
            weekday: u32::try_from((days + 4).rem_euclid(7)).unwrap_or(0),
            yday: u32::try_from(yday + 1).unwrap_or(1),
        }
    }

    /// Go's `UnixNano` (wrapping past int64, as Go's does).
    pub(super) fn unix_nano(&self) -> i64 {
        self.sec
            .wrapping_mul(1_000_000_000)
            .wrapping_add(i64::from(self.nsec))
    }
}

/// Go's `time.Date`: the fields normalized (month 13 is January of the
/// next year, and so on) and taken on a clock `offset` seconds east of
/// UTC.
#[allow(clippy::too_many_arguments)]
pub(super) fn date(
    year: i64,
    month: i64,
    day: i64,
    hour: i64,
    minute: i64,
    second: i64,
    nsec: i64,
    offset: i32,
) -> Option<Time> {
    let m0 = i128::from(month) - 1;
    let year = i128::from(year) + m0.div_euclid(12);
    let month = u32::try_from(m0.rem_euclid(12) + 1).ok()?;
    let days = days_from_civil(year, month, 1) + i128::from(day) - 1;
    let secs =
        days * 86_400 + i128::from(hour) * 3600 + i128::from(minute) * 60 + i128::from(second)
            - i128::from(offset);
    Time::from_nanos(secs * NANOS + i128::from(nsec))
}
