//! Hosts and placement: which host runs which rank.
//!
//! Hosts are given as a list (`--hosts a,b:2`) or a hostfile: one host a
//! line, `host [slots=K]` (Open MPI's form) or `host:K` (MPICH's form), with
//! `#` starting a comment. `max_slots=` is accepted and ignored, so Open MPI
//! hostfiles can be reused.
//!
//! Placement: each host contributes its slots (one when none is given), in
//! the order the hosts are listed; rank `i` runs on slot `i mod total`. So
//! `a slots=2, b slots=2` places four ranks `a a b b`, and a list without
//! slots is round-robin (`a, b`: `a b a b`). Rank 0 always runs on the first
//! host, which is therefore where the rendezvous listens.
//!
//! A host is *local* (started without a remote shell) when it is named
//! `localhost`, is a loopback address, or is this machine's host name (full or
//! short).

use std::fmt;
use std::net::IpAddr;
use std::path::Path;

use super::error::LaunchError;

/// One host of a job, and how many ranks it takes per round of placement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSlot {
    /// The host name or address.
    pub name: String,
    /// Its number of slots; `None` counts as one.
    pub slots: Option<usize>,
}

impl HostSlot {
    /// A host with the default single slot.
    pub fn new(name: impl Into<String>) -> HostSlot {
        HostSlot {
            name: name.into(),
            slots: None,
        }
    }

    fn slot_count(&self) -> usize {
        self.slots.unwrap_or(1)
    }
}

