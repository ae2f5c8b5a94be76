//! The LogGOPS parameters and the named network profiles.
//!
//! Times are whole nanoseconds, as in the reference simulator, except the
//! per-byte costs G and O, kept in picoseconds per byte so that fast
//! networks (a tenth of a nanosecond per byte for shared memory) are not
//! rounded to nothing. With whole nanoseconds the costs are computed exactly
//! as the reference does (`(s-1)·G` modulo 2^64, even for `s = 0`); with a
//! fraction, `(s-1)·G` is rounded down to whole nanoseconds and a message of
//! 0 bytes costs nothing per byte.
//!
//! The profiles and where their values come from are documented in
//! `docs/simulator.md`; [`Profile::ALL`] lists them.

/// The LogGOPS parameters; the defaults are the reference simulator's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Params {
    /// Latency L of a message through the network, ns.
    pub l: u64,
    /// CPU overhead o per message, paid by sender and receiver, ns.
    pub o: u64,
    /// NIC gap g between messages, ns.
    pub g: u64,
    /// NIC gap G per byte, picoseconds.
    pub big_g_ps: u64,
    /// CPU overhead O per byte, picoseconds.
    pub big_o_ps: u64,
    /// Largest eager message, bytes; larger ones use the rendezvous protocol.
    pub s: u64,
}

impl Default for Params {
    fn default() -> Self {
        Params {
            l: 2500,
            o: 1500,
            g: 1000,
            big_g_ps: 6000,
            big_o_ps: 0,
            s: 65535,
        }
    }
}

/// `bytes_less_one` bytes at `ps` picoseconds per byte, in nanoseconds (see
/// the module docs for the rounding).
#[inline]
pub(crate) fn per_byte(bytes_less_one: u64, ps: u64) -> u64 {
    if ps % 1000 == 0 {
        bytes_less_one.wrapping_mul(ps / 1000)
    } else if bytes_less_one == u64::MAX {
        0
    } else {
        let ns = u128::from(bytes_less_one) * u128::from(ps) / 1000;
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

/// Nanoseconds (possibly fractional) per byte as whole picoseconds; `None`
/// for a negative, non-finite or absurd value.
pub fn ns_to_ps(ns: f64) -> Option<u64> {
    let ps = (ns * 1000.0).round();
    (ns.is_finite() && (0.0..1e15).contains(&ps)).then_some(ps as u64)
}

/// A named network: LogGOPS parameters and, for a torus, its per-hop
/// latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Profile {
    /// The name `--profile` takes.
    pub name: &'static str,
    /// What it models, for `--help` and the JSON output.
    pub about: &'static str,
    /// Its parameters.
    pub params: Params,
    /// Latency per router hop on a torus, ns (`None`: no topology).
    pub hop_latency: Option<u64>,
}

impl Profile {
    /// Every profile (values and sources: `docs/simulator.md`).
    pub const ALL: &'static [Profile] = &[
        Profile {
            name: "shm",
            about: "this machine, MPI backend over Open MPI's shared memory (measured)",
            params: Params {
                l: 110,
                o: 100,
                g: 100,
                big_g_ps: 100,
                big_o_ps: 0,
                s: 4000,
            },
            hop_latency: None,
        },
        Profile {
            name: "tcp-loopback",
            about: "this machine, TCP backend over loopback (measured)",
            params: Params {
                l: 1250,
                o: 1000,
                g: 1000,
                big_g_ps: 130,
                big_o_ps: 0,
                s: 65536,
            },
            hop_latency: None,
        },
        Profile {
            name: "100base-t",
            about: "100 Mb/s switched Ethernet, TCP",
            params: Params {
                l: 40_000,
                o: 10_000,
                g: 10_000,
                big_g_ps: 80_000,
                big_o_ps: 0,
                s: 65536,
            },
            hop_latency: None,
        },
        Profile {
            name: "gige",
            about: "1 Gb/s switched Ethernet, TCP",
            params: Params {
                l: 20_000,
                o: 5_000,
                g: 5_000,
                big_g_ps: 8_000,
                big_o_ps: 0,
                s: 65536,
            },
            hop_latency: None,
        },
        Profile {
            name: "myrinet2000",
            about: "Myrinet-2000 (2 Gb/s links), MPI over GM",
            params: Params {
                l: 5_000,
                o: 1_000,
                g: 1_000,
                big_g_ps: 4_000,
                big_o_ps: 0,
                s: 32768,
            },
            hop_latency: None,
        },
        Profile {
            name: "k-torus",
            about: "a K-computer-like 3-D torus: 3.0 us ejection latency, 4.8 GB/s links",
            params: Params {
                l: 3_000,
                o: 500,
                g: 500,
                big_g_ps: 208,
                big_o_ps: 0,
                s: 16384,
            },
            hop_latency: Some(100),
        },
    ];

    /// The profile called `name`.
    pub fn named(name: &str) -> Option<&'static Profile> {
        Profile::ALL.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_nanoseconds_wrap_as_the_reference_does() {
        assert_eq!(per_byte(7, 6000), 42);
        // A 0-byte message: (0 - 1)·6 modulo 2^64.
        assert_eq!(per_byte(u64::MAX, 6000), 0u64.wrapping_sub(6));
    }

    #[test]
    fn fractions_round_down_and_zero_bytes_cost_nothing() {
        assert_eq!(per_byte(1000, 208), 208);
        assert_eq!(per_byte(9, 150), 1);
        assert_eq!(per_byte(u64::MAX, 208), 0);
        assert_eq!(ns_to_ps(0.208), Some(208));
        assert_eq!(ns_to_ps(-1.0), None);
        assert_eq!(ns_to_ps(f64::NAN), None);
    }

    #[test]
    fn profiles_have_distinct_names() {
        for (i, p) in Profile::ALL.iter().enumerate() {
            assert_eq!(Profile::named(p.name), Some(p));
            assert!(Profile::ALL[..i].iter().all(|q| q.name != p.name));
        }
    }
}
