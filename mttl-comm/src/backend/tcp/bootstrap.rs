//! Bootstrap and links: from a launch environment to a rendezvous at rank
//! 0, then links between the other ranks made when first needed, by a
//! background thread that also guards the listening port.
//!
//! The thread runs a small tokio runtime (async I/O lets a rank accept and
//! connect at the same time, each handshake under its own timeout). The
//! steps:
//!
//! 1. Every rank binds a listener: rank 0 on `MTTL_ROOT`, the others on an
//!    ephemeral port (loopback, or every interface with `MTTL_BIND=any`).
//! 2. Every rank `i > 0` connects to rank 0 (retrying until the deadline: rank
//!    0 may start later), authenticates ([`auth`]) and sends its
//!    listening port. Rank 0 learns `i`'s address from the connection itself.
//! 3. When all `size − 1` ranks have checked in, rank 0 sends each the table
//!    of every rank's address. The rendezvous connection stays as the link
//!    between rank 0 and `i`. Steps 1-3 are bounded by
//!    `MTTL_CONNECT_TIMEOUT`; the links to rank 0 are handed to the caller
//!    as plain non-blocking sockets with `TCP_NODELAY`.
//! 4. From then on the thread makes the other links as they are needed:
//!    the rank asks for a link to `j` ([`Guard::ask`]) on its first send to
//!    `j` or receive from `j`, and the thread connects to `j`'s address and
//!    authenticates; and it accepts on the listener, authenticates, and
//!    admits any rank of the job not yet linked. Each link made, or the
//!    reason it could not be, goes to the rank through a channel and a
//!    `mio::Waker` that wakes the rank's poll ([`Guard::take`]).
//! 5. Two ranks may ask for their link at the same moment, each connecting
//!    to the other. Exactly one connection becomes the link: the one the
//!    lower rank made. The thread keeps one state per peer (unlinked,
//!    dialing, linked) under a lock, and decides every admission there:
//!    a connection from `j` while this rank dials `j` is admitted if `j`
//!    is the lower rank; otherwise the acceptor answers `CROSSED` and
//!    closes it, and the connector waits for the acceptor's own connection,
//!    which the connector admits by the same rule. A rank's decision to
//!    dial and its admissions are serialised by that lock, so a rank never
//!    dials a peer it has admitted, and both ends always keep the same
//!    connection: the pair has one link, so per-pair FIFO order holds.
//! 6. The thread stops when the rank finishes: a connection after that is
//!    refused by the kernel, so a peer that asks for a link to a finished
//!    rank learns it at once.
//!
//! Strangers cannot stop either loop: each accepted connection's handshake
//! runs as its own task under [`auth::HANDSHAKE_TIMEOUT`], so a silent or
//! slow client holds up nobody, and a client that fails the handshake is
//! refused and logged, its bytes never parsed as frames; a failed `accept`
//! (a connection reset before it was taken, or no file descriptor left
//! because a flood of connections holds them) is logged and retried after a
//! pause, never a reason to give up (`mttl-comm/tests/rogue_client.rs`).

use std::convert::Infallible;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::fd::{FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpSocket, TcpStream};
use tokio::sync::{mpsc as tmpsc, oneshot};

use super::auth;
use crate::comm::Rank;
use crate::env::{self, TcpLaunch};

/// The links of a rank at start-up: `links[r]` is the socket to rank `r`,
/// `None` for itself and for every rank it has no link to yet (rank 0 has
/// one to every rank, the others to rank 0 only).
pub(crate) type Links = Vec<Option<std::net::TcpStream>>;

/// A link made after start-up, or why it could not be made (step 4).
pub(crate) type Made = (Rank, Result<std::net::TcpStream, String>);

/// The background thread that made the rendezvous and now makes links and
/// guards the port, with the rank's ends of its channels.
#[derive(Debug)]
pub(crate) struct Guard {
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    ask: tmpsc::UnboundedSender<Rank>,
    made: mpsc::Receiver<Made>,
}

impl Guard {
    /// Asks for a link to `peer`; it comes through [`take`](Self::take),
    /// as does the reason if it cannot be made. Asking again while a link
    /// is on its way, or made, does nothing. False if the thread has
    /// stopped.
    pub(crate) fn ask(&self, peer: Rank) -> bool {
        self.ask.send(peer).is_ok()
    }

