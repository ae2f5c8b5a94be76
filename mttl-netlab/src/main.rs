//! The `mttl-netlab` command: see the library's documentation.

/// The command; Linux only (network namespaces, veth, `tc`).
#[cfg(target_os = "linux")]
mod linux {

    use clap::{Parser, Subcommand};
    use mttl_netlab::lab::WireChoice;
    use mttl_netlab::{check, lab, rsh, wire, LabError, Profile};

    /// One Linux machine as a small cluster: network namespaces joined by
    /// emulated links. Needs root.
    #[derive(Debug, Parser)]
    #[command(name = "mttl-netlab", version)]
    struct Cli {
        #[command(subcommand)]
        command: Cmd,
    }

    #[derive(Debug, Subcommand)]
    enum Cmd {
        /// Make N hosts (mttl-h0.., 10.231.0.1..) joined by links of a profile.
        Up {
            /// How many hosts (2 to 200).
            #[arg(long)]
            hosts: usize,
            /// 100base-t, gige, 10gige, myrinet2000, or RATE,LATENCY (e.g. 100mbit,50us).
            #[arg(long)]
            profile: String,
            /// What carries the frames: kernel netem if present (auto), or always
            /// the user-space wire, or netem or fail.
            #[arg(long, value_enum, default_value = "auto")]
            wire: WireChoice,
        },
        /// Remove everything the lab made (also after a crash).
        Down,
        /// Show the hosts, the profile and the wire.
        Status,
        /// Run a command in a host: exec HOST -- CMD...
        Exec {
            host: String,
            #[arg(last = true, required = true)]
            command: Vec<String>,
        },
        /// A remote shell for mttlrun (MTTL_RSH="mttl-netlab rsh"): ssh's
        /// arguments, [-o OPTION]... HOST COMMAND...
        Rsh {
            #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
            args: Vec<String>,
        },
        /// Measure the user-space wire's own latency again (as `up` does) and
        /// take it out of the latency it applies.
        Calibrate,
        /// Measure round trip and bandwidth between two hosts against the profile.
        Check {
            #[arg(long, default_value = "mttl-h0")]
            from: String,
            #[arg(long, default_value = "mttl-h1")]
            to: String,
            /// Seconds of bulk transfer.
            #[arg(long, default_value_t = 3.0)]
            seconds: f64,
        },
        /// The user-space wire process (started by `up`).
        #[command(hide = true)]
        Wire,
    }

    fn run(cli: Cli) -> Result<bool, LabError> {
        match cli.command {
            Cmd::Up {
                hosts,
                profile,
                wire,
            } => lab::up(hosts, &Profile::parse(&profile)?, wire).map(|()| true),
            Cmd::Down => lab::down().map(|()| true),
            Cmd::Status => lab::status().map(|()| true),
            Cmd::Exec { host, command } => lab::exec(&host, &command).map(|()| true),
            Cmd::Calibrate => lab::recalibrate().map(|()| true),
            Cmd::Rsh { args } => rsh::run(&args).map(|()| true),
            Cmd::Check { from, to, seconds } => {
                if !(seconds > 0.0 && seconds <= 600.0) {
                    return Err(LabError::Usage(format!(
                        "check --seconds {seconds}: give more than 0 and at most 600"
                    )));
                }
                check::check(&from, &to, seconds)
            }
            Cmd::Wire => wire::run().map(|()| true),
        }
    }

    pub(crate) fn main() {
        match run(Cli::parse()) {
            Ok(true) => {}
            Ok(false) => {
                eprintln!(
                    "mttl-netlab: check failed: the lab is not faithful to its profile (see above)"
                );
                std::process::exit(1);
            }
            Err(e) => {
                eprintln!("mttl-netlab: {e}");
                // As ssh does for its own failures, so mttlrun tells them apart.
                let code = if std::env::args().nth(1).as_deref() == Some("rsh") {
                    255
                } else {
                    2
                };
                std::process::exit(code);
            }
        }
    }
}

fn main() {
    #[cfg(target_os = "linux")]
    linux::main();
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("mttl-netlab: needs Linux (network namespaces, veth pairs, tc)");
        std::process::exit(2);
    }
}
