//! The TCP backend: a fully connected mesh of authenticated TCP links,
//! driven by non-blocking sockets from the calling thread.
//!
//! Algorithm:
//!
//! - **Bootstrap** ([`bootstrap`]): rendezvous at rank 0, then every pair of
//!   ranks connects once; every link is authenticated with the job secret
//!   ([`auth`]). A background thread runs this on tokio, then guards the
//!   listening port for the rest of the job (strangers are refused and
//!   logged; their bytes are never parsed as frames).
//! - **Data path**: the links are non-blocking sockets registered with one
//!   `mio::Poll` owned by the rank's communicating thread. There is no
//!   thread hop on the hot path: a send writes straight into the kernel from
//!   the caller (one `writev` of header and payload), and a receive drains
//!   whichever sockets the poll reports readable, turning their bytes into
//!   messages ([`frame`]) queued in arrival order. (Passing every message
//!   through a tokio task on another thread would cost two cross-thread
//!   wake-ups per message, ~50 µs each on this kind of VM.)
//! - **Waiting**: a blocked receive, or a send waiting for socket space,
//!   spins on zero-timeout polls until `MTTL_SPIN_US` have passed with no
//!   link ready (a busy rank, or one in the middle of a stream, never pays
//!   a wake-up), then parks in the kernel until a socket is ready or its
//!   timeout passes (an idle rank uses no CPU). A receive awaiting the
//!   answer to what it sent spins by reading the answering link itself,
//!   polling every link once per few looks: the answer then costs one
//!   system call, not a poll and a read (8-byte round trips 7.4 → 6.7 µs
//!   here).
//! - **Memory**: a large payload is received straight into its message's
//!   vector, uninitialised until the kernel writes it ([`frame`]), or, when
//!   `recv_from_into` asks for it, into the caller's memory: each link's
//!   reader stops at the header of a *bulk* payload (sent by `send_bulk`
//!   and its kin, as a remote write's body is) larger than its read
//!   buffer, and the next look at the network reads it into a vector unless
//!   `recv_from_into` takes it first (a large remote write lands in its
//!   region so, without a copy); each link
//!   asks for a send buffer of `MTTL_TCP_SNDBUF` (default 256 KiB) rather
//!   than the kernel's automatic one of several MiB, so the bytes in flight
//!   stay in the caches; the reads of a payload of 256 KiB or more are
//!   acknowledged at once (`TCP_QUICKACK`, see `frame::ack_now`), so its
//!   sender, whose send buffer it overflows, is never kept waiting by a
//!   delayed acknowledgement; and glibc is told to keep freed large blocks
//!   instead of trimming them, so the next message's vector reuses pages
//!   already mapped (`backend::malloc`).
//! - **Ordering**: each link has one FIFO of outgoing frames; `send` waits
//!   for that FIFO to drain before writing, so per-pair order is call order.
//!   While a send waits for socket space it keeps reading all links, so two
//!   ranks sending each other large messages cannot deadlock.
//! - **Leaving** ([`Comm::finish`]): flush everything, send a goodbye frame
//!   to every peer, half-close, then read until every peer has said goodbye
//!   too. A link that ends *without* a goodbye is a lost peer: once the
//!   messages already received are taken (per-pair order: what a rank sent
//!   before it died still arrives), `probe` and `recv_any` report it at once
//!   (fail fast rather than hang), and any operation addressed to that peer
//!   fails. A peer host that vanishes without closing anything is found
//!   within `MTTL_LINK_TIMEOUT` (25 s): on an idle link by keepalive probes,
//!   on one with data unacknowledged by a parked wait's looks at its
//!   `TCP_INFO` ([`liveness`]).

mod auth;
mod bootstrap;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod liveness;

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use self::frame::{Frame, FrameKind, FrameReader, Header, ReadError, HEADER_LEN};
use self::liveness::Liveness;
use crate::comm::{Comm, Envelope, Message, Rank, Received, SendHandle, Tag};
use crate::env::{self, Launch, TcpLaunch};
use crate::error::{CommError, ErrorKind, Op};

/// After how many polls that found nothing a rank that never parks
/// looks at its links' acknowledgements (at most once per liveness
/// interval; see [`TcpComm::check_links`]): a poll costs a system call, so
/// this adds a clock reading to one in a thousand.
const EMPTY_POLLS_PER_LOOK: u32 = 1024;

/// How many frames one `writev` gathers at most.
const MAX_GATHER: usize = 32;

/// While a wait spins: how many looks at the network make a round, after
/// which it reads the clock, offers the core to other processes and, if it
/// reads one link directly, polls them all (see `TcpComm::wait_until`).
const POLLS_PER_ROUND: u32 = 8;

/// How long `finish` waits for every peer's goodbye.
const FINISH_TIMEOUT: Duration = Duration::from_secs(30);

