//! TCP jobs: one process per rank, started here or through `ssh`.
//!
//! This file builds each rank's command and environment (the variables of
//! [`crate::env`]), the rendezvous address, and the remote wrapper script;
//! [`super::job`] starts and watches the processes. The remote protocol is
//! described in the [module docs](super).

use std::ffi::{OsStr, OsString};
use std::net::{Ipv4Addr, TcpListener};
use std::os::fd::AsRawFd;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use super::error::LaunchError;
use super::hosts::{self, HostSlot};
use super::job::{Input, Job, Who};
use super::{rank0_input, resolve_program, JobOutcome, JobSpec};
use crate::backend::tcp::files;
use crate::env;

/// The script a remote rank runs under `sh -c SCRIPT CWD env VARS PROGRAM ARGS`
/// (`$0` is the working directory, `"$@"` the command), one statement per
/// entry, joined into one line by [`remote_script`]. Steps 1 to 5 of the remote protocol
/// in the module docs.
const REMOTE_SCRIPT: &[&str] = &[
    r#"IFS= read -r MTTL_SECRET || exit 125"#,
    r#"export MTTL_SECRET"#,
    r#"cd -- "$0" || exit 126"#,
    r#"exec 3<&0"#,
    r#"if command -v setsid >/dev/null 2>&1; then setsid "$@" 0</dev/null 3<&- & else "$@" 0</dev/null 3<&- & fi"#,
    r#"rank=$!"#,
    r#"stop() { kill -"$1" -"$rank" 2>/dev/null || kill -"$1" "$rank" 2>/dev/null; }"#,
    r#"( while read -r _; do :; done; stop TERM; sleep 2; stop KILL ) 0<&3 1>/dev/null 2>&1 &"#,
    r#"watcher=$!"#,
    r#"exec 3<&-"#,
    r#"trap 'stop TERM' HUP INT TERM"#,
    r#"while :; do wait "$rank"; status=$?; kill -0 "$rank" 2>/dev/null || break; done"#,
    r#"kill "$watcher" 2>/dev/null"#,
    r#"kill -KILL -"$rank" 2>/dev/null"#,
    r#"exit "$status""#,
];

/// Launcher variables never passed to a rank.
const LAUNCHER_ONLY: &[&str] = &[
    env::NP,
    env::TAG_OUTPUT,
    env::MPIRUN,
    env::RSH,
    env::ROOT_PORT,
];

/// Descriptors `mttlrun` holds per rank: at most a pipe for each of its
/// standard streams.
const LAUNCHER_FILES_PER_RANK: u64 = 3;

/// Descriptors `mttlrun` holds besides those of its ranks.
const LAUNCHER_FILES_BESIDES: u64 = 32;

/// Checks, before any rank starts, that a job of `np` ranks, `local` of
/// them on this host, can open the files it needs: each rank up to one
/// link per other rank ([`files::needed`]; a rank raises its own soft limit
/// up to the hard one it inherits from here, so the hard limit is what
/// counts), `mttlrun` a pipe per standard stream of each rank (raising its
/// own soft limit likewise), and all of them together within what the
/// kernel has left (`fs.file-max`). A job that cannot fails here, naming
/// the limit, the need and the fix, rather than in the middle of making its
/// links.
fn check_open_files(np: usize, local: usize) -> Result<(), LaunchError> {
    let per_rank = files::needed(np);
    let launcher = LAUNCHER_FILES_PER_RANK * np as u64 + LAUNCHER_FILES_BESIDES;
    let too_few = |whom, need, limit: String| LaunchError::OpenFiles {
        np,
        whom,
        need,
        limit,
        fix: format!(
            "raise it (`ulimit -n {need}` in the shell that runs mttlrun, or `nofile` in \
             /etc/security/limits.conf) or run fewer ranks"
        ),
    };
    if let Some(lim) = files::limit() {
        if local > 0 && lim.hard < per_rank {
            return Err(too_few(
                "per rank",
                per_rank,
                format!(
                    "a rank started here may open at most {} (`ulimit -Hn`; `ulimit -n` is {})",
                    lim.hard, lim.soft
                ),
            ));
        }
    }
    files::raise_to(launcher).map_err(|lim| {
        too_few(
            "for mttlrun itself",
            launcher,
            format!(
                "it may open only {} (`ulimit -n`; hard limit {})",
                lim.soft, lim.hard
            ),
        )
    })?;
    let host = local as u64 * per_rank + launcher;
    if let Some(free) = system_files_left() {
        if free < host {
            return Err(LaunchError::OpenFiles {
                np,
                whom: "on this host in all",
                need: host,
                limit: format!("the kernel has only {free} left (fs.file-max less those open)"),
                fix: "raise fs.file-max (`sysctl fs.file-max=...`), or place ranks on more \
                      hosts (--hosts)"
                    .into(),
            });
        }
    }
    Ok(())
}

