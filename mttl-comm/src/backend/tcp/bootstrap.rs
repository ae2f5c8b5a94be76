//! Bootstrap: from a launch environment to a fully connected, authenticated
//! mesh, then a guard on the listening port for the rest of the job.
//!
//! It runs on one background thread with a small tokio runtime (async I/O
//! lets a rank accept and connect at the same time, each handshake under its
//! own timeout). The steps:
//!
//! 1. Every rank binds a listener: rank 0 on `MTTL_ROOT`, the others on an
//!    ephemeral port (loopback, or every interface with `MTTL_BIND=any`).
//! 2. Every rank `i > 0` connects to rank 0 (retrying until the deadline: rank
//!    0 may start later), authenticates ([`auth`]) and sends its
//!    listening port. Rank 0 learns `i`'s address from the connection itself.
//! 3. When all `size − 1` ranks have checked in, rank 0 sends each the table
//!    of every rank's address. The rendezvous connection stays as the mesh
//!    link between rank 0 and `i`.
//! 4. Rank `i` connects to every rank `0 < j < i` and authenticates; it
//!    accepts from every rank `k > i`. Each rank knows exactly whom to expect
//!    and refuses (and logs) anyone else.
//! 5. With all `size − 1` links up, the links are handed to the caller as
//!    plain non-blocking sockets with `TCP_NODELAY`.
//! 6. The thread keeps accepting on the listener until the job finishes: any
//!    connection now is unexpected, so it is authenticated (to log who it
//!    was) and closed; no frame on it is ever read.
//!
//! The whole of steps 1-5 is bounded by `MTTL_CONNECT_TIMEOUT`.
//!
//! Strangers cannot stop either loop: each accepted connection's handshake
//! runs as its own task under [`auth::HANDSHAKE_TIMEOUT`], so a silent or
//! slow client holds up nobody; and a failed `accept` (a connection reset
//! before it was taken, or no file descriptor left because a flood of
//! connections holds them) is logged and retried after a pause, never a
//! reason to give up the rendezvous (`mttl-comm/tests/rogue_client.rs`).

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc as tmpsc, oneshot};

use super::auth;
use crate::comm::Rank;
use crate::env::{self, TcpLaunch};

/// The mesh links of a rank: `links[r]` is the socket to rank `r` (`None`
/// for itself).
pub(crate) type Links = Vec<Option<std::net::TcpStream>>;

/// The background thread that built the mesh and now guards the port.
#[derive(Debug)]
pub(crate) struct Guard {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Guard {
    /// Stops guarding the port and joins the thread.
    pub(crate) fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Builds the mesh for `launch` within `timeout`.
pub(crate) fn connect_mesh(
    launch: &TcpLaunch,
    timeout: Duration,
) -> Result<(Links, Guard), String> {
    let (result_tx, result_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let launch = launch.clone();
    let thread = std::thread::Builder::new()
        .name(format!("mttl-tcp-guard-{}", launch.rank))
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = result_tx.send(Err(format!("cannot start the I/O runtime: {e}")));
                    return;
                }
            };
            rt.block_on(async move {
                let deadline = Instant::now() + timeout;
                let listener = match bind(&launch).await {
                    Ok(l) => l,
                    Err(e) => {
                        let _ = result_tx.send(Err(e));
                        return;
                    }
                };
                let built =
                    tokio::time::timeout(timeout, build(&launch, &listener, deadline)).await;
                let links = match built {
                    Ok(Ok(links)) => links,
                    Ok(Err(e)) => {
                        let _ = result_tx.send(Err(e));
                        return;
                    }
                    Err(_) => {
                        let _ = result_tx.send(Err(format!(
                            "the mesh was not complete after {:.0} s (MTTL_CONNECT_TIMEOUT): \
                             did every rank start?",
                            timeout.as_secs_f64()
                        )));
                        return;
                    }
                };
                if result_tx.send(Ok(links)).is_err() {
                    return;
                }
                guard_port(&launch, listener, stop_rx).await;
            });
        })
        .map_err(|e| format!("cannot start the I/O thread: {e}"))?;
    let links = result_rx
        .recv()
        .map_err(|_| "the I/O thread died during bootstrap".to_string())??;
    Ok((
        links,
        Guard {
            stop: Some(stop_tx),
            thread: Some(thread),
        },
    ))
}

fn bind_ip(launch: &TcpLaunch) -> IpAddr {
    if launch.bind_any {
        IpAddr::V4(Ipv4Addr::UNSPECIFIED)
    } else {
        IpAddr::V4(Ipv4Addr::LOCALHOST)
    }
}