impl fmt::Display for HostSlot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.slots {
            Some(k) => write!(f, "{}:{k}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// Parses a comma-separated host list such as `a,b:2,c`.
pub fn parse_host_list(list: &str) -> Result<Vec<HostSlot>, LaunchError> {
    let hosts = list
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            parse_host_token(entry).map_err(|reason| LaunchError::HostList {
                entry: entry.to_owned(),
                reason,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    if hosts.is_empty() {
        return Err(LaunchError::HostList {
            entry: list.to_owned(),
            reason: "it names no hosts".into(),
        });
    }
    Ok(hosts)
}

/// Reads and parses a hostfile.
pub fn read_hostfile(path: &Path) -> Result<Vec<HostSlot>, LaunchError> {
    let text = std::fs::read_to_string(path).map_err(|source| LaunchError::HostfileRead {
        path: path.to_owned(),
        source,
    })?;
    let hosts = parse_hostfile(&text).map_err(|(line, reason)| LaunchError::Hostfile {
        path: path.to_owned(),
        line,
        reason,
    })?;
    if hosts.is_empty() {
        return Err(LaunchError::Hostfile {
            path: path.to_owned(),
            line: 0,
            reason: "it names no hosts".into(),
        });
    }
    Ok(hosts)
}

/// Parses hostfile text; an error carries the 1-based line number and why.
pub(crate) fn parse_hostfile(text: &str) -> Result<Vec<HostSlot>, (usize, String)> {
    let mut hosts = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let Some(first) = words.next() else { continue };
        let mut host = parse_host_token(first).map_err(|reason| (index + 1, reason))?;
        for word in words {
            match word.split_once('=') {
                Some(("slots", k)) => {
                    host.slots = Some(parse_slots(k).map_err(|reason| (index + 1, reason))?);
                }
                Some(("max_slots" | "max-slots", _)) => {}
                _ => {
                    return Err((
                        index + 1,
                        format!("`{word}` is not understood (expected `slots=K`)"),
                    ));
                }
            }
        }
        hosts.push(host);
    }
    Ok(hosts)
}

/// Parses `host` or `host:K`. An IPv6 address (several colons) is taken whole.
fn parse_host_token(token: &str) -> Result<HostSlot, String> {
    if let Some((name, k)) = token.rsplit_once(':') {
        if !name.contains(':') {
            if name.is_empty() {
                return Err(format!("`{token}` has no host name"));
            }
            return Ok(HostSlot {
                name: name.to_owned(),
                slots: Some(parse_slots(k)?),
            });
        }
    }
    Ok(HostSlot::new(token))
}

fn parse_slots(k: &str) -> Result<usize, String> {
    match k.parse::<usize>() {
        Ok(0) => Err("a host needs at least one slot".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("`{k}` is not a number of slots")),
    }
}

/// Where each rank runs: `None` for this machine, `Some(host)` for another.
pub(crate) fn place(hosts: &[HostSlot], np: usize, this_host: &str) -> Vec<Option<String>> {
    if hosts.is_empty() {
        return vec![None; np];
    }
    let cycle: Vec<&HostSlot> = hosts
        .iter()
        .flat_map(|h| std::iter::repeat_n(h, h.slot_count()))
        .collect();
    (0..np)
        .map(|rank| {
            let host = cycle[rank % cycle.len()];
            (!is_local(&host.name, this_host)).then(|| host.name.clone())
        })
        .collect()
}

/// Whether `name` names this machine.
pub(crate) fn is_local(name: &str, this_host: &str) -> bool {
    let name = name.trim_start_matches('[').trim_end_matches(']');
    if name.eq_ignore_ascii_case("localhost") {
        return true;
    }
    if let Ok(ip) = name.parse::<IpAddr>() {
        return ip.is_loopback();
    }
    let short = |h: &str| h.split('.').next().unwrap_or(h).to_ascii_lowercase();
    !this_host.is_empty()
        && (name.eq_ignore_ascii_case(this_host)
            || (!name.contains('.') && short(this_host) == name.to_ascii_lowercase()))
}

/// This machine's host name, or an empty string if it has none.
pub(crate) fn this_host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: `buf` is a writable buffer of the length passed; gethostname
    // writes at most that many bytes into it.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return String::new();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(name: &str, slots: Option<usize>) -> HostSlot {
        HostSlot {
            name: name.into(),
            slots,
        }
    }

    #[test]
    fn hostfile_reads_slots_comments_and_both_forms() {
        let text = "# cluster\nnode1 slots=2\n\n  node2   # one slot\nnode3:4\nnode4 slots=1 max_slots=8\n";
        let hosts = parse_hostfile(text).expect("valid hostfile");
        assert_eq!(
            hosts,
            vec![
                h("node1", Some(2)),
                h("node2", None),
                h("node3", Some(4)),
                h("node4", Some(1))
            ]
        );
    }

    #[test]
    fn hostfile_errors_name_the_line() {
        assert_eq!(parse_hostfile("a\nb slots=x\n").unwrap_err().0, 2);
        assert_eq!(parse_hostfile("a slots=0\n").unwrap_err().0, 1);
        let (line, reason) = parse_hostfile("a\n\nb color=red\n").unwrap_err();
        assert_eq!(line, 3);
        assert!(reason.contains("color=red"), "{reason}");
    }

    #[test]
    fn host_list_parses_slots_and_ipv6() {
        let hosts = parse_host_list("a, b:3,,::1,10.0.0.1:2").expect("valid list");
        assert_eq!(
            hosts,
            vec![
                h("a", None),
                h("b", Some(3)),
                h("::1", None),
                h("10.0.0.1", Some(2))
            ]
        );
        assert!(parse_host_list("a,b:zero").is_err());
        assert!(parse_host_list(" , ").is_err());
        assert!(parse_host_list(":2").is_err());
    }

    #[test]
    fn placement_is_round_robin_without_slots() {
        let placed = place(&[h("a", None), h("b", None)], 5, "me");
        let names: Vec<_> = placed.iter().map(|p| p.as_deref().unwrap_or("-")).collect();
        assert_eq!(names, ["a", "b", "a", "b", "a"]);
    }

    #[test]
    fn placement_fills_slots_in_order_then_wraps() {
        let placed = place(&[h("a", Some(2)), h("b", None), h("c", Some(3))], 8, "me");
        let names: Vec<_> = placed.iter().map(|p| p.as_deref().unwrap_or("-")).collect();
        assert_eq!(names, ["a", "a", "b", "c", "c", "c", "a", "a"]);
    }

    #[test]
    fn placement_marks_local_hosts() {
        let placed = place(
            &[
                h("localhost", None),
                h("me.example.org", None),
                h("127.0.0.1", None),
                h("far", None),
            ],
            4,
            "me.example.org",
        );
        assert_eq!(placed, vec![None, None, None, Some("far".to_owned())]);
        assert!(place(&[], 3, "me").iter().all(Option::is_none));
    }

    #[test]
    fn local_names() {
        assert!(is_local("localhost", "vm"));
        assert!(is_local("LOCALHOST", ""));
        assert!(is_local("127.0.0.2", "vm"));
        assert!(is_local("::1", "vm"));
        assert!(is_local("[::1]", "vm"));
        assert!(is_local("vm", "vm.example.org"));
        assert!(is_local("vm.example.org", "vm.example.org"));
        assert!(!is_local("vm2", "vm"));
        assert!(!is_local("vm.other.org", "vm.example.org"));
        assert!(!is_local("10.0.0.1", "vm"));
        assert!(!is_local("anything", ""));
    }
}