/// The TCP backend. See the module documentation for the algorithm.
#[derive(Debug)]
pub struct TcpComm {
    rank: Rank,
    size: usize,
    max_len: usize,
    spin: Duration,
    poll: Option<Poll>,
    events: Events,
    peers: Vec<Option<Peer>>,
    incoming: VecDeque<Message>,
    /// The first peer lost without a goodbye: reported by probe/recv_any.
    lost: Option<(Rank, PeerState)>,
    /// Links whose reader stopped at a large payload (see `recv_from_into`).
    paused: Vec<Rank>,
    /// The link whose paused payload `recv_from_into` is reading in place.
    placing: Option<Rank>,
    self_seq: u64,
    guard: Option<bootstrap::Guard>,
    /// Finds peer hosts that vanished (`liveness`).
    liveness: Liveness,
    /// Polls that found nothing ready, for [`EMPTY_POLLS_PER_LOOK`].
    empty_polls: u32,
}

/// One link's state.
#[derive(Debug)]
struct Peer {
    stream: TcpStream,
    reader: FrameReader,
    out: VecDeque<OutFrame>,
    /// Sequence number of the next frame queued or sent to this peer.
    next_seq: u64,
    /// Every frame with a smaller sequence number is fully written.
    done_seq: u64,
    /// `next_seq` when the link last delivered bytes: frames sent since
    /// then likely await an answer (see `TcpComm::reads_directly`).
    read_at_seq: u64,
    state: PeerState,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum PeerState {
    Open,
    /// The peer said goodbye; its link may still be open for reading.
    SaidGoodbye,
    /// The link ended after a goodbye.
    Closed,
    /// The link ended without a goodbye, or failed.
    Lost(String),
    /// The peer sent something that is not a frame.
    Malformed(String),
}

#[derive(Debug)]
struct OutFrame {
    header: [u8; HEADER_LEN],
    body: Vec<u8>,
    written: usize,
    seq: u64,
}

impl OutFrame {
    fn total(&self) -> usize {
        HEADER_LEN + self.body.len()
    }

    /// Pushes the unwritten parts of this frame onto `iov`.
    fn gather<'a>(&'a self, iov: &mut IoVecs<'a>) {
        push_unwritten(&self.header, &self.body, self.written, iov);
    }
}

/// The slices of one `writev`, on the stack: no allocation per send.
struct IoVecs<'a> {
    slices: [IoSlice<'a>; 2 * MAX_GATHER],
    len: usize,
}

impl<'a> IoVecs<'a> {
    fn new() -> Self {
        IoVecs {
            slices: [IoSlice::new(&[]); 2 * MAX_GATHER],
            len: 0,
        }
    }

    fn push(&mut self, slice: IoSlice<'a>) {
        self.slices[self.len] = slice;
        self.len += 1;
    }

    fn as_slice(&self) -> &[IoSlice<'a>] {
        &self.slices[..self.len]
    }
}

fn push_unwritten<'a>(
    header: &'a [u8; HEADER_LEN],
    body: &'a [u8],
    written: usize,
    iov: &mut IoVecs<'a>,
) {
    if written < HEADER_LEN {
        iov.push(IoSlice::new(&header[written..]));
        if !body.is_empty() {
            iov.push(IoSlice::new(body));
        }
    } else if written - HEADER_LEN < body.len() {
        iov.push(IoSlice::new(&body[written - HEADER_LEN..]));
    }
}

/// Asks for a send buffer of `bytes` on `link` (`SO_SNDBUF`; Linux doubles
/// it for its bookkeeping and caps it at `net.core.wmem_max`).
///
/// Why not the kernel's automatic sizing: it grows a busy link's buffer to
/// several MiB, and a stream then keeps that many bytes in flight, in pages
/// written by the sender and read by the receiver long after, out of both
/// cores' caches. The default request, 256 KiB (512 KiB once doubled),
/// still covers a LAN's bandwidth-delay product and keeps the bytes in
/// flight cache-resident. On the development VM (loopback, 1 MiB messages,
/// 2 MiB of L2 per core) a raw socket pair streams 8-10 GB/s with it
/// against 5-5.5 GB/s without, and this backend 6.5-7.5 against 4.3-4.8.
/// Links with a large bandwidth-delay product (long distances) want
/// `MTTL_TCP_SNDBUF=0`.
fn set_send_buffer(link: &std::net::TcpStream, bytes: usize) -> io::Result<()> {
    let value = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set_socket_option(link, libc::SOL_SOCKET, libc::SO_SNDBUF, value)
}

/// Sets the integer socket option `name` of `level` on `socket`.
fn set_socket_option(
    socket: &impl std::os::fd::AsRawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `value` is a live c_int for the duration of the call and its
    // size is passed with it; the descriptor is `socket`'s own, open while
    // it is borrowed.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast::<libc::c_void>(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn would_block(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::WouldBlock
}

impl TcpComm {
    /// A job of one rank: no network, only self-sends.
    pub fn single() -> Result<Self, CommError> {
        Self::with_links(0, 1, Vec::new(), None)
    }

    /// Joins the job described by `launch`: bootstrap, then the mesh.
    pub fn connect(launch: &TcpLaunch) -> Result<Self, CommError> {
        if launch.size == 1 {
            return Self::single();
        }
        let err = |kind| CommError::new(Some(launch.rank), Op::Init, kind);
        super::malloc::keep_freed_memory();
        let timeout = env::connect_timeout()?;
        let (links, guard) =
            bootstrap::connect_mesh(launch, timeout).map_err(|e| err(ErrorKind::Bootstrap(e)))?;
        Self::with_links(launch.rank, launch.size, links, Some(guard))
    }