    /// The next link made (asked for or accepted), or failure to make one.
    pub(crate) fn take(&self) -> Option<Made> {
        self.made.try_recv().ok()
    }

    /// Stops guarding the port and joins the thread. Links it made before
    /// stopping can still be taken.
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

/// Makes the rendezvous for `launch` within `timeout`, and starts the
/// thread that makes the other links, waking the rank with `waker` when
/// one is made.
pub(crate) fn join(
    launch: &TcpLaunch,
    timeout: Duration,
    waker: mio::Waker,
) -> Result<(Links, Guard), String> {
    let (result_tx, result_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = oneshot::channel();
    let (ask_tx, ask_rx) = tmpsc::unbounded_channel();
    let (made_tx, made_rx) = mpsc::channel();
    let launch = launch.clone();
    let thread = std::thread::Builder::new()
        .name(format!("mttl-tcp-links-{}", launch.rank))
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
                    tokio::time::timeout(timeout, rendezvous(&launch, &listener, deadline)).await;
                let (links, table) = match built {
                    Ok(Ok(built)) => built,
                    Ok(Err(e)) => {
                        let _ = result_tx.send(Err(e));
                        return;
                    }
                    Err(_) => {
                        let _ = result_tx.send(Err(format!(
                            "the rendezvous was not complete after {:.0} s \
                             (MTTL_CONNECT_TIMEOUT): did every rank start?",
                            timeout.as_secs_f64()
                        )));
                        return;
                    }
                };
                let states = links
                    .iter()
                    .enumerate()
                    .map(|(r, l)| {
                        if l.is_some() || r == launch.rank {
                            LinkState::Linked
                        } else {
                            LinkState::Unlinked
                        }
                    })
                    .collect();
                if result_tx.send(Ok(links)).is_err() {
                    return;
                }
                let linker = Linker {
                    me: launch.rank,
                    secret: launch.secret,
                    table,
                    states: Arc::new(Mutex::new(states)),
                    made: made_tx,
                    waker: Arc::new(waker),
                };
                serve(linker, listener, ask_rx, stop_rx).await;
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
            ask: ask_tx,
            made: made_rx,
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

/// Steps 2-3: the links to rank 0 (every link, at rank 0) and the table
/// of every rank's listening address.
async fn rendezvous(
    launch: &TcpLaunch,
    listener: &TcpListener,
    deadline: Instant,
) -> Result<(Links, Vec<SocketAddr>), String> {
    let (me, size) = (launch.rank, launch.size);
    let mut links: Links = (0..size).map(|_| None).collect();
    let mut table = vec![SocketAddr::new(bind_ip(launch), 0); size];
    let mut joined: Vec<(Rank, TcpStream)> = Vec::new();
    if me == 0 {
        let (acc_tx, mut acc_rx) = tmpsc::unbounded_channel::<(Rank, TcpStream)>();
        let accepting = accept_expected(launch, listener, (1..size).collect(), acc_tx);
        let collecting = async {
            let mut got = Vec::with_capacity(size - 1);
            while got.len() < size - 1 {
                match acc_rx.recv().await {
                    Some(link) => got.push(link),
                    None => return Err("the accept loop stopped".to_string()),
                }
            }
            Ok(got)
        };
        let mut got = tokio::select! {
            got = collecting => got?,
            never = accepting => match never {},
        };
        // Step 3 at rank 0: read every rank's port, then send the table.
        got.sort_by_key(|(r, _)| *r);
        for (r, s) in got.iter_mut() {
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
        for (r, s) in got.iter_mut() {
            s.write_all(&encoded)
                .await
                .map_err(|e| format!("rendezvous: sending the table to rank {r}: {e}"))?;
        }
        joined = got;
    } else {
        // Step 2: rendezvous with rank 0. This rank accepts nobody until
        // the table has come: a rank that got it earlier may connect
        // already, and waits in the listener's queue.
        let root = resolve_root(&launch.root).await?;
        let mut stream = connect_retrying(root, deadline)
            .await
            .map_err(|e| format!("could not reach rank 0 at {root}: {e}"))?;
        match auth::connect(&mut stream, &launch.secret, me, 0).await {
            Ok(auth::Admission::Link) => {}
            Ok(auth::Admission::Crossed) => {
                return Err(format!(
                    "rendezvous with rank 0 at {root}: it answered as if it were connecting \
                     to this rank"
                ))
            }
            Err(e) => return Err(format!("rendezvous with rank 0 at {root}: {e}")),
        }
        let port = listener
            .local_addr()
            .map_err(|e| format!("cannot read the listening port: {e}"))?
            .port();
        stream
            .write_all(&port.to_le_bytes())
            .await
            .map_err(|e| format!("rendezvous with rank 0: {e}"))?;
        // Step 3: the table.
        table = read_table(&mut stream, size)
            .await
            .map_err(|e| format!("rendezvous with rank 0: reading the address table: {e}"))?;
        joined.push((0, stream));
    }
    for (r, s) in joined {
        links[r] = Some(into_link(r, s)?);
    }
    Ok((links, table))
}

/// A connection as a link: a plain socket with `TCP_NODELAY`.
fn into_link(r: Rank, s: TcpStream) -> Result<std::net::TcpStream, String> {
    let std = s.into_std().map_err(|e| format!("link to rank {r}: {e}"))?;
    std.set_nodelay(true)
        .map_err(|e| format!("link to rank {r}: cannot set TCP_NODELAY: {e}"))?;
    Ok(std)
}

/// Accepts until every expected rank has connected and authenticated,
/// sending each to `out`. Strangers and duplicates are refused and logged.
/// Never returns: the caller stops it when the rendezvous is complete, or
/// at the deadline.
async fn accept_expected(
    launch: &TcpLaunch,
    listener: &TcpListener,
    expected: Vec<Rank>,
    out: tmpsc::UnboundedSender<(Rank, TcpStream)>,
) -> Infallible {
    let me = launch.rank;
    let admitted = Arc::new(Mutex::new(std::collections::HashSet::new()));
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
                Ok(auth::Admission::Link)
            };
            let shaken = tokio::time::timeout(
                auth::HANDSHAKE_TIMEOUT,
                auth::accept(&mut stream, &secret, me, admit),
            )
            .await;
            match shaken {
                Ok(Ok((r, _))) => {
                    let _ = out.send((r, stream));
                }
                Ok(Err(why)) => refused(me, peer, &why),
                Err(_) => refused(me, peer, "handshake timed out"),
            }
        });
    }
}