async fn resolve_root(root: &str) -> Result<SocketAddr, String> {
    let mut addrs = tokio::net::lookup_host(root)
        .await
        .map_err(|e| format!("cannot resolve MTTL_ROOT={root:?}: {e}"))?;
    addrs
        .find(|a| a.is_ipv4())
        .ok_or_else(|| format!("MTTL_ROOT={root:?} has no IPv4 address"))
}

/// How many connections a listener queues before accepting them.
const LISTEN_BACKLOG: libc::c_int = 1024;

/// Step 1: the listener. Rank 0 takes the one the launcher bound for it, if
/// it inherited it ([`inherited_listener`]).
async fn bind(launch: &TcpLaunch) -> Result<TcpListener, String> {
    let addr = if launch.rank == 0 {
        let root = resolve_root(&launch.root).await?;
        let inherited = std::env::var(env::ROOT_FD).ok();
        if let Some(listener) = inherited_listener(inherited.as_deref(), root.port()) {
            listener
                .set_nonblocking(true)
                .map_err(|e| format!("cannot use the rendezvous listener: {e}"))?;
            return TcpListener::from_std(listener)
                .map_err(|e| format!("cannot use the rendezvous listener: {e}"));
        }
        SocketAddr::new(bind_ip(launch), root.port())
    } else {
        SocketAddr::new(bind_ip(launch), 0)
    };
    let socket = TcpSocket::new_v4().map_err(|e| format!("cannot create a socket: {e}"))?;
    socket
        .set_reuseaddr(true)
        .map_err(|e| format!("cannot set SO_REUSEADDR: {e}"))?;
    socket
        .bind(addr)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))?;
    socket
        .listen(LISTEN_BACKLOG as u32)
        .map_err(|e| format!("cannot listen on {addr}: {e}"))
}

/// The rendezvous listener the launcher bound on `port` and left open in
/// this process under the descriptor `fd` names (`MTTL_ROOT_FD`), taken
/// once per process. `None` if the variable is unset or names anything but
/// a listening TCP socket on `port` (a program started again by a rank
/// inherits the variable, not the descriptor): rank 0 then binds the port
/// itself.
fn inherited_listener(fd: Option<&str>, port: u16) -> Option<std::net::TcpListener> {
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let fd: RawFd = fd?.trim().parse().ok()?;
    let mut accepting: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: getsockopt only writes `len` bytes into `accepting`; on a
    // descriptor that is not a socket it fails and writes nothing.
    let listening = unsafe {
        libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ACCEPTCONN,
            (&mut accepting as *mut libc::c_int).cast(),
            &mut len,
        )
    } == 0
        && accepting != 0;
    // SAFETY: an all-zero `sockaddr_storage` is valid.
    let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut addr_len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    let named = listening
        // SAFETY: getsockname writes at most `addr_len` bytes into `addr`.
        && unsafe {
            libc::getsockname(
                fd,
                (&mut addr as *mut libc::sockaddr_storage).cast(),
                &mut addr_len,
            )
        } == 0;
    let on_port = named && i32::from(addr.ss_family) == libc::AF_INET && {
        // SAFETY: the address family says it is a `sockaddr_in`, which
        // `sockaddr_storage` is large and aligned enough to hold.
        let inet =
            unsafe { &*(&addr as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
        u16::from_be(inet.sin_port) == port
    };
    if !on_port || TAKEN.swap(true, Ordering::SeqCst) {
        return None;
    }
    // SAFETY: `fd` is an open listening socket that this process inherited
    // and nothing else in it owns (taken once, above); from here the
    // listener owns it and closes it when dropped.
    let listener = unsafe { std::net::TcpListener::from_raw_fd(fd) };
    // SAFETY: fcntl and listen on a socket this process owns: the
    // program's own children must not inherit it, and the whole job may
    // knock at once (the launcher listened with the standard library's
    // backlog of 128; listening again raises it, as rank 0's own does).
    unsafe {
        libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC);
        libc::listen(fd, LISTEN_BACKLOG);
    }
    Some(listener)
}

