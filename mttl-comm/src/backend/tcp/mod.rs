//! The TCP backend: authenticated TCP links between the ranks that talk,
//! made when first needed, driven by non-blocking sockets from the calling
//! thread.
//!
//! Algorithm:
//!
//! - **Bootstrap** ([`bootstrap`]): rendezvous at rank 0, which gives every
//!   rank the table of every rank's listening address and keeps a link to
//!   each. Every other link is made on the first send between its two
//!   ranks, or the first receive ([`links`]): start-up costs N − 1
//!   connections, not N(N − 1)/2, and a rank holds a socket per partner.
//!   Every link is authenticated with the job secret ([`auth`]). A
//!   background thread runs the rendezvous on tokio, then makes the links
//!   asked for and admits the ranks that connect, settling two ranks that
//!   connect to each other at once on one link (the lower rank's), and
//!   refuses strangers (logged; their bytes are never parsed as frames).
//! - **Data path**: the links are non-blocking sockets registered with one
//!   `mio::Poll` owned by the rank's communicating thread. There is no
//!   thread hop on the hot path: a send writes straight into the kernel from
//!   the caller (one `writev` of header and payload), and a receive drains
//!   whichever sockets the poll reports readable, turning their bytes into
//!   messages ([`frame`]) queued in arrival order. (Passing every message
//!   through a tokio task on another thread would cost two cross-thread
//!   wake-ups per message, each far dearer than the message itself.)
//! - **Waiting** ([`progress`]): a blocked receive, or a send waiting for socket space,
//!   spins on zero-timeout polls until `MTTL_SPIN_US` have passed with no
//!   link ready (a busy rank, or one in the middle of a stream, never pays
//!   a wake-up), then parks in the kernel until a socket is ready or its
//!   timeout passes (an idle rank uses no CPU). A receive awaiting the
//!   answer to what it sent spins by reading the answering link itself,
//!   polling every link once per few looks: the answer then costs one
//!   system call, not a poll and a read.
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
//! - **Ordering** ([`sends`]): each link has one FIFO of outgoing frames; `send` waits
//!   for that FIFO to drain before writing, so per-pair order is call order.
//!   While a send waits for socket space it keeps reading all links, so two
//!   ranks sending each other large messages cannot deadlock.
//! - **Leaving** ([`Comm::finish`]): flush everything, send a goodbye frame
//!   on every link, half-close, then read until every linked peer has said
//!   goodbye too (a link made meanwhile gets its goodbye at once; a rank
//!   that connects after this rank finished is refused, and told so). A
//!   link that ends *without* a goodbye is a lost peer: once the
//!   messages already received are taken (per-pair order: what a rank sent
//!   before it died still arrives), `probe` and `recv_any` report it at once
//!   (fail fast rather than hang), and any operation addressed to that peer
//!   fails. A peer host that vanishes without closing anything is found
//!   within `MTTL_LINK_TIMEOUT` (25 s) by looks at each link's `TCP_INFO`
//!   from waits and polls that find nothing: no answer to keepalive probes
//!   on an idle link (their idle times drawn per link, so that the links
//!   of hundreds of ranks never probe together), no acknowledgement of data
//!   sent ([`liveness`]). A few lost probes never fail a link, and a peer
//!   on this rank's own host is not watched at all: its kernel is this
//!   one, which closes the link if the peer's process ends.
//! - **Open files** ([`files`]): a rank holds a socket per partner, but
//!   rank 0 links to all and any rank may come to, so each rank checks its
//!   `RLIMIT_NOFILE` against a link per rank before connecting, raises the
//!   soft limit up to the hard one if that is enough, and otherwise fails
//!   at once naming the need (as `mttlrun` does for the whole job before
//!   starting it).
//!
//! What lazy links cost: a pair's first message waits for a connection and
//! a handshake (two round trips and an HMAC each way, well under a
//! millisecond on one host), once per pair per job. A receive from a rank
//! with no link asks for one (so a finished or dead peer is seen, as it is
//! on a link), and a `recv_any` whose linked peers have all finished links
//! to the rest for the same reason.

mod auth;
mod bootstrap;
pub(crate) mod files;
mod frame;
#[doc(hidden)]
pub mod fuzzing;
mod links;
mod liveness;
mod progress;
mod sends;
mod socket;
#[cfg(test)]
mod test_deadline;