/// How many more files the kernel lets all processes open
/// (`/proc/sys/fs/file-nr`: allocated, unused, maximum), if it says.
fn system_files_left() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/sys/fs/file-nr").ok()?;
    let mut fields = text.split_whitespace().map(|f| f.parse::<u64>().ok());
    let (allocated, _, max) = (fields.next()??, fields.next()??, fields.next()??);
    Some(max.saturating_sub(allocated))
}

/// Runs a TCP job (see [`super::run`]).
pub(super) fn run(spec: &JobSpec) -> Result<JobOutcome, LaunchError> {
    let this_host = hosts::this_host_name();
    let placement = hosts::place(&spec.hosts, spec.np, &this_host);
    let program = if placement.iter().any(Option::is_none) {
        resolve_program(&spec.program)?
    } else {
        spec.program.clone()
    };
    check_open_files(spec.np, placement.iter().filter(|h| h.is_none()).count())?;
    let secret = hex::encode(env::new_secret().map_err(|source| LaunchError::System {
        what: "make a secret for the job",
        source,
    })?);
    let Rendezvous {
        root,
        bind,
        mut listener,
    } = rendezvous(&placement, &spec.hosts, &this_host)?;
    let cwd = std::env::current_dir().map_err(|source| LaunchError::System {
        what: "find the current directory",
        source,
    })?;
    let (rsh, rsh_options) = remote_shell();
    let alive_options = ssh_alive_options(link_timeout()?);

    let mut job = Job::new(spec.grace)?;
    for (rank, host) in placement.iter().enumerate() {
        let mut vars: Vec<(OsString, OsString)> = vec![
            (env::BACKEND.into(), "tcp".into()),
            (env::RANK.into(), rank.to_string().into()),
            (env::SIZE.into(), spec.np.to_string().into()),
            (env::ROOT.into(), root.clone().into()),
            (env::BIND.into(), bind.into()),
        ];
        vars.extend(spec.extra_env.iter().map(|(k, v)| (k.into(), v.into())));
        let who = Who::Rank {
            rank,
            host: host.clone(),
        };
        let (command, input) = match host {
            None => {
                let mut command = Command::new(&program);
                command.arg0(&spec.program).args(&spec.args);
                for name in LAUNCHER_ONLY {
                    command.env_remove(name);
                }
                command.envs(vars).env(env::SECRET, &secret);
                if rank == 0 {
                    if let Some(listener) = &listener {
                        pass_listener(&mut command, listener);
                    }
                }
                (
                    command,
                    if rank == 0 {
                        rank0_input()
                    } else {
                        Input::Null
                    },
                )
            }
            Some(host) => {
                let mut forwarded = forwarded_vars(std::env::vars_os());
                forwarded.extend(vars);
                let remote = remote_command(&cwd, &forwarded, spec.program.as_os_str(), &spec.args);
                let mut command = Command::new(&rsh);
                command
                    .args(&rsh_options)
                    .args(["-o", "BatchMode=yes"])
                    .args(&alive_options)
                    .arg(host)
                    .arg(remote);
                (command, Input::Lifeline(format!("{secret}\n").into_bytes()))
            }
        };
        if let Err(e) = job.start(who, command, input, spec.tag_output) {
            job.abort();
            return Err(e);
        }
        if rank == 0 {
            // Rank 0 holds it now (started first, before the job is
            // supervised).
            listener = None;
        }
    }
    job.supervise()
}