/// Steps 2-5.
async fn build(
    launch: &TcpLaunch,
    listener: &TcpListener,
    deadline: Instant,
) -> Result<Links, String> {
    let (me, size) = (launch.rank, launch.size);
    // Whom this rank accepts: rank 0 everyone, rank i every k > i.
    let expected: Vec<Rank> = if me == 0 {
        (1..size).collect()
    } else {
        (me + 1..size).collect()
    };
    let (acc_tx, mut acc_rx) = tmpsc::unbounded_channel::<(Rank, TcpStream)>();
    let accepting = accept_expected(launch, listener, expected.clone(), acc_tx);

    let connecting = async {
        let mut out: Vec<(Rank, TcpStream)> = Vec::new();
        if me == 0 {
            return Ok::<_, String>(out);
        }
        // Step 2: rendezvous with rank 0.
        let root = resolve_root(&launch.root).await?;
        let mut stream = connect_retrying(root, deadline)
            .await
            .map_err(|e| format!("could not reach rank 0 at {root}: {e}"))?;
        auth::connect(&mut stream, &launch.secret, me, 0)
            .await
            .map_err(|e| format!("rendezvous with rank 0 at {root}: {e}"))?;
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot read the listening port: {e}"))?
            .port();
        stream
            .write_all(&port.to_le_bytes())
            .await
            .map_err(|e| format!("rendezvous with rank 0: {e}"))?;
        // Step 3: the table.
        let table = read_table(&mut stream, size)
            .await
            .map_err(|e| format!("rendezvous with rank 0: reading the address table: {e}"))?;
        out.push((0, stream));
        // Step 4: connect to every 0 < j < me.
        for (j, addr) in table.iter().enumerate().take(me).skip(1) {
            let mut s = connect_retrying(*addr, deadline)
                .await
                .map_err(|e| format!("could not reach rank {j} at {addr}: {e}"))?;
            auth::connect(&mut s, &launch.secret, me, j)
                .await
                .map_err(|e| format!("connecting to rank {j} at {addr}: {e}"))?;
            out.push((j, s));
        }
        Ok(out)
    };

    let collecting = async {
        let mut got: HashMap<Rank, TcpStream> = HashMap::new();
        while got.len() < expected.len() {
            match acc_rx.recv().await {
                Some((r, s)) => {
                    got.insert(r, s);
                }
                None => return Err("the accept loop stopped".to_string()),
            }
        }
        Ok(got)
    };

    let (connected, accepted) = tokio::select! {
        r = async { tokio::try_join!(connecting, collecting) } => r?,
        never = accepting => match never {},
    };

    let mut accepted = accepted;
    if me == 0 {
        // Step 3 at rank 0: ports were read by the accept loop; send the table.
        let mut table = vec![SocketAddr::new(bind_ip(launch), 0); size];
        let mut ports: Vec<(Rank, TcpStream)> = accepted.drain().collect();
        ports.sort_by_key(|(r, _)| *r);
        for (r, s) in ports.iter_mut() {
            let mut p = [0u8; 2];
            s.read_exact(&mut p)
                .await
                .map_err(|e| format!("rendezvous: reading rank {r}'s port: {e}"))?;
            let ip = s
                .peer_addr()
                .map_err(|e| format!("rendezvous: rank {r}'s address: {e}"))?
                .ip();
            table[*r] = SocketAddr::new(ip, u16::from_le_bytes(p));
        }
        let encoded = encode_table(&table);
        for (r, s) in ports.iter_mut() {
            s.write_all(&encoded)
                .await
                .map_err(|e| format!("rendezvous: sending the table to rank {r}: {e}"))?;
        }
        accepted = ports.into_iter().collect();
    }

    // Step 5.
    let mut links: Links = (0..size).map(|_| None).collect();
    for (r, s) in connected.into_iter().chain(accepted) {
        let std = s.into_std().map_err(|e| format!("link to rank {r}: {e}"))?;
        std.set_nodelay(true)
            .map_err(|e| format!("link to rank {r}: cannot set TCP_NODELAY: {e}"))?;
        links[r] = Some(std);
    }
    Ok(links)
}

/// Accepts until every expected rank has connected and authenticated,
/// sending each to `out`. Strangers and duplicates are refused and logged.
/// Never returns: the caller stops it when the mesh is complete, or at the
/// deadline.
async fn accept_expected(
    launch: &TcpLaunch,
    listener: &TcpListener,
    expected: Vec<Rank>,
    out: tmpsc::UnboundedSender<(Rank, TcpStream)>,
) -> Infallible {
    let me = launch.rank;
    let admitted = std::sync::Arc::new(std::sync::Mutex::new(std::collections::HashSet::new()));
    let mut failing = AcceptFailures::default();
    loop {
        let (mut stream, peer) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                failing.pause(me, &e).await;
                continue;
            }
        };
        failing.clear();
        let secret = launch.secret;
        let expected = expected.clone();
        let admitted = admitted.clone();
        let out = out.clone();
        tokio::spawn(async move {
            let admit = |r: Rank| {
                let mut set = admitted
                    .lock()
                    .map_err(|_| "internal lock poisoned".to_string())?;
                if !expected.contains(&r) {
                    return Err(format!("rank {r} is not expected to connect to rank {me}"));
                }
                if !set.insert(r) {
                    return Err(format!("rank {r} is already connected"));
                }
                Ok(())
            };
            let shaken = tokio::time::timeout(
                auth::HANDSHAKE_TIMEOUT,
                auth::accept(&mut stream, &secret, me, admit),
            )
            .await;
            match shaken {
                Ok(Ok(r)) => {
                    let _ = out.send((r, stream));
                }
                Ok(Err(why)) => refused(me, peer, &why),
                Err(_) => refused(me, peer, "handshake timed out"),
            }
        });
    }
}