use std::collections::VecDeque;
use std::io;
use std::time::Duration;

use mio::net::TcpStream;
use mio::{Events, Poll, Waker};

use self::frame::{FrameReader, Header, ReadError};
use self::links::Dial;
use self::liveness::Liveness;
use self::sends::OutFrame;
use crate::comm::{Comm, Envelope, Message, Rank, Received, SendHandle, Tag};
use crate::env::{self, Launch, TcpLaunch};
use crate::error::{CommError, ErrorKind, Op};
use crate::tuning::CommTuning;

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
    /// `peers[r]`: the link to rank `r`, `None` for this rank and for a
    /// rank with no link yet (`links`).
    peers: Vec<Option<Peer>>,
    /// Where making a link stands, for each rank with none (`links`).
    dials: Vec<Dial>,
    /// How long a send waits for a link (`MTTL_CONNECT_TIMEOUT`).
    connect_timeout: Duration,
    /// The send buffer each link asks for (`MTTL_TCP_SNDBUF`).
    send_buffer: Option<usize>,
    /// Set once `finish` has said goodbye: a link made later gets one at
    /// once.
    finishing: bool,
    incoming: VecDeque<Message>,
    /// The first peer lost without a goodbye: reported by probe/recv_any.
    lost: Option<(Rank, PeerState)>,
    /// Links whose reader stopped at a large payload (see `recv_from_into`).
    paused: Vec<Rank>,
    /// The link whose paused payload `recv_from_into` is reading in place.
    placing: Option<Rank>,
    /// Set while a blocking send waits (see
    /// `sends::HELD_WHILE_SENDING`).
    sending: bool,
    /// Set by a blocking send that wrote nothing for its allowed stall:
    /// the next look reads on past one large payload per held link.
    stalled: bool,
    /// Set by `progress` for its look: links stopped at a large payload
    /// stay stopped, since a blocking send waits and enough is held.
    hold_paused: bool,
    self_seq: u64,
    guard: Option<bootstrap::Guard>,
    /// Finds peer hosts that vanished (`liveness`).
    liveness: Liveness,
    /// Polls that found nothing ready (`progress::EMPTY_POLLS_PER_LOOK`).
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
    /// Whether the peer is on another host, whose vanishing `liveness`
    /// watches for.
    watched: bool,
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

impl TcpComm {
    /// A job of one rank: no network, only self-sends.
    pub fn single() -> Result<Self, CommError> {
        Self::with_links(0, 1, None, Vec::new(), None)
    }

    /// Joins the job described by `launch`: the rendezvous, after which
    /// links are made when first needed.
    pub fn connect(launch: &TcpLaunch) -> Result<Self, CommError> {
        if launch.size == 1 {
            return Self::single();
        }
        let err = |kind| CommError::new(Some(launch.rank), Op::Init, kind);
        super::malloc::keep_freed_memory();
        files::ensure(launch.size).map_err(|e| err(ErrorKind::Environment(e)))?;
        let timeout = env::connect_timeout()?;
        let poll = Poll::new().map_err(|e| err(ErrorKind::Io(e)))?;
        let waker = Waker::new(poll.registry(), links::WAKE).map_err(|e| err(ErrorKind::Io(e)))?;
        let (links, guard) =
            bootstrap::join(launch, timeout, waker).map_err(|e| err(ErrorKind::Bootstrap(e)))?;
        Self::with_links(launch.rank, launch.size, Some(poll), links, Some(guard))
    }