/// One peer's link, as the link thread sees it (step 5).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LinkState {
    Unlinked,
    /// This rank is connecting to the peer, or waits for the peer's own
    /// connection after a `CROSSED` answer.
    Dialing,
    /// A link was made (or this is the rank itself).
    Linked,
}

/// What the link thread's tasks share (steps 4-5).
#[derive(Clone)]
struct Linker {
    me: Rank,
    secret: [u8; crate::env::SECRET_LEN],
    table: Vec<SocketAddr>,
    states: Arc<Mutex<Vec<LinkState>>>,
    made: mpsc::Sender<Made>,
    waker: Arc<mio::Waker>,
}

impl Linker {
    /// Runs `f` on the peers' states. A poisoned lock (a task panicked
    /// holding it) still holds consistent states: every change is one
    /// assignment.
    fn states<T>(&self, f: impl FnOnce(&mut Vec<LinkState>) -> T) -> T {
        let mut states = self.states.lock().unwrap_or_else(|p| p.into_inner());
        f(&mut states)
    }

    /// Hands a link, or why there is none, to the rank and wakes it.
    fn deliver(&self, made: Made) {
        if self.made.send(made).is_ok() {
            // A rank that cannot be woken finds the link at its next look.
            let _ = self.waker.wake();
        }
    }

