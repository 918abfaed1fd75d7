// SPDX-License-Identifier: LGPL-3.0-or-later
//! `utime_t` (src/include/utime.h) and `uuid_d` (src/include/uuid.h).

use std::fmt;
use std::str::FromStr;

use crate::{Decode, DecodeError, Decoder, Encode, Encoder, Result};

/// `utime_t`: `le32 sec, le32 nsec` (8 bytes). Ordered by (sec, nsec) like Ceph's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Utime {
    pub sec: u32,
    pub nsec: u32,
}

impl Utime {
    pub const fn new(sec: u32, nsec: u32) -> Self {
        Utime { sec, nsec }
    }
    pub fn is_zero(&self) -> bool {
        self.sec == 0 && self.nsec == 0
    }
    pub fn as_nanos(&self) -> u64 {
        u64::from(self.sec) * 1_000_000_000 + u64::from(self.nsec)
    }
    /// A wall-clock instant (seconds truncated to 32 bits, as Ceph does).
    pub fn from_system_time(t: std::time::SystemTime) -> Self {
        let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
        Utime {
            sec: d.as_secs() as u32,
            nsec: d.subsec_nanos(),
        }
    }
    pub fn to_system_time(&self) -> std::time::SystemTime {
        std::time::UNIX_EPOCH
            + std::time::Duration::new(u64::from(self.sec), 0)
            + std::time::Duration::from_nanos(u64::from(self.nsec))
    }

    /// Ceph's UTC time stamp with microseconds, `2026-11-30T09:41:02.125614+0000`: how `monmaptool --print`
    /// shows a monmap's times and how the OSD's admin socket shows op times.
    pub fn to_iso_utc(&self) -> String {
        let mut s = String::with_capacity(31);
        let _ = self.write_iso_utc(&mut s); // writing to a String cannot fail
        s
    }

    fn write_iso_utc(&self, w: &mut impl fmt::Write) -> fmt::Result {
        let rem = self.sec % 86_400;
        let (y, m, d) = civil_from_days(i64::from(self.sec / 86_400));
        write!(
            w,
            "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+0000",
            rem / 3600,
            rem / 60 % 60,
            rem % 60,
            self.nsec / 1000
        )
    }
}

impl Decode for Utime {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(Utime {
            sec: d.u32()?,
            nsec: d.u32()?,
        })
    }
}
impl Encode for Utime {
    fn encode(&self, e: &mut Encoder) {
        e.u32(self.sec);
        e.u32(self.nsec);
    }
}

/// Ceph's `operator<<` for `utime_t`: durations (under ten years) as `sec.usec`, instants as a date. Ceph uses
/// local time; we print UTC, which is what a Ceph daemon on a UTC host prints.
impl fmt::Display for Utime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let usec = self.nsec / 1000;
        if self.sec < 60 * 60 * 24 * 365 * 10 {
            return write!(f, "{}.{usec:06}", self.sec);
        }
        self.write_iso_utc(f)
    }
}

/// Days since 1970-01-01 to (year, month, day), proleptic Gregorian (Howard Hinnant's algorithm).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// `ceph::timespan` / `signedspan` (std::chrono durations): `le32 sec, le32 nsec`, both signed. `ceph::real_time`
/// encodes like [`Utime`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Timespan {
    pub sec: i32,
    pub nsec: i32,
}

impl Timespan {
    /// Ceph truncates to whole seconds plus the nanosecond remainder, in 32 bits each.
    pub fn from_duration(d: std::time::Duration) -> Self {
        Timespan {
            sec: d.as_secs() as i32,
            nsec: d.subsec_nanos() as i32,
        }
    }
    /// `None` for negative spans.
    pub fn to_duration(&self) -> Option<std::time::Duration> {
        let sec = u64::try_from(self.sec).ok()?;
        let nsec = u32::try_from(self.nsec).ok()?;
        Some(std::time::Duration::new(sec, 0) + std::time::Duration::from_nanos(u64::from(nsec)))
    }
}

impl Decode for Timespan {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(Timespan {
            sec: d.i32()?,
            nsec: d.i32()?,
        })
    }
}
impl Encode for Timespan {
    fn encode(&self, e: &mut Encoder) {
        e.i32(self.sec);
        e.i32(self.nsec);
    }
}

/// `uuid_d`: 16 raw bytes in textual (big-endian) order.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Uuid(pub [u8; 16]);

impl Uuid {
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }
}

impl Decode for Uuid {
    fn decode(d: &mut Decoder) -> Result<Self> {
        Ok(Uuid(d.take_array()?))
    }
}
impl Encode for Uuid {
    fn encode(&self, e: &mut Encoder) {
        e.raw(&self.0)
    }
}

impl fmt::Display for Uuid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.0.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                f.write_str("-")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// Parses the canonical `8-4-4-4-12` form (either case).
impl FromStr for Uuid {
    type Err = DecodeError;
    fn from_str(s: &str) -> Result<Self> {
        let bad = || DecodeError::invalid("uuid", format!("not a canonical uuid: {s:?}"));
        let b = s.as_bytes();
        if b.len() != 36 || [8, 13, 18, 23].iter().any(|&i| b.get(i) != Some(&b'-')) {
            return Err(bad());
        }
        let mut out = [0u8; 16];
        let mut hex = b.iter().filter(|c| **c != b'-');
        for o in &mut out {
            let hi = hex
                .next()
                .and_then(|c| (*c as char).to_digit(16))
                .ok_or_else(bad)?;
            let lo = hex
                .next()
                .and_then(|c| (*c as char).to_digit(16))
                .ok_or_else(bad)?;
            *o = (hi * 16 + lo) as u8;
        }
        Ok(Uuid(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utime_layout_and_text() {
        let t = Utime::new(0x0102_0304, 5);
        assert_eq!(&t.to_bytes(0)[..], &[4, 3, 2, 1, 5, 0, 0, 0]);
        assert_eq!(Utime::new(12, 345_678_000).to_string(), "12.345678");
        assert_eq!(
            Utime::new(1_700_000_000, 1000).to_string(),
            "2023-11-14T22:13:20.000001+0000"
        );
    }

    #[test]
    fn iso_utc_dates() {
        for (sec, nsec, want) in [
            (0, 0, "1970-01-01T00:00:00.000000+0000"),
            (12, 345_678_999, "1970-01-01T00:00:12.345678+0000"),
            (951_782_400, 0, "2000-02-29T00:00:00.000000+0000"),
            (951_868_799, 999_999_999, "2000-02-29T23:59:59.999999+0000"),
            (1_796_031_662, 125_614_000, "2026-11-30T09:41:02.125614+0000"),
            (4_107_542_400, 0, "2100-03-01T00:00:00.000000+0000"),
            (u32::MAX, 0, "2106-02-07T06:28:15.000000+0000"),
        ] {
            assert_eq!(Utime::new(sec, nsec).to_iso_utc(), want, "{sec}");
        }
        // Display switches to the date form for instants (ten years and later)
        assert_eq!(
            Utime::new(1_796_031_662, 0).to_string(),
            Utime::new(1_796_031_662, 0).to_iso_utc()
        );
    }

    #[test]
    fn uuid_text_round_trip() {
        let s = "5b1b2c3d-0000-4a5b-8c9d-0123456789ab";
        let u: Uuid = s.parse().unwrap();
        assert_eq!(u.0[0], 0x5b);
        assert_eq!(u.to_string(), s);
        assert!("5b1b2c3d00004a5b8c9d0123456789ab".parse::<Uuid>().is_err());
        assert!("5b1b2c3d-0000-4a5b-8c9d-0123456789ag".parse::<Uuid>().is_err());
    }
}