    /// The rank with the links it has at start-up, `poll` being the one
    /// the link thread's waker wakes (a job of more than one rank).
    fn with_links(
        rank: Rank,
        size: usize,
        poll: Option<Poll>,
        links: bootstrap::Links,
        guard: Option<bootstrap::Guard>,
    ) -> Result<Self, CommError> {
        let mut comm = TcpComm {
            rank,
            size,
            max_len: env::max_message()?,
            spin: env::spin_time()?,
            poll,
            events: Events::with_capacity(64),
            peers: (0..size).map(|_| None).collect(),
            dials: vec![Dial::Idle; size],
            connect_timeout: env::connect_timeout()?,
            send_buffer: env::tcp_send_buffer()?,
            finishing: false,
            incoming: VecDeque::new(),
            lost: None,
            paused: Vec::new(),
            placing: None,
            sending: false,
            stalled: false,
            hold_paused: false,
            self_seq: 0,
            guard,
            liveness: Liveness::new(env::link_timeout()?),
            empty_polls: 0,
        };
        for (r, link) in links.into_iter().enumerate() {
            if let Some(link) = link {
                comm.install_link(r, link).map_err(|why| {
                    comm.error(
                        Op::Init,
                        ErrorKind::Bootstrap(format!("the link to rank {r}: {why}")),
                    )
                })?;
            }
        }
        Ok(comm)
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

    /// The peer `dest`, if it has a link that can still be sent on.
    fn open_peer(&mut self, op: Op, dest: Rank) -> Result<&mut Peer, CommError> {
        self.dial_failure(op, dest)?;
        let state = match &self.peers[dest] {
            Some(p) if p.state == PeerState::Open => None,
            Some(p) => Some(p.state.clone()),
            None => Some(PeerState::Lost("no link to it was made".into())),
        };
        if let Some(s) = state {
            return Err(self.state_error(op, dest, &s));
        }
        match &mut self.peers[dest] {
            Some(p) => Ok(p),
            None => unreachable!("checked above"),
        }
    }

    fn io_error(&self, op: Op, e: io::Error) -> CommError {
        self.error(op, ErrorKind::Io(e))
    }
}

impl Comm for TcpComm {
    fn init() -> Result<Self, CommError> {
        match Launch::from_env()? {
            Launch::Tcp(launch) => TcpComm::connect(&launch),
            Launch::Single => TcpComm::single(),
            Launch::Mpi | Launch::Local => Err(CommError::new(
                None,
                Op::Init,
                ErrorKind::Environment(
                    "the launch environment asks for another backend than TCP".into(),
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

    /// The goodbye protocol, on the links this rank has (a peer it never
    /// linked to has nothing in flight to it, and learns it finished when
    /// a link to it is refused):
    ///
    /// 1. Flush every outgoing FIFO.
    /// 2. Say goodbye and half-close on every link; a link made to this
    ///    rank from now on gets its goodbye at once (`links`, rule 5).
    /// 3. Read until every linked peer has said goodbye and closed, and no
    ///    link this rank asked for is still on its way.
    /// 4. Stop the link thread (later connections are refused by the
    ///    kernel), take the links it made before it stopped, and read on
    ///    until they close too.
    fn finish(mut self) -> Result<(), CommError> {
        let op = Op::Finish;
        // 1.
        let flushed = self.wait_until(op, Some(FINISH_TIMEOUT), None, |c| {
            Ok(c.peers.iter().flatten().all(|p| {
                p.out.is_empty() || !matches!(p.state, PeerState::Open | PeerState::SaidGoodbye)
            }))
        })?;
        // 2.
        let linked: Vec<Rank> = (0..self.size)
            .filter(|&r| {
                matches!(
                    self.peers[r].as_ref().map(|p| &p.state),
                    Some(PeerState::Open | PeerState::SaidGoodbye)
                )
            })
            .collect();
        self.finishing = true;
        let bye = Header::goodbye().encode();
        for r in linked {
            // A peer that is gone cannot be told; that is not our error.
            let _ = self.write_direct(op, r, &bye, &[]);
            if let Some(p) = &self.peers[r] {
                let _ = p.stream.shutdown(std::net::Shutdown::Write);
            }
        }
        // 3.
        let before = self.incoming.len();
        let all_closed = |c: &mut Self| {
            Ok(c.peers
                .iter()
                .flatten()
                .all(|p| !matches!(p.state, PeerState::Open | PeerState::SaidGoodbye)))
        };
        let mut closed = self.wait_until(op, Some(FINISH_TIMEOUT), None, |c| {
            Ok(all_closed(c)? && !c.links_on_their_way())
        })?;
        // 4.
        if let Some(g) = &mut self.guard {
            g.stop();
        }
        if self.take_links() > 0 {
            closed = self.wait_until(op, Some(FINISH_TIMEOUT), None, all_closed)?;
        }
        let late = self.incoming.len() - before;
        if late > 0 {
            eprintln!(
                "mttl: rank {}: finish: discarded {late} message(s) that arrived after finish was called",
                self.rank
            );
        }
        if !flushed || !closed {
            let waiting: Vec<Rank> = (0..self.size)
                .filter(|&r| {
                    matches!(
                        self.peers[r].as_ref().map(|p| &p.state),
                        Some(PeerState::Open | PeerState::SaidGoodbye)
                    ) || (self.peers[r].is_none() && self.dials[r] == Dial::Asked)
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

    fn nsend(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_frame(dest, tag, data, false)
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
                match &c.peers[source] {
                    Some(p) if p.state != PeerState::Open => {
                        return Err(c.state_error(op, source, &p.state.clone()));
                    }
                    Some(_) => {}
                    None => {
                        // `links`, rule 2.
                        c.ask_link(source);
                        c.dial_failure(op, source)?;
                    }
                }
            }
            Ok(false)
        })?;
        Ok(found)
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
            if c.size > 1 && !c.anyone_linked_left() {
                // Only peers with no link could still send: link to them,
                // so that those that have finished (refusing the link) or
                // finish (saying goodbye on it) are known, instead of
                // waiting for them for ever.
                for r in 0..c.size {
                    c.ask_link(r);
                }
            }
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

impl CommTuning for TcpComm {
    fn holds_received(&mut self) -> bool {
        !self.incoming.is_empty()
    }

    /// As `send`, flagged bulk: the receiver's reader stops at a large
    /// payload for `recv_from_into` to take in place.
    fn send_bulk(&mut self, dest: Rank, tag: Tag, data: &[u8]) -> Result<(), CommError> {
        self.send_frame(dest, tag, data, true)
    }

    /// As `nsend`, flagged bulk (see `send_bulk`).
    fn nsend_bulk(&mut self, dest: Rank, tag: Tag, data: Vec<u8>) -> Result<SendHandle, CommError> {
        self.nsend_frame(dest, tag, data, true)
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
                    // This rank itself (what it sends itself is in
                    // `incoming`), or a peer with no link yet (`links`,
                    // rule 2).
                    c.ask_link(source);
                    c.dial_failure(op, source)?;
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
}

/// Two ranks of a job of two, joined in this process over loopback (for
/// tests).
#[cfg(test)]
fn two_ranks_in_this_process() -> (TcpComm, TcpComm) {
    let mut ranks = ranks_in_this_process(2);
    let other = ranks.pop().expect("rank 1");
    (ranks.pop().expect("rank 0"), other)
}

/// The `size` ranks of a job, joined in this process over loopback, in
/// rank order (for tests).
#[cfg(test)]
fn ranks_in_this_process(size: usize) -> Vec<TcpComm> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let launch = move |rank| TcpLaunch {
        rank,
        size,
        root: format!("127.0.0.1:{port}"),
        secret: [3; crate::env::SECRET_LEN],
        bind_any: false,
    };
    let others: Vec<_> = (1..size)
        .map(|r| std::thread::spawn(move || TcpComm::connect(&launch(r))))
        .collect();
    let mut ranks = vec![TcpComm::connect(&launch(0)).expect("rank 0 joins")];
    for (r, other) in others.into_iter().enumerate() {
        ranks.push(
            other
                .join()
                .expect("a rank ran")
                .unwrap_or_else(|e| panic!("rank {} joins: {e}", r + 1)),
        );
    }
    ranks
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two ranks join on one host: their links are not probed, its kernel
    /// being theirs (`liveness::same_host`).
    #[test]
    fn links_on_one_host_are_not_probed() {
        // Joining and finishing read frames: a reader stuck in a loop
        // fails the test rather than hanging it.
        test_deadline::within(
            "links_on_one_host_are_not_probed",
            Duration::from_secs(60),
            || {
                let (comm, other) = two_ranks_in_this_process();
                for (c, peer) in [(&comm, 1), (&other, 0)] {
                    let p = c.peers[peer].as_ref().expect("a link to the peer");
                    assert!(!p.watched);
                    let sock = socket2::SockRef::from(&p.stream);
                    assert!(!sock.keepalive().expect("SO_KEEPALIVE"));
                }
                let finish = std::thread::spawn(move || other.finish());
                comm.finish().expect("rank 0 finishes");
                finish.join().expect("rank 1 ran").expect("rank 1 finishes");
            },
        );
    }
}
