//! `rsh`: a remote shell for `mttlrun` (`MTTL_RSH="mttl-netlab rsh"`) that
//! takes `ssh`'s arguments and "logs in" to a lab host by entering its
//! namespace.
//!
//! Like `ssh HOST CMD...`, the command words are joined with spaces and run
//! by `sh -c`; it runs in a session of its own (`setsid -w`), as a command
//! started by `sshd` would, so signals to the launcher's process group do
//! not reach it: it ends when its standard input does, as the launcher's
//! remote script arranges. `ip netns exec` also puts the host's
//! `/etc/netns/<host>/hosts` over `/etc/hosts`, so lab host names resolve.

use std::os::unix::process::CommandExt as _;
use std::process::Command;

use crate::error::LabError;
use crate::lab;

/// `ssh` options that take a value (`-o X`, `-p 22`, ...).
const WITH_VALUE: &[&str] = &[
    "-o", "-p", "-l", "-i", "-F", "-b", "-c", "-E", "-J", "-L", "-R", "-D", "-m", "-S", "-W", "-w",
    "-O", "-Q", "-e", "-I", "-B",
];

/// Splits `ssh`-style arguments into the host and the command line.
pub fn parse(args: &[String]) -> Result<(String, String), LabError> {
    let mut i = 0;
    while i < args.len() {
        let a = args[i].as_str();
        if a == "--" {
            i += 1;
            break;
        }
        if !a.starts_with('-') || a == "-" {
            break;
        }
        i += if WITH_VALUE.contains(&a) { 2 } else { 1 };
    }
    let host = args.get(i).ok_or_else(|| {
        LabError::Usage(
            "rsh: no host given (usage: mttl-netlab rsh [-o OPTION]... HOST COMMAND...)".into(),
        )
    })?;
    // `user@host`, as ssh accepts.
    let host = host.rsplit('@').next().unwrap_or(host).to_string();
    let command = args[i + 1..].join(" ");
    if command.trim().is_empty() {
        return Err(LabError::Usage(format!(
            "rsh {host}: no command given (an interactive login is not supported)"
        )));
    }
    Ok((host, command))
}

/// Replaces this process with the command, in the host's namespace.
pub fn run(args: &[String]) -> Result<(), LabError> {
    let (host, command) = parse(args)?;
    crate::sys::require_root()?;
    let ns = lab::host_namespace(&host)?;
    let err = Command::new("ip")
        .args(["netns", "exec", &ns, "setsid", "-w", "sh", "-c", &command])
        .exec();
    Err(LabError::Command {
        command: format!("ip netns exec {ns} setsid -w sh -c ..."),
        why: err.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &[&str]) -> Vec<String> {
        s.iter().map(|w| w.to_string()).collect()
    }

    #[test]
    fn takes_what_mttlrun_passes() {
        let (host, cmd) = parse(&words(&[
            "-o",
            "BatchMode=yes",
            "-o",
            "ServerAliveInterval=6",
            "-o",
            "ServerAliveCountMax=5",
            "mttl-h1",
            "exec sh -c 'x'",
        ]))
        .unwrap();
        assert_eq!((host.as_str(), cmd.as_str()), ("mttl-h1", "exec sh -c 'x'"));
    }

    #[test]
    fn joins_command_words_and_skips_flags() {
        let (host, cmd) =
            parse(&words(&["-T", "-p", "22", "root@mttl-h0", "echo", "a b"])).unwrap();
        assert_eq!((host.as_str(), cmd.as_str()), ("mttl-h0", "echo a b"));
    }

    #[test]
    fn says_what_is_missing() {
        assert!(parse(&words(&["-o", "BatchMode=yes"]))
            .unwrap_err()
            .to_string()
            .contains("no host"));
        assert!(parse(&words(&["mttl-h0"]))
            .unwrap_err()
            .to_string()
            .contains("no command"));
    }
}