    fn with_links(
        rank: Rank,
        size: usize,
        links: bootstrap::Links,
        guard: Option<bootstrap::Guard>,
    ) -> Result<Self, CommError> {
        let err = |kind| CommError::new(Some(rank), Op::Init, kind);
        let max_len = env::max_message()?;
        let spin = env::spin_time()?;
        let send_buffer = env::tcp_send_buffer()?;
        let liveness = Liveness::new(env::link_timeout()?);
        let (poll, peers) = if size > 1 {
            let poll = Poll::new().map_err(|e| err(ErrorKind::Io(e)))?;
            let mut peers = Vec::with_capacity(size);
            for (r, link) in links.into_iter().enumerate() {
                let Some(link) = link else {
                    peers.push(None);
                    continue;
                };
                link.set_nonblocking(true)
                    .map_err(|e| err(ErrorKind::Io(e)))?;
                if let Some(bytes) = send_buffer {
                    set_send_buffer(&link, bytes).map_err(|e| err(ErrorKind::Io(e)))?;
                }
                socket2::SockRef::from(&link)
                    .set_tcp_keepalive(&liveness.keepalive())
                    .map_err(|e| err(ErrorKind::Io(e)))?;
                let mut stream = TcpStream::from_std(link);
                poll.registry()
                    .register(
                        &mut stream,
                        Token(r),
                        Interest::READABLE | Interest::WRITABLE,
                    )
                    .map_err(|e| err(ErrorKind::Io(e)))?;
                let mut reader = FrameReader::new(max_len);
                reader.pause_large();
                peers.push(Some(Peer {
                    stream,
                    reader,
                    out: VecDeque::new(),
                    next_seq: 0,
                    done_seq: 0,
                    read_at_seq: 0,
                    state: PeerState::Open,
                }));
            }
            (Some(poll), peers)
        } else {
            (None, vec![None])
        };
        Ok(TcpComm {
            rank,
            size,
            max_len,
            spin,
            poll,
            events: Events::with_capacity(64),
            peers,
            incoming: VecDeque::new(),
            lost: None,
            paused: Vec::new(),
            placing: None,
            self_seq: 0,
            guard,
            liveness,
            empty_polls: 0,
        })
    }

    fn error(&self, op: Op, kind: ErrorKind) -> CommError {
        CommError::new(Some(self.rank), op, kind)
    }

    fn state_error(&self, op: Op, peer: Rank, state: &PeerState) -> CommError {
        let kind = match state {
            PeerState::Malformed(detail) => ErrorKind::MalformedFrame {
                peer,
                detail: detail.clone(),
            },
            PeerState::Lost(detail) => ErrorKind::PeerLost {
                peer,
                detail: detail.clone(),
            },
            PeerState::SaidGoodbye | PeerState::Closed => ErrorKind::PeerLost {
                peer,
                detail: "it has already finished".into(),
            },
            PeerState::Open => ErrorKind::PeerLost {
                peer,
                detail: "unknown state".into(),
            },
        };
        self.error(op, kind)
    }

    /// Checks `peer` is a rank of the job.
    fn check_rank(&self, op: Op, peer: Rank) -> Result<(), CommError> {
        if peer >= self.size {
            return Err(self.error(
                op,
                ErrorKind::NoSuchRank {
                    peer,
                    size: self.size,
                },
            ));
        }
        Ok(())
    }

    fn check_len(&self, op: Op, len: usize) -> Result<(), CommError> {
        if len > self.max_len {
            return Err(self.error(
                op,
                ErrorKind::MessageTooLarge {
                    len,
                    max: self.max_len,
                },
            ));
        }
        Ok(())
    }

    /// The peer `dest`, if it can still be sent to.
    fn open_peer(&mut self, op: Op, dest: Rank) -> Result<&mut Peer, CommError> {
        let state = match &self.peers[dest] {
            Some(p) if p.state == PeerState::Open => None,
            Some(p) => Some(p.state.clone()),
            None => Some(PeerState::Lost("no link".into())),
        };
        if let Some(s) = state {
            return Err(self.state_error(op, dest, &s));
        }
        match &mut self.peers[dest] {
            Some(p) => Ok(p),
            None => unreachable!("checked above"),
        }
    }