/// Makes `command` (rank 0) inherit `listener` open, named by
/// `MTTL_ROOT_FD`.
fn pass_listener(command: &mut Command, listener: &TcpListener) {
    let fd = listener.as_raw_fd();
    command.env(env::ROOT_FD, fd.to_string());
    // SAFETY: the closure runs in the forked child before exec, where only
    // async-signal-safe calls are allowed: fcntl is a system call, and the
    // closure allocates nothing and takes no lock. It clears close-on-exec
    // on a descriptor the child inherited from this process, open as long
    // as `listener` (the spawn happens while it is borrowed).
    unsafe {
        command.pre_exec(move || {
            if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The rendezvous of a job: `MTTL_ROOT`, `MTTL_BIND`, and when rank 0 runs
/// on this machine, the listener the launcher bound for it on `MTTL_ROOT`'s
/// port (see [`Rendezvous::listener`]).
#[derive(Debug)]
struct Rendezvous {
    root: String,
    bind: &'static str,
    /// Bound here, on a port the kernel picked, and handed to rank 0 open
    /// (`MTTL_ROOT_FD`): a port found free and released for rank 0 to bind
    /// again could be taken meanwhile, by another job's launcher even, whose
    /// ranks would then meet this job's rank 0 (and be refused).
    listener: Option<TcpListener>,
}

/// The rendezvous for a job placed as `placement`.
fn rendezvous(
    placement: &[Option<String>],
    hosts: &[HostSlot],
    this_host: &str,
) -> Result<Rendezvous, LaunchError> {
    let listen = |ip: Ipv4Addr| {
        TcpListener::bind((ip, 0))
            .and_then(|listener| Ok((listener.local_addr()?.port(), listener)))
            .map_err(|source| LaunchError::System {
                what: "listen for the rendezvous",
                source,
            })
    };
    let spans_hosts = placement.iter().any(Option::is_some);
    let first = match (spans_hosts, placement.first(), hosts.first()) {
        (true, Some(Some(remote)), _) => remote.clone(),
        (true, Some(None), Some(first)) if !hosts::is_local(&first.name, "") => first.name.clone(),
        (true, _, _) if !this_host.is_empty() => this_host.to_owned(),
        (true, _, _) => {
            return Err(LaunchError::System {
                what: "find this machine's host name, which the remote ranks need to reach rank 0",
                source: std::io::Error::other("gethostname failed"),
            })
        }
        (false, _, _) => {
            let (port, listener) = listen(Ipv4Addr::LOCALHOST)?;
            return Ok(Rendezvous {
                root: format!("127.0.0.1:{port}"),
                bind: "loopback",
                listener: Some(listener),
            });
        }
    };
    let mut listener = None;
    let port = match std::env::var(env::ROOT_PORT).ok().filter(|v| !v.is_empty()) {
        Some(value) => match value.trim().parse::<u16>() {
            Ok(port) if port > 0 => port,
            _ => {
                return Err(LaunchError::BadEnv {
                    var: env::ROOT_PORT,
                    value,
                    expected: "a port number from 1 to 65535",
                })
            }
        },
        None if placement.first().is_some_and(Option::is_none) => {
            let (port, bound) = listen(Ipv4Addr::UNSPECIFIED)?;
            listener = Some(bound);
            port
        }
        None => {
            let mut bytes = [0u8; 2];
            getrandom::getrandom(&mut bytes).map_err(|e| LaunchError::System {
                what: "pick a random port for the rendezvous",
                source: std::io::Error::other(e),
            })?;
            20000 + u16::from_le_bytes(bytes) % 10000
        }
    };
    let root = if first.contains(':') {
        format!("[{first}]:{port}")
    } else {
        format!("{first}:{port}")
    };
    Ok(Rendezvous {
        root,
        bind: "any",
        listener,
    })
}

/// `MTTL_LINK_TIMEOUT`, which the ranks read too: checked here first, so
/// that a bad value stops the launch rather than every rank.
fn link_timeout() -> Result<Duration, LaunchError> {
    env::link_timeout().map_err(|_| LaunchError::BadEnv {
        var: env::LINK_TIMEOUT,
        value: std::env::var(env::LINK_TIMEOUT).unwrap_or_default(),
        expected: "whole seconds, at least 5",
    })
}

/// The options that make `ssh` check that a remote host still answers (a
/// message through its connection every fifth of `limit`, the connection
/// given up after five unanswered), so that a host that vanishes ends its
/// rank's `ssh` within `limit` (`MTTL_LINK_TIMEOUT`), and with it the job,
/// even while no other rank waits for that host.
fn ssh_alive_options(limit: Duration) -> [String; 4] {
    let interval = (limit.as_secs() / 5).max(1);
    [
        "-o".into(),
        format!("ServerAliveInterval={interval}"),
        "-o".into(),
        "ServerAliveCountMax=5".into(),
    ]
}

/// The remote shell and its options: `MTTL_RSH` split on whitespace, or `ssh`.
fn remote_shell() -> (OsString, Vec<OsString>) {
    let value = std::env::var_os(env::RSH).unwrap_or_default();
    let mut words = value
        .as_bytes()
        .split(u8::is_ascii_whitespace)
        .filter(|w| !w.is_empty())
        .map(|w| OsStr::from_bytes(w).to_owned());
    match words.next() {
        Some(program) => (program, words.collect()),
        None => (OsString::from("ssh"), Vec::new()),
    }
}

/// The launcher's variables a remote rank gets too: `MTTL_*` tuning knobs
/// (not the per-job or launcher-only ones), `RUST_LOG`, `RUST_BACKTRACE`.
pub(super) fn forwarded_vars(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> Vec<(OsString, OsString)> {
    let per_job = [
        env::BACKEND,
        env::RANK,
        env::SIZE,
        env::ROOT,
        env::SECRET,
        env::BIND,
    ];
    vars.filter(|(name, _)| {
        let Some(name) = name.to_str() else {
            return false;
        };
        let wanted = name.starts_with("MTTL_") || name == "RUST_LOG" || name == "RUST_BACKTRACE";
        wanted && !per_job.contains(&name) && !LAUNCHER_ONLY.contains(&name)
    })
    .collect()
}

/// [`REMOTE_SCRIPT`] as one line: statements are separated by `; `, except
/// after a background `&`, which already ends one.
fn remote_script() -> String {
    let mut script = String::new();
    for statement in REMOTE_SCRIPT {
        if !script.is_empty() {
            script.push_str(if script.ends_with('&') { " " } else { "; " });
        }
        script.push_str(statement);
    }
    script
}

/// The command line a remote shell runs for one rank.
fn remote_command(
    cwd: &Path,
    vars: &[(OsString, OsString)],
    program: &OsStr,
    args: &[OsString],
) -> OsString {
    let mut line = b"exec sh -c ".to_vec();
    push_quoted(&mut line, remote_script().as_bytes());
    line.push(b' ');
    push_quoted(&mut line, cwd.as_os_str().as_bytes());
    line.extend_from_slice(b" env");
    for (name, value) in vars {
        let mut assignment = name.as_bytes().to_vec();
        assignment.push(b'=');
        assignment.extend_from_slice(value.as_bytes());
        line.push(b' ');
        push_quoted(&mut line, &assignment);
    }
    for word in std::iter::once(program).chain(args.iter().map(OsString::as_os_str)) {
        line.push(b' ');
        push_quoted(&mut line, word.as_bytes());
    }
    OsString::from_vec(line)
}

/// Appends `word` in POSIX single quotes (a `'` becomes `'\''`).
fn push_quoted(line: &mut Vec<u8>, word: &[u8]) {
    line.push(b'\'');
    for &byte in word {
        if byte == b'\'' {
            line.extend_from_slice(b"'\\''");
        } else {
            line.push(byte);
        }
    }
    line.push(b'\'');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ssh_checks_the_host_within_the_link_timeout() {
        for (limit, interval) in [(25, "5"), (5, "1"), (7, "1"), (60, "12")] {
            let options = ssh_alive_options(Duration::from_secs(limit));
            assert_eq!(
                options,
                [
                    "-o",
                    &format!("ServerAliveInterval={interval}"),
                    "-o",
                    "ServerAliveCountMax=5"
                ]
            );
        }
    }
    use std::process::Stdio;

    fn sh_words(line: &[u8]) -> Vec<u8> {
        let output = Command::new("sh")
            .arg("-c")
            .arg(OsStr::from_bytes(line))
            .stderr(Stdio::inherit())
            .output()
            .expect("sh runs");
        output.stdout
    }

    #[test]
    fn quoting_survives_the_shell() {
        let tricky: [&[u8]; 6] = [
            b"plain",
            b"two words",
            b"it's",
            b"'",
            b"$HOME `x` \"q\" \\ ; | & *",
            b"\xff\xfe bytes",
        ];
        let mut line = b"printf '%s\\n'".to_vec();
        for word in tricky {
            line.push(b' ');
            push_quoted(&mut line, word);
        }
        let mut expected = Vec::new();
        for word in tricky {
            expected.extend_from_slice(word);
            expected.push(b'\n');
        }
        assert_eq!(sh_words(&line), expected);
    }

    /// Runs a remote command line as a remote login shell would (`sh -c`,
    /// one string, as ssh passes it), writes `input` to its stdin and keeps
    /// stdin open until it exits unless `close_stdin`.
    fn run_remote(line: &OsStr, input: &[u8], close_stdin: bool) -> (Option<i32>, String) {
        use std::io::{Read, Write};
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(line)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut stdin = child.stdin.take();
        if let Some(pipe) = stdin.as_mut() {
            pipe.write_all(input).expect("write to the wrapper");
        }
        if close_stdin {
            stdin = None;
        }
        let mut text = String::new();
        if let Some(mut out) = child.stdout.take() {
            out.read_to_string(&mut text).expect("read the output");
        }
        let status = child.wait().expect("sh finishes");
        drop(stdin);
        (status.code(), text)
    }

    #[test]
    fn remote_command_runs_in_cwd_with_env_and_secret_from_stdin() {
        let cwd = std::env::temp_dir();
        let vars = vec![
            (OsString::from("MTTL_RANK"), OsString::from("3")),
            (OsString::from("X"), OsString::from("a 'b'")),
        ];
        let args = [
            OsString::from("-c"),
            OsString::from(
                r#"printf '%s|%s|%s|%s|%s\n' "$PWD" "$MTTL_RANK" "$X" "$MTTL_SECRET" "$1""#,
            ),
            OsString::from("sh"),
            OsString::from("it's"),
        ];
        let line = remote_command(&cwd, &vars, OsStr::new("sh"), &args);
        let (code, text) = run_remote(&line, b"c0ffee\n", false);
        assert_eq!(code, Some(0));
        assert_eq!(text, format!("{}|3|a 'b'|c0ffee|it's\n", cwd.display()));
        assert!(!String::from_utf8_lossy(line.as_bytes()).contains("c0ffee"));
    }

    #[test]
    fn remote_exit_status_is_passed_back() {
        let exit7 = [OsString::from("-c"), OsString::from("exit 7")];
        let line = remote_command(Path::new("/"), &[], OsStr::new("sh"), &exit7);
        assert_eq!(run_remote(&line, b"00\n", false).0, Some(7));
        // No secret line: the wrapper gives up before starting the rank.
        assert_eq!(run_remote(&line, b"", true).0, Some(125));
        let line = remote_command(Path::new("/no/such/dir"), &[], OsStr::new("sh"), &exit7);
        assert_eq!(run_remote(&line, b"00\n", false).0, Some(126));
    }

    /// Whether `pid` is gone within 2 s: a SIGKILL is delivered
    /// asynchronously, so a process killed a moment ago may still show.
    fn gone_soon(pid: &str) -> bool {
        let start = std::time::Instant::now();
        while start.elapsed() < std::time::Duration::from_secs(2) {
            if gone(pid) {
                return true;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        gone(pid)
    }

    fn gone(pid: &str) -> bool {
        match std::fs::read_to_string(format!("/proc/{}/stat", pid.trim())) {
            Err(_) => true,
            Ok(stat) => stat
                .rsplit_once(") ")
                .is_some_and(|(_, rest)| rest.starts_with('Z')),
        }
    }

    #[test]
    fn closing_the_lifeline_stops_the_remote_rank_and_its_children() {
        use std::io::{BufRead, BufReader, Read, Write};
        let sleeper = [
            OsString::from("-c"),
            OsString::from("sleep 30 & echo $!; wait"),
        ];
        let line = remote_command(Path::new("/"), &[], OsStr::new("sh"), &sleeper);
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(&line)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("sh runs");
        let mut stdin = child.stdin.take().expect("piped");
        stdin.write_all(b"00\n").expect("write the secret");
        let mut out = BufReader::new(child.stdout.take().expect("piped"));
        let mut pid = String::new();
        out.read_line(&mut pid).expect("the rank started its child");
        let start = std::time::Instant::now();
        drop(stdin);
        // The output ends only when the sleep, which holds it, is gone.
        let mut rest = String::new();
        out.read_to_string(&mut rest).expect("read to the end");
        let status = child.wait().expect("sh finishes");
        assert_eq!(status.code(), Some(128 + libc::SIGTERM));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(gone_soon(&pid), "{pid:?}");
    }

    #[test]
    fn what_a_remote_rank_leaves_behind_is_killed() {
        let leaver = [OsString::from("-c"), OsString::from("sleep 30 & echo $!")];
        let line = remote_command(Path::new("/"), &[], OsStr::new("sh"), &leaver);
        let start = std::time::Instant::now();
        let (code, text) = run_remote(&line, b"00\n", false);
        assert_eq!(code, Some(0));
        assert!(
            start.elapsed() < std::time::Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
        assert!(!text.is_empty() && gone_soon(&text), "{text:?}");
    }

    #[test]
    fn forwarded_vars_keep_knobs_and_drop_job_and_launcher_vars() {
        let vars = [
            ("MTTL_SPIN_US", "10"),
            ("MTTL_RANK", "1"),
            ("MTTL_SECRET", "ab"),
            ("MTTL_NP", "4"),
            ("MTTL_RSH", "ssh"),
            ("RUST_LOG", "debug"),
            ("HOME", "/root"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<_> = forwarded_vars(vars.into_iter())
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(kept, ["MTTL_SPIN_US", "RUST_LOG"]);
    }

    #[test]
    fn rendezvous_is_loopback_for_local_jobs() {
        let Rendezvous {
            root,
            bind,
            listener,
        } = rendezvous(&[None, None], &[], "vm").expect("local");
        assert_eq!(bind, "loopback");
        let port: u16 = root
            .strip_prefix("127.0.0.1:")
            .expect("loopback root")
            .parse()
            .expect("port");
        assert!(port > 0);
        let held = listener.expect("a listener held for rank 0");
        assert_eq!(held.local_addr().expect("bound").port(), port);
    }

    #[test]
    fn rendezvous_names_the_first_host_when_spanning_hosts() {
        let hosts = [HostSlot::new("far"), HostSlot::new("vm")];
        let remote = rendezvous(&[Some("far".into()), None], &hosts, "vm").expect("remote");
        let (root, bind) = (remote.root, remote.bind);
        assert_eq!(bind, "any");
        assert!(remote.listener.is_none(), "rank 0 is remote");
        let port: u16 = root
            .strip_prefix("far:")
            .expect("first host")
            .parse()
            .expect("port");
        assert!((20000..30000).contains(&port), "{port}");

        let hosts = [HostSlot::new("localhost"), HostSlot::new("far")];
        let mixed =
            rendezvous(&[None, Some("far".into())], &hosts, "vm.example.org").expect("mixed");
        assert!(mixed.root.starts_with("vm.example.org:"), "{}", mixed.root);
        assert!(mixed.listener.is_some(), "rank 0 runs here");

        let hosts = [HostSlot::new("::2"), HostSlot::new("far")];
        let ipv6 =
            rendezvous(&[Some("::2".into()), Some("far".into())], &hosts, "vm").expect("ipv6");
        assert!(ipv6.root.starts_with("[::2]:"), "{}", ipv6.root);
    }
}
