//! Link profiles: what one emulated link is (rate, one-way latency, queue,
//! MTU), the named presets and the `RATE,LATENCY` form.
//!
//! The latency here is the link's own share of a message's one-way time: the
//! NIC, the cable and the switch. The hosts' TCP/IP stacks are real (they
//! are this machine's), so their cost comes on top, as it did on the
//! clusters the presets describe.

use std::fmt;
use std::time::Duration;

/// One emulated link, applied to every host's connection to the switch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    /// The name it was given (`100base-t`, or the custom string as typed).
    pub name: String,
    /// Line rate, bits per second, each direction (full duplex).
    pub rate_bps: u64,
    /// One-way latency from host to host, beyond serialization.
    pub latency: Duration,
    /// The switch port's buffer, bytes, per direction (drop-tail).
    pub queue_bytes: u64,
    /// The hosts' MTU.
    pub mtu: u32,
}

/// The named profiles, as `up --profile` spells them.
pub const PRESETS: &[&str] = &["100base-t", "gige", "10gige", "myrinet2000"];

/// Why a profile string was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ProfileError {
    #[error("unknown profile `{0}`: expected one of 100base-t, gige, 10gige, myrinet2000, or RATE,LATENCY such as `100mbit,50us`")]
    Unknown(String),
    #[error("profile `{given}`: the rate `{rate}` does not parse: expected a number with a unit kbit, mbit or gbit (e.g. 100mbit, 2gbit)")]
    BadRate { given: String, rate: String },
    #[error("profile `{given}`: the latency `{latency}` does not parse: expected a number with a unit ns, us or ms (e.g. 50us, 1ms)")]
    BadLatency { given: String, latency: String },
    #[error("profile `{given}`: the rate must be between 1 kbit and 100 gbit")]
    RateOutOfRange { given: String },
    #[error("profile `{given}`: the latency must be at most 1 s")]
    LatencyOutOfRange { given: String },
}

impl Profile {
    /// 100Base-T switched Ethernet, as in the reference paper's cluster
    /// (Pentium II nodes, LAM/MPI over TCP): 100 Mb/s (IEEE 802.3u). Latency
    /// 20 µs one way: a store-and-forward switch of the time holds a minimum
    /// frame for a few µs and its NIC/PHY pair adds about as much again;
    /// LAM's ~60-100 µs half round trips on such clusters were mostly host
    /// software, which here is this machine's own stack. Queue 64 KiB per
    /// port (5 ms at the rate), the order of the era's per-port buffers.
    fn fast_ethernet() -> Profile {
        Profile {
            name: "100base-t".into(),
            rate_bps: 100_000_000,
            latency: Duration::from_micros(20),
            queue_bytes: 64 * 1024,
            mtu: 1500,
        }
    }

    /// Gigabit Ethernet (IEEE 802.3ab): 1 Gb/s; 10 µs one way (a cut-through
    /// or fast store-and-forward switch, ~2-5 µs, plus NIC and PHY); 128 KiB
    /// per port, about 1 ms at the rate, typical of shallow-buffer switches.
    fn gige() -> Profile {
        Profile {
            name: "gige".into(),
            rate_bps: 1_000_000_000,
            latency: Duration::from_micros(10),
            queue_bytes: 128 * 1024,
            mtu: 1500,
        }
    }

    /// 10 Gigabit Ethernet (IEEE 802.3ae): 10 Gb/s; 5 µs one way (switch
    /// ~1 µs, NICs the rest); 1.25 MB per port (1 ms); MTU 9000, as clusters
    /// run it with jumbo frames.
    fn ten_gige() -> Profile {
        Profile {
            name: "10gige".into(),
            rate_bps: 10_000_000_000,
            latency: Duration::from_micros(5),
            queue_bytes: 1_250_000,
            mtu: 9000,
        }
    }

    /// Myrinet-2000 (Myricom, ANSI/VITA 26-1998): 2 Gb/s each way; 3 µs one
    /// way (Myricom quotes ~0.5 µs per crossbar switch and ~7 µs for GM's
    /// host-to-host latency, most of it host and NIC firmware; we keep the
    /// NIC and switch part). Myrinet does not drop: links stop the sender by
    /// backpressure, emulated here by a deep queue (2 ms at the rate, 500 KB)
    /// that TCP's window never fills. MTU 9000, as its Ethernet emulation ran.
    fn myrinet2000() -> Profile {
        Profile {
            name: "myrinet2000".into(),
            rate_bps: 2_000_000_000,
            latency: Duration::from_micros(3),
            queue_bytes: 500_000,
            mtu: 9000,
        }
    }