    /// Step 4, connecting: a link to `peer`, unless one is made or on its
    /// way.
    async fn dial(self, peer: Rank) {
        let Some(&addr) = self.table.get(peer) else {
            return;
        };
        let go = self.states(|s| {
            let go = s.get(peer) == Some(&LinkState::Unlinked);
            if go {
                s[peer] = LinkState::Dialing;
            }
            go
        });
        if !go {
            return;
        }
        let me = self.me;
        let dialed = tokio::time::timeout(auth::HANDSHAKE_TIMEOUT, async {
            let mut s = TcpStream::connect(addr).await.map_err(|e| {
                format!(
                    "cannot connect to it at {addr} ({e}): it has finished, or its process ended"
                )
            })?;
            let admission = auth::connect(&mut s, &self.secret, me, peer)
                .await
                .map_err(|e| format!("connecting to it at {addr}: {e}"))?;
            Ok::<_, String>((s, admission))
        })
        .await
        .unwrap_or_else(|_| {
            Err(format!(
                "connecting to it at {addr}: no answer within {} s",
                auth::HANDSHAKE_TIMEOUT.as_secs()
            ))
        });
        match dialed {
            Ok((s, auth::Admission::Link)) => {
                self.states(|st| st[peer] = LinkState::Linked);
                self.deliver((peer, into_link(peer, s)));
            }
            // The peer's own connection brings the link.
            Ok((_, auth::Admission::Crossed)) => {}
            Err(why) => {
                // Unless the peer's own connection made the link meanwhile.
                let failed = self.states(|st| {
                    let failed = st[peer] == LinkState::Dialing;
                    if failed {
                        st[peer] = LinkState::Unlinked;
                    }
                    failed
                });
                if failed {
                    self.deliver((peer, Err(why)));
                }
            }
        }
    }

    /// Step 4, accepting: authenticates the connection and admits its rank
    /// if it is of this job and not linked yet (step 5 for a crossing).
    async fn admit(self, mut stream: TcpStream, from: SocketAddr) {
        let me = self.me;
        let mut admitted = None;
        let admit = |r: Rank| {
            self.states(|st| match st.get(r).copied() {
                None => Err(format!("rank {r} is not a rank of this job")),
                Some(LinkState::Linked) if r == me => Err(format!("rank {r} is this rank itself")),
                // A rank of this job (its proof checked) dialed while this
                // rank's own connection to it was being admitted: the two
                // crossed, and the link already made is the one both use.
                Some(LinkState::Linked) => Ok(auth::Admission::Crossed),
                Some(LinkState::Dialing) if r > me => Ok(auth::Admission::Crossed),
                Some(LinkState::Dialing | LinkState::Unlinked) => {
                    st[r] = LinkState::Linked;
                    admitted = Some(r);
                    Ok(auth::Admission::Link)
                }
            })
        };
        let shaken = tokio::time::timeout(
            auth::HANDSHAKE_TIMEOUT,
            auth::accept(&mut stream, &self.secret, me, admit),
        )
        .await;
        match shaken {
            Ok(Ok((r, auth::Admission::Link))) => self.deliver((r, into_link(r, stream))),
            Ok(Ok((_, auth::Admission::Crossed))) => {}
            Ok(Err(why)) => {
                refused(me, from, &why);
                // Admitted, but the acceptance could not be sent: the
                // peer's side failed too.
                if let Some(r) = admitted {
                    self.deliver((r, Err(format!("accepting its connection: {why}"))));
                }
            }
            Err(_) => {
                refused(me, from, "handshake timed out");
                if let Some(r) = admitted {
                    self.deliver((r, Err("accepting its connection: timed out".into())));
                }
            }
        }
    }
}

/// Steps 4-6: makes the links asked for and admits the peers that connect,
/// until the rank finishes.
async fn serve(
    linker: Linker,
    listener: TcpListener,
    mut ask: tmpsc::UnboundedReceiver<Rank>,
    mut stop: oneshot::Receiver<()>,
) {
    let me = linker.me;
    let mut failing = AcceptFailures::default();
    loop {
        let accepted = tokio::select! {
            _ = &mut stop => return,
            Some(peer) = ask.recv() => {
                tokio::spawn(linker.clone().dial(peer));
                continue;
            }
            a = listener.accept() => a,
        };
        let (stream, from) = match accepted {
            Ok(x) => x,
            Err(e) => {
                tokio::select! {
                    _ = &mut stop => return,
                    _ = failing.pause(me, &e) => continue,
                }
            }
        };
        failing.clear();
        tokio::spawn(linker.clone().admit(stream, from));
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