/// Step 6.
async fn guard_port(launch: &TcpLaunch, listener: TcpListener, mut stop: oneshot::Receiver<()>) {
    let me = launch.rank;
    let mut failing = AcceptFailures::default();
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            a = listener.accept() => a,
        };
        let (mut stream, peer) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = failing.pause(me, &e) => continue,
                }
            }
        };
        failing.clear();
        let secret = launch.secret;
        tokio::spawn(async move {
            let shaken = tokio::time::timeout(
                auth::HANDSHAKE_TIMEOUT,
                auth::accept(&mut stream, &secret, me, |r| {
                    Err(format!(
                        "the mesh is complete; rank {r} has no reason to connect"
                    ))
                }),
            )
            .await;
            match shaken {
                Ok(Err(why)) => refused(me, peer, &why),
                Err(_) => refused(me, peer, "handshake timed out"),
                Ok(Ok(_)) => refused(me, peer, "unexpected connection"),
            }
        });
    }
}

/// How long to wait before accepting again after `accept` failed: it fails
/// again at once while the cause lasts (out of file descriptors).
const ACCEPT_RETRY_PAUSE: Duration = Duration::from_millis(50);

/// Failed accepts in a row: logged once per run, each followed by a pause.
#[derive(Debug, Default)]
struct AcceptFailures {
    logged: bool,
}

impl AcceptFailures {
    async fn pause(&mut self, me: Rank, e: &std::io::Error) {
        if !self.logged {
            self.logged = true;
            eprintln!(
                "mttl: rank {me}: accepting a connection failed: {e} (retrying every {} ms)",
                ACCEPT_RETRY_PAUSE.as_millis()
            );
        }
        tokio::time::sleep(ACCEPT_RETRY_PAUSE).await;
    }

    fn clear(&mut self) {
        self.logged = false;
    }
}

fn refused(me: Rank, peer: SocketAddr, why: &str) {
    eprintln!("mttl: rank {me}: refused a connection from {peer}: {why}");
}

async fn connect_retrying(addr: SocketAddr, deadline: Instant) -> Result<TcpStream, String> {
    let mut pause = Duration::from_millis(2);
    loop {
        match TcpStream::connect(addr).await {
            Ok(s) => return Ok(s),
            Err(e) => {
                if Instant::now() + pause >= deadline {
                    return Err(format!("{e} (gave up at MTTL_CONNECT_TIMEOUT)"));
                }
                tokio::time::sleep(pause).await;
                pause = (pause * 2).min(Duration::from_millis(100));
            }
        }
    }
}

fn encode_table(table: &[SocketAddr]) -> Vec<u8> {
    let mut v = Vec::with_capacity(table.len() * 6);
    for a in table {
        match a.ip() {
            IpAddr::V4(ip) => v.extend_from_slice(&ip.octets()),
            IpAddr::V6(_) => v.extend_from_slice(&[0, 0, 0, 0]),
        }
        v.extend_from_slice(&a.port().to_le_bytes());
    }
    v
}

async fn read_table(stream: &mut TcpStream, size: usize) -> std::io::Result<Vec<SocketAddr>> {
    let mut v = vec![0u8; size * 6];
    stream.read_exact(&mut v).await?;
    Ok(v.chunks_exact(6)
        .map(|c| {
            SocketAddr::new(
                IpAddr::V4(Ipv4Addr::new(c[0], c[1], c[2], c[3])),
                u16::from_le_bytes([c[4], c[5]]),
            )
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rank 0 takes the launcher's listener only if the descriptor is a
    /// listening TCP socket on the rendezvous port, and only once.
    #[test]
    fn rank_0_takes_an_inherited_listener_on_its_port_only() {
        use std::os::fd::{AsRawFd, IntoRawFd};
        let file = std::fs::File::open("/dev/null").expect("open /dev/null");
        let not_a_socket = file.as_raw_fd().to_string();
        assert!(inherited_listener(Some(&not_a_socket), 1).is_none());
        assert!(inherited_listener(Some("not a number"), 1).is_none());
        assert!(inherited_listener(None, 1).is_none());
        let bound = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = bound.local_addr().expect("bound").port();
        let fd = bound.into_raw_fd().to_string();
        assert!(
            inherited_listener(Some(&fd), port.wrapping_add(1)).is_none(),
            "a listener on another port"
        );
        let taken = inherited_listener(Some(&fd), port).expect("the listener on its port");
        assert_eq!(taken.local_addr().expect("bound").port(), port);
        assert!(inherited_listener(Some(&fd), port).is_none(), "taken twice");
    }
}