    /// Polls the sockets once, waiting up to `wait` (`None`: until one is
    /// ready), reads every readable link and flushes every writable one.
    /// Returns how many links were ready: 0 means nothing happened.
    fn progress(&mut self, wait: Option<Duration>) -> Result<usize, io::Error> {
        // Links stopped at a large payload go on: whoever wanted it in
        // place would have taken it before anything else.
        let resumed = self.resume_paused();
        let wait = if resumed > 0 {
            Some(Duration::ZERO)
        } else {
            wait
        };
        let Some(poll) = &mut self.poll else {
            if let Some(w) = wait {
                if !w.is_zero() {
                    std::thread::sleep(w);
                }
            }
            return Ok(0);
        };
        match poll.poll(&mut self.events, wait) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => return Ok(0),
            Err(e) => return Err(e),
        }
        // The events are moved out while their links are served (which
        // needs `self`), and back for the next poll: no copy, no allocation.
        let events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        let mut n = 0;
        for ev in events.iter() {
            let r = ev.token().0;
            let closed = ev.is_read_closed() || ev.is_error();
            if ev.is_readable() || closed {
                self.read_peer(r, closed);
            }
            if ev.is_writable() {
                self.flush_peer(r);
            }
            n += 1;
        }
        self.events = events;
        if n + resumed == 0 {
            // A caller polling without parking (a loop of `probe` or
            // `send_done`) looks at the links now and then too.
            self.empty_polls = self.empty_polls.wrapping_add(1);
            if self.empty_polls % EMPTY_POLLS_PER_LOOK == 0 {
                self.check_links();
            }
        }
        Ok(n + resumed)
    }

    /// Reads on, into vectors, every link stopped at a large payload but
    /// the one being placed; returns how many there were.
    fn resume_paused(&mut self) -> usize {
        let mut resumed = 0;
        let mut i = 0;
        while i < self.paused.len() {
            let r = self.paused[i];
            if self.placing == Some(r) {
                i += 1;
                continue;
            }
            self.paused.swap_remove(i);
            // Reading resumes it (and may stop at the next one).
            self.read_peer(r, false);
            resumed += 1;
        }
        resumed
    }

    /// Reads everything `r`'s link has now (to its end if `closed`);
    /// returns whether it read anything or found the link ended.
    ///
    /// A reader stopped at a large payload goes on past it, unless
    /// `recv_from_into` is placing it; one that stops at a large payload is
    /// noted in `paused`.
    fn read_peer(&mut self, r: Rank, closed: bool) -> bool {
        let TcpComm {
            peers,
            incoming,
            poll,
            lost,
            paused,
            placing,
            ..
        } = self;
        let Some(peer) = peers.get_mut(r).and_then(Option::as_mut) else {
            return false;
        };
        if matches!(
            peer.state,
            PeerState::Closed | PeerState::Lost(_) | PeerState::Malformed(_)
        ) || *placing == Some(r)
        {
            return false;
        }
        let before = peer.reader.bytes_read();
        let mut goodbye = false;
        let result = peer.reader.resume().and_then(|()| {
            peer.reader
                .read_from_socket(
                    &mut peer.stream,
                    closed,
                    |Frame { header, payload }| match header.kind {
                        FrameKind::Data => incoming.push_back(Message {
                            source: r,
                            tag: header.tag,
                            data: payload,
                        }),
                        FrameKind::Goodbye => goodbye = true,
                    },
                )
        });
        if goodbye && peer.state == PeerState::Open {
            peer.state = PeerState::SaidGoodbye;
        }
        let end = match result {
            Ok(()) => {
                if peer.reader.paused().is_some() && !paused.contains(&r) {
                    paused.push(r);
                }
                let got = peer.reader.bytes_read() != before;
                if got {
                    peer.read_at_seq = peer.next_seq;
                }
                return got;
            }
            Err(ReadError::Closed { mid_frame: false }) if peer.state == PeerState::SaidGoodbye => {
                PeerState::Closed
            }
            Err(ReadError::Closed { mid_frame }) => PeerState::Lost(if mid_frame {
                "its connection closed in the middle of a message".into()
            } else {
                "its connection closed without a goodbye: the process exited or was killed".into()
            }),
            Err(ReadError::Io(e)) => PeerState::Lost(format!("connection error: {e}")),
            Err(ReadError::Malformed(m)) => PeerState::Malformed(m),
        };
        if let Some(poll) = poll {
            let _ = poll.registry().deregister(&mut peer.stream);
        }
        if end != PeerState::Closed && lost.is_none() {
            *lost = Some((r, end.clone()));
        }
        peer.state = end;
        true
    }

    /// Whether a wait for `r`'s messages may poll by reading `r`'s link
    /// alone: this rank has sent `r` something since the link last
    /// delivered (an answer is awaited: a round trip, which a read per look
    /// shortens), the link is open, has nothing waiting to be written (which
    /// only the poll's writable events would flush), nobody is placing its
    /// payload, and no link waits to be resumed.
    ///
    /// A stream's receiver, which sends nothing back, polls instead: reads
    /// that find nothing lock the socket, and the sender's segments that
    /// arrive meanwhile are then processed late, by the reader (measured
    /// here: 4 KiB streams 7% slower reading directly).
    fn reads_directly(&self, r: Rank) -> bool {
        self.paused.is_empty()
            && self.placing != Some(r)
            && self
                .peers
                .get(r)
                .and_then(Option::as_ref)
                .is_some_and(|peer| {
                    peer.next_seq != peer.read_at_seq
                        && peer.state == PeerState::Open
                        && peer.out.is_empty()
                        && peer.reader.paused().is_none()
                })
    }

    /// Writes as much of `r`'s outgoing FIFO as the socket takes.
    fn flush_peer(&mut self, r: Rank) {
        let Some(peer) = self.peers.get_mut(r).and_then(Option::as_mut) else {
            return;
        };
        while !peer.out.is_empty() {
            let mut iov = IoVecs::new();
            for f in peer.out.iter().take(MAX_GATHER) {
                f.gather(&mut iov);
            }
            let n = match peer.stream.write_vectored(iov.as_slice()) {
                Ok(n) => n,
                Err(e) if would_block(&e) => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    Self::fail_peer(peer, &mut self.lost, r, format!("connection error: {e}"));
                    return;
                }
            };
            let mut n = n;
            while n > 0 {
                let Some(front) = peer.out.front_mut() else {
                    break;
                };
                let left = front.total() - front.written;
                if n >= left {
                    n -= left;
                    peer.done_seq = front.seq + 1;
                    peer.out.pop_front();
                } else {
                    front.written += n;
                    n = 0;
                }
            }
        }
    }

    fn fail_peer(peer: &mut Peer, lost: &mut Option<(Rank, PeerState)>, r: Rank, why: String) {
        if matches!(peer.state, PeerState::Open | PeerState::SaidGoodbye) {
            peer.state = PeerState::Lost(why);
            if lost.is_none() {
                *lost = Some((r, peer.state.clone()));
            }
        }
    }

    /// While parked, or polling and finding nothing, at most once per
    /// [`Liveness::interval`]: fails every open link that has had data
    /// unacknowledged, and no acknowledgement at all, for `MTTL_LINK_TIMEOUT`
    /// (see [`liveness`]).
    fn check_links(&mut self) {
        if !self.liveness.due(Instant::now()) {
            return;
        }
        let limit = self.liveness.limit();
        for (r, slot) in self.peers.iter_mut().enumerate() {
            let Some(peer) = slot.as_mut().filter(|p| p.state == PeerState::Open) else {
                continue;
            };
            // A link the kernel cannot describe is left to fail by itself.
            let Ok(Some(silent)) = liveness::unanswered_for(peer.stream.as_raw_fd()) else {
                continue;
            };
            if silent >= limit {
                let why = format!(
                    "its host has acknowledged nothing sent to it for {} s \
                     (MTTL_LINK_TIMEOUT is {} s): it is down or cut off from this one",
                    silent.as_secs(),
                    limit.as_secs()
                );
                Self::fail_peer(peer, &mut self.lost, r, why);
            }
        }
    }

    fn io_error(&self, op: Op, e: io::Error) -> CommError {
        self.error(op, ErrorKind::Io(e))
    }

    /// Spins, then parks, until `ready` says stop or `timeout` passes.
    /// Returns false on timeout.
    ///
    /// The spin lasts `MTTL_SPIN_US` from the last time a link was ready,
    /// not from the start of the wait: a message arriving in many pieces
    /// (a large one, or many small ones that are not the one awaited) keeps
    /// the rank spinning, so a stream never pays a wake-up per piece, while
    /// a rank with nothing arriving still parks after the spin.
    ///
    /// A wait for the messages of one link (`watch`) spins by reading that
    /// link alone, one system call per look, and polls every link only once
    /// per [`POLLS_PER_ROUND`] looks: a message then costs its read only, not
    /// a poll that reports it and then the read. Once per round too, the
    /// clock is read and other processes are offered the core.
    fn wait_until(
        &mut self,
        op: Op,
        timeout: Option<Duration>,
        watch: Option<Rank>,
        mut ready: impl FnMut(&mut Self) -> Result<bool, CommError>,
    ) -> Result<bool, CommError> {
        if ready(self)? {
            return Ok(true);
        }
        let start = Instant::now();
        let mut active = start;
        let mut spinning = true;
        // Whether a link was ready since the clock was last read.
        let mut was_ready = false;
        let mut looks: u32 = 0;
        loop {
            let wait = if spinning {
                Some(Duration::ZERO)
            } else {
                timeout.map(|t| t.saturating_sub(start.elapsed()))
            };
            if self.poll.is_none() && wait.is_none() {
                return Err(self.error(
                    op,
                    ErrorKind::PeerLost {
                        peer: self.rank,
                        detail: "this job has one rank and nothing was sent to it: \
                                 the receive could never complete"
                            .into(),
                    },
                ));
            }
            looks = looks.wrapping_add(1);
            let round_done = looks % POLLS_PER_ROUND == 0;
            let ready_links = match watch {
                Some(r) if spinning && !round_done && self.reads_directly(r) => {
                    usize::from(self.read_peer(r, false))
                }
                _ if spinning => self.progress(wait).map_err(|e| self.io_error(op, e))?,
                _ => {
                    // Parked: wake for the next look at the links too.
                    let wait = self.liveness.cap(wait, Instant::now());
                    let ready_links = self
                        .progress(Some(wait))
                        .map_err(|e| self.io_error(op, e))?;
                    self.check_links();
                    ready_links
                }
            };
            if ready(self)? {
                return Ok(true);
            }
            was_ready |= ready_links > 0;
            // A timeout ends the wait, but only after one look at the
            // sockets; a zero one after exactly one.
            if spinning && !round_done && timeout != Some(Duration::ZERO) {
                continue;
            }
            let now = Instant::now();
            if timeout.is_some_and(|t| now - start >= t) {
                return Ok(false);
            }
            if was_ready {
                active = now;
                was_ready = false;
            }
            spinning = now - active < self.spin;
            // Spinning idly: let another process have the core if one wants
            // it (ranks oversubscribing the cores); returns at once when
            // none does.
            if spinning && ready_links == 0 {
                std::thread::yield_now();
            }
        }
    }

    fn take_lost(&self, op: Op) -> Result<(), CommError> {
        match &self.lost {
            Some((r, state)) => Err(self.state_error(op, *r, state)),
            None => Ok(()),
        }
    }

    /// Whether any peer could still send us something.
    fn anyone_left(&self) -> bool {
        self.peers
            .iter()
            .flatten()
            .any(|p| p.state == PeerState::Open)
    }

    /// Writes `data` to `dest` directly from the caller's buffer, waiting
    /// (and reading meanwhile) for socket space: spinning while the socket
    /// takes bytes or a link was ready within `MTTL_SPIN_US`, as
    /// [`wait_until`](Self::wait_until) does, then parked in the kernel.
    fn write_direct(
        &mut self,
        op: Op,
        dest: Rank,
        header: &[u8; HEADER_LEN],
        data: &[u8],
    ) -> Result<(), CommError> {
        let total = HEADER_LEN + data.len();
        let mut written = 0;
        let mut active = Instant::now();
        loop {
            let peer = self.open_peer(op, dest)?;
            let mut iov = IoVecs::new();
            push_unwritten(header, data, written, &mut iov);
            match peer.stream.write_vectored(iov.as_slice()) {
                Ok(n) => {
                    written += n;
                    if written == total {
                        peer.next_seq += 1;
                        peer.done_seq = peer.next_seq;
                        return Ok(());
                    }
                    active = Instant::now();
                }
                Err(e) if would_block(&e) => {
                    // Wait for space, reading all links meanwhile.
                    let spinning = active.elapsed() < self.spin;
                    if !spinning {
                        self.check_links();
                    }
                    let wait = if spinning {
                        Duration::ZERO
                    } else {
                        Duration::from_millis(100)
                    };
                    let ready_links = self
                        .progress(Some(wait))
                        .map_err(|e| self.io_error(op, e))?;
                    if ready_links > 0 {
                        active = Instant::now();
                    } else if spinning {
                        // As in `wait_until`.
                        std::thread::yield_now();
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => {
                    let peer = self.peers[dest]
                        .as_mut()
                        .expect("open_peer checked the link");
                    Self::fail_peer(peer, &mut self.lost, dest, format!("connection error: {e}"));
                    let state = self.peers[dest].as_ref().map(|p| p.state.clone());
                    return Err(self.state_error(op, dest, &state.unwrap_or(PeerState::Open)));
                }
            }
        }
    }
}

impl TcpComm {
    /// `send`, of a bulk frame if `bulk` (see `frame`).
    fn send_frame(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: &[u8],
        bulk: bool,
    ) -> Result<(), CommError> {
        let op = Op::Send(dest);
        self.check_rank(op, dest)?;
        self.check_len(op, data.len())?;
        if dest == self.rank {
            self.incoming.push_back(Message {
                source: dest,
                tag,
                data: data.to_vec(),
            });
            return Ok(());
        }
        // Keep call order: earlier non-blocking sends go first.
        if !self.open_peer(op, dest)?.out.is_empty() {
            self.flush_peer(dest);
            self.wait_until(op, None, None, |c| {
                Ok(c.open_peer(op, dest)?.out.is_empty())
            })?;
        }
        let header = Header::data(tag, data.len(), bulk).encode();
        self.write_direct(op, dest, &header, data)
    }

    /// `nsend`, of a bulk frame if `bulk` (see `frame`).
    fn nsend_frame(
        &mut self,
        dest: Rank,
        tag: Tag,
        data: Vec<u8>,
        bulk: bool,
    ) -> Result<SendHandle, CommError> {
        let op = Op::Nsend(dest);
        self.check_rank(op, dest)?;
        self.check_len(op, data.len())?;
        if dest == self.rank {
            self.self_seq += 1;
            self.incoming.push_back(Message {
                source: dest,
                tag,
                data,
            });
            return Ok(SendHandle {
                dest,
                seq: self.self_seq,
            });
        }
        let header = Header::data(tag, data.len(), bulk).encode();
        let peer = self.open_peer(op, dest)?;
        let seq = peer.next_seq;
        peer.next_seq += 1;
        let was_empty = peer.out.is_empty();
        peer.out.push_back(OutFrame {
            header,
            body: data,
            written: 0,
            seq,
        });
        if was_empty {
            self.flush_peer(dest);
        }
        Ok(SendHandle { dest, seq })
    }
}

impl Comm for TcpComm {
    fn init() -> Result<Self, CommError> {
        match Launch::from_env()? {
            Launch::Tcp(launch) => TcpComm::connect(&launch),
            Launch::Single => TcpComm::single(),
            Launch::Mpi => Err(CommError::new(
                None,
                Op::Init,
                ErrorKind::Environment(
                    "the launch environment asks for the MPI backend, not TCP".into(),
                ),
            )),
        }
    }

    fn rank(&self) -> Rank {
        self.rank
    }

    fn size(&self) -> usize {
        self.size
    }

    fn backend_name(&self) -> &'static str {
        "tcp"
    }

    fn max_message_len(&self) -> usize {
        self.max_len
    }

    fn finish(mut self) -> Result<(), CommError> {
        let op = Op::Finish;
        // 1. Flush every outgoing FIFO.
        let flushed = self.wait_until(op, Some(FINISH_TIMEOUT), None, |c| {
            Ok(c.peers.iter().flatten().all(|p| {
                p.out.is_empty() || !matches!(p.state, PeerState::Open | PeerState::SaidGoodbye)
            }))
        })?;
        // 2. Say goodbye and half-close.
        let bye = Header {
            kind: FrameKind::Goodbye,
            tag: 0,
            len: 0,
            bulk: false,
        }
        .encode();
        for r in 0..self.size {
            let open = matches!(
                self.peers[r].as_ref().map(|p| &p.state),
                Some(PeerState::Open | PeerState::SaidGoodbye)
            );
            if open {
                // A peer that is gone cannot be told; that is not our error.
                let _ = self.write_direct(op, r, &bye, &[]);
                if let Some(p) = &self.peers[r] {
                    let _ = p.stream.shutdown(std::net::Shutdown::Write);
                }
            }
        }
        // 3. Read until every peer has said goodbye and closed.
        let before = self.incoming.len();
        let all_closed = self.wait_until(op, Some(FINISH_TIMEOUT), None, |c| {
            Ok(c.peers
                .iter()
                .flatten()
                .all(|p| !matches!(p.state, PeerState::Open | PeerState::SaidGoodbye)))
        })?;
        let late = self.incoming.len() - before;
        if late > 0 {
            eprintln!(
                "mttl: rank {}: finish: discarded {late} message(s) that arrived after finish was called",
                self.rank
            );
        }
        if let Some(g) = &mut self.guard {
            g.stop();
        }
        if !flushed || !all_closed {
            let waiting: Vec<Rank> = (0..self.size)
                .filter(|&r| {
                    matches!(
                        self.peers[r].as_ref().map(|p| &p.state),
                        Some(PeerState::Open | PeerState::SaidGoodbye)
                    )
                })
                .collect();
            return Err(self.error(
                op,
                ErrorKind::PeerLost {
                    peer: waiting.first().copied().unwrap_or(self.rank),
                    detail: format!(
                        "ranks {waiting:?} did not finish within {} s",
                        FINISH_TIMEOUT.as_secs()
                    ),
                },
            ));
        }
        Ok(())
    }

    fn holds_received(&self) -> bool {
        !self.incoming.is_empty()
    }

    fn probe(&mut self) -> Result<Option<Envelope>, CommError> {
        if self.incoming.is_empty() {
            self.progress(Some(Duration::ZERO))
                .map_err(|e| self.io_error(Op::Probe, e))?;
        }
        // As in `recv_any`: messages already received go before a loss.
        if self.incoming.is_empty() {
            self.take_lost(Op::Probe)?;
        }
        Ok(self.incoming.front().map(Message::envelope))
    }

    fn send(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send_frame(dest, tag, data, false)
    }

    /// As `send`, flagged bulk: the receiver's reader stops at a large
    /// payload for `recv_from_into` to take in place.
    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send_frame(dest, tag, data, true)
    }

    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_frame(dest, tag, data, false)
    }

    /// As `nsend`, flagged bulk (see `send_bulk`).
    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_frame(dest, tag, data, true)
    }

    fn send_done(&mut self, handle: SendHandle) -> Result<bool, CommError> {
        let op = Op::SendDone(handle.dest);
        self.check_rank(op, handle.dest)?;
        if handle.dest == self.rank {
            return Ok(true);
        }
        let done = |c: &Self| {
            c.peers[handle.dest]
                .as_ref()
                .is_some_and(|p| handle.seq < p.done_seq)
        };
        if done(self) {
            return Ok(true);
        }
        self.progress(Some(Duration::ZERO))
            .map_err(|e| self.io_error(op, e))?;
        if done(self) {
            return Ok(true);
        }
        if let Some(p) = &self.peers[handle.dest] {
            if matches!(p.state, PeerState::Lost(_) | PeerState::Malformed(_)) {
                return Err(self.state_error(op, handle.dest, &p.state.clone()));
            }
        }
        Ok(false)
    }

    fn recv_from(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
    ) -> Result<Option<Message>, CommError> {
        let op = Op::RecvFrom(source);
        self.check_rank(op, source)?;
        let mut found = None;
        self.wait_until(op, timeout, Some(source), |c| {
            if let Some(i) = c.incoming.iter().position(|m| m.source == source) {
                found = c.incoming.remove(i);
                return Ok(true);
            }
            if source != c.rank {
                if let Some(p) = &c.peers[source] {
                    if p.state != PeerState::Open {
                        return Err(c.state_error(op, source, &p.state.clone()));
                    }
                }
            }
            Ok(false)
        })?;
        Ok(found)
    }

    /// The next message from `source`, as `recv_from` waits for it; if it
    /// is a large payload that its link's reader stopped at (see `frame`),
    /// and `accept` takes it, it is read from the socket straight into
    /// `buf`. Anything else is received and copied as the provided version
    /// does.
    fn recv_from_into(
        &mut self,
        source: Rank,
        timeout: Option<Duration>,
        buf: &mut [u8],
        accept: &dyn Fn(&Envelope) -> bool,
    ) -> Result<Option<Received>, CommError> {
        let op = Op::RecvFrom(source);
        self.check_rank(op, source)?;
        let mut found = None;
        let mut placing: Option<Envelope> = None;
        let mut filled = 0;
        let mut failed = None;
        let waited = self.wait_until(op, timeout, Some(source), |c| {
            if placing.is_none() {
                if let Some(i) = c.incoming.iter().position(|m| m.source == source) {
                    found = c.incoming.remove(i);
                    return Ok(true);
                }
                let Some(peer) = c.peers.get(source).and_then(Option::as_ref) else {
                    // This rank itself: what it sends itself is in `incoming`.
                    return Ok(false);
                };
                if peer.state != PeerState::Open {
                    return Err(c.state_error(op, source, &peer.state.clone()));
                }
                let Some(header) = peer.reader.paused() else {
                    return Ok(false);
                };
                let envelope = Envelope {
                    source,
                    tag: header.tag,
                    len: header.len,
                };
                if envelope.len > buf.len() || !accept(&envelope) {
                    // Not for `buf`: the next look reads it into a vector.
                    return Ok(false);
                }
                placing = Some(envelope);
                c.placing = Some(source);
            }
            let Some(peer) = c.peers[source].as_mut() else {
                return Ok(false);
            };
            match peer
                .reader
                .read_paused_from_socket(&mut peer.stream, buf, &mut filled)
            {
                Ok(done) => Ok(done),
                Err(e) => {
                    failed = Some(e);
                    Ok(true)
                }
            }
        });
        self.placing = None;
        if let Some(m) = found {
            return Ok(Some(Received::place_or_own(m, buf, accept)));
        }
        let Some(envelope) = placing else {
            // Out of time, or an error, before anything was placed.
            return waited.map(|_| None);
        };
        if let (Ok(true), None) = (&waited, &failed) {
            // The payload's last read may have left the next frames unread,
            // which no readiness edge would report.
            self.read_peer(source, false);
            return Ok(Some(Received::Placed(envelope)));
        }
        // Out of time, or the link failed, in the middle of the payload:
        // what was placed goes back into a vector of its own and reading
        // goes on as usual, so nothing is lost, and a failed link meets
        // its error again and records it.
        if let Some(peer) = self.peers[source].as_mut() {
            if let Err(ReadError::Malformed(why)) = peer.reader.unpause(&buf[..filled]) {
                Self::fail_peer(peer, &mut self.lost, source, why);
            }
        }
        self.read_peer(source, failed.is_some());
        waited?;
        match (failed, &self.peers[source]) {
            (None, _) => Ok(None),
            (Some(_), Some(p)) if p.state != PeerState::Open => {
                Err(self.state_error(op, source, &p.state.clone()))
            }
            (Some(e), _) => Err(self.error(
                op,
                ErrorKind::PeerLost {
                    peer: source,
                    detail: format!("reading a message in place: {e:?}"),
                },
            )),
        }
    }

    fn recv_any(&mut self, timeout: Option<Duration>) -> Result<Option<Message>, CommError> {
        let op = Op::RecvAny;
        let mut found = None;
        // With one peer, the only link to watch is its.
        let watch = (self.size == 2).then(|| 1 - self.rank);
        self.wait_until(op, timeout, watch, |c| {
            // Messages already received go first: a rank's last messages
            // before it died (an abort naming the cause) are not lost.
            if let Some(m) = c.incoming.pop_front() {
                found = Some(m);
                return Ok(true);
            }
            c.take_lost(op)?;
            if c.size > 1 && !c.anyone_left() {
                return Err(c.error(
                    op,
                    ErrorKind::PeerLost {
                        peer: c.rank,
                        detail: "every other rank has finished: nothing can arrive".into(),
                    },
                ));
            }
            Ok(false)
        })?;
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks join in this process; every link probes its peer when
    /// silent, as `MTTL_LINK_TIMEOUT` (25 s by default) asks.
    #[test]
    fn links_probe_a_silent_peer() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let launch = move |rank| TcpLaunch {
            rank,
            size: 2,
            root: format!("127.0.0.1:{port}"),
            secret: [7; crate::env::SECRET_LEN],
            bind_any: false,
        };
        let other = std::thread::spawn(move || TcpComm::connect(&launch(1)));
        let comm = TcpComm::connect(&launch(0)).expect("rank 0 joins");
        let other = other.join().expect("rank 1 ran").expect("rank 1 joins");
        for (c, peer) in [(&comm, 1), (&other, 0)] {
            let link = &c.peers[peer].as_ref().expect("a link to the peer").stream;
            let sock = socket2::SockRef::from(link);
            assert!(sock.keepalive().expect("SO_KEEPALIVE"));
            assert_eq!(sock.tcp_keepalive_time().unwrap(), Duration::from_secs(10));
            assert_eq!(
                sock.tcp_keepalive_interval().unwrap(),
                Duration::from_secs(5)
            );
            assert_eq!(sock.tcp_keepalive_retries().unwrap(), 3);
        }
        let finish = std::thread::spawn(move || other.finish());
        comm.finish().expect("rank 0 finishes");
        finish.join().expect("rank 1 ran").expect("rank 1 finishes");
    }
}