    /// A preset by name, or `RATE,LATENCY` (queue: 1 ms at the rate, at
    /// least 64 KiB; MTU 1500).
    pub fn parse(given: &str) -> Result<Profile, ProfileError> {
        match given.trim().to_ascii_lowercase().as_str() {
            "100base-t" | "100baset" => return Ok(Self::fast_ethernet()),
            "gige" => return Ok(Self::gige()),
            "10gige" => return Ok(Self::ten_gige()),
            "myrinet2000" | "myrinet-2000" => return Ok(Self::myrinet2000()),
            _ => {}
        }
        let Some((rate, latency)) = given.split_once(',') else {
            return Err(ProfileError::Unknown(given.into()));
        };
        let rate_bps = parse_rate(rate.trim()).ok_or_else(|| ProfileError::BadRate {
            given: given.into(),
            rate: rate.trim().into(),
        })?;
        if !(1_000..=100_000_000_000).contains(&rate_bps) {
            return Err(ProfileError::RateOutOfRange {
                given: given.into(),
            });
        }
        let latency = parse_latency(latency.trim()).ok_or_else(|| ProfileError::BadLatency {
            given: given.into(),
            latency: latency.trim().into(),
        })?;
        if latency > Duration::from_secs(1) {
            return Err(ProfileError::LatencyOutOfRange {
                given: given.into(),
            });
        }
        Ok(Profile {
            name: given.trim().into(),
            rate_bps,
            latency,
            queue_bytes: (rate_bps / 8 / 1000).max(64 * 1024),
            mtu: 1500,
        })
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} ({} Mb/s, {} µs one way, {} KiB queue per port, MTU {})",
            self.name,
            self.rate_bps as f64 / 1e6,
            self.latency.as_secs_f64() * 1e6,
            self.queue_bytes / 1024,
            self.mtu
        )
    }
}

/// Splits `12.5mbit` into 12.5 and `mbit`.
fn number_and_unit(text: &str) -> Option<(f64, String)> {
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value > 0.0).then(|| (value, unit.to_ascii_lowercase()))
}

fn parse_rate(text: &str) -> Option<u64> {
    let (value, unit) = number_and_unit(text)?;
    let scale = match unit.as_str() {
        "kbit" | "kb/s" | "kbps" => 1e3,
        "mbit" | "mb/s" | "mbps" => 1e6,
        "gbit" | "gb/s" | "gbps" => 1e9,
        _ => return None,
    };
    Some((value * scale).round() as u64)
}

fn parse_latency(text: &str) -> Option<Duration> {
    let (value, unit) = number_and_unit(text)?;
    let scale = match unit.as_str() {
        "ns" => 1e-9,
        "us" | "µs" => 1e-6,
        "ms" => 1e-3,
        _ => return None,
    };
    Some(Duration::from_secs_f64(value * scale))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_parse_by_name_in_any_case() {
        let p = Profile::parse("100Base-T").unwrap();
        assert_eq!(p.rate_bps, 100_000_000);
        assert_eq!(p.latency, Duration::from_micros(20));
        assert_eq!(
            Profile::parse("myrinet2000").unwrap().rate_bps,
            2_000_000_000
        );
        assert_eq!(Profile::parse("gige").unwrap().rate_bps, 1_000_000_000);
        assert_eq!(Profile::parse("10gige").unwrap().mtu, 9000);
        for name in PRESETS {
            assert_eq!(Profile::parse(name).unwrap().name, *name);
        }
    }

    #[test]
    fn rate_and_latency_parse_with_units() {
        let p = Profile::parse("250mbit,40us").unwrap();
        assert_eq!(p.rate_bps, 250_000_000);
        assert_eq!(p.latency, Duration::from_micros(40));
        assert_eq!(p.queue_bytes, 64 * 1024);
        let p = Profile::parse("1.5gbit, 2ms").unwrap();
        assert_eq!(p.rate_bps, 1_500_000_000);
        assert_eq!(p.latency, Duration::from_millis(2));
        assert_eq!(p.queue_bytes, 187_500);
    }

    #[test]
    fn bad_profiles_say_what_is_wrong() {
        assert!(matches!(
            Profile::parse("token-ring"),
            Err(ProfileError::Unknown(_))
        ));
        let e = Profile::parse("100,50us").unwrap_err();
        assert!(matches!(e, ProfileError::BadRate { ref rate, .. } if rate == "100"));
        assert!(e.to_string().contains("kbit, mbit or gbit"));
        let e = Profile::parse("100mbit,fast").unwrap_err();
        assert!(matches!(e, ProfileError::BadLatency { ref latency, .. } if latency == "fast"));
        assert!(matches!(
            Profile::parse("0mbit,5us"),
            Err(ProfileError::BadRate { .. })
        ));
        assert!(matches!(
            Profile::parse("200gbit,5us"),
            Err(ProfileError::RateOutOfRange { .. })
        ));
        assert!(matches!(
            Profile::parse("1gbit,2s"),
            Err(ProfileError::BadLatency { .. })
        ));
        assert!(matches!(
            Profile::parse("1gbit,2000ms"),
            Err(ProfileError::LatencyOutOfRange { .. })
        ));
    }
}
