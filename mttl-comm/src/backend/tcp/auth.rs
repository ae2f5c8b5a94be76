//! Connection authentication: a challenge-response with the job secret.
//!
//! Every TCP connection of a job is authenticated before a single frame is
//! read from it. The secret never crosses the wire; each side proves it
//! knows the secret by a keyed MAC (HMAC-SHA-256) over both sides' fresh
//! random nonces and both ranks, so a recorded exchange cannot be replayed
//! or reflected.
//!
//! The protocol, connector C (higher rank) to acceptor A (lower rank):
//!
//! 1. C → A: `HELLO` magic, C's rank, C's nonce `nc` (32 random bytes).
//! 2. A → C: `HELLO` magic, A's rank, A's nonce `na`,
//!    `MAC(secret, "acceptor" ‖ C ‖ A ‖ nc ‖ na)`.
//! 3. C checks A's MAC (A belongs to the job), then C → A:
//!    `MAC(secret, "connector" ‖ C ‖ A ‖ nc ‖ na)`.
//! 4. A checks C's MAC and that it expects rank C, then A → C: one `ACCEPT`
//!    byte. Only now does either side treat the connection as a link. Or,
//!    if A is itself connecting to C at this moment and A's rank is the
//!    lower, one `CROSSED` byte: both connections are authentic, A's own
//!    becomes the pair's link and this one closes (links are made when
//!    first needed: see `bootstrap`).
//!
//! A connection that fails any step is closed; the acceptor logs it. This
//! authenticates connections; it does not encrypt or sign the frames that
//! follow (a job's network is assumed private against eavesdropping, not
//! against strangers connecting to its ports).

use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::comm::Rank;
use crate::env::SECRET_LEN;

type HmacSha256 = Hmac<Sha256>;

const HELLO: &[u8; 8] = b"MTTLHS1\0";
const NONCE_LEN: usize = 32;
const MAC_LEN: usize = 32;
const ACCEPT: u8 = 0xA5;
const CROSSED: u8 = 0x5A;

/// What an acceptor decides for a connector that proved itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Admission {
    /// The connection becomes the pair's link.
    Link,
    /// The acceptor is connecting to the connector too, and the link the
    /// lower rank makes wins: this connection closes, the other is the
    /// pair's link.
    Crossed,
}

/// How long an acceptor waits for a connector to complete the handshake.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

fn nonce() -> Result<[u8; NONCE_LEN], String> {
    let mut n = [0u8; NONCE_LEN];
    getrandom::getrandom(&mut n).map_err(|e| format!("no random numbers: {e}"))?;
    Ok(n)
}

fn mac(
    secret: &[u8; SECRET_LEN],
    label: &[u8],
    connector: Rank,
    acceptor: Rank,
    nc: &[u8; NONCE_LEN],
    na: &[u8; NONCE_LEN],
) -> HmacSha256 {
    // An HMAC key of any length is valid, so this cannot fail.
    let mut m = <HmacSha256 as Mac>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(label);
    m.update(&(connector as u64).to_le_bytes());
    m.update(&(acceptor as u64).to_le_bytes());
    m.update(nc);
    m.update(na);
    m
}

fn io_err(step: &str, e: std::io::Error) -> String {
    format!("{step}: {e}")
}

/// The connector's side: proves itself to the acceptor at the other end of
/// `stream`, which must be rank `expect`. Returns the acceptor's decision,
/// or an error sentence on failure.
pub(crate) async fn connect(
    stream: &mut TcpStream,
    secret: &[u8; SECRET_LEN],
    me: Rank,
    expect: Rank,
) -> Result<Admission, String> {
    let nc = nonce()?;
    let mut hello = Vec::with_capacity(HELLO.len() + 4 + NONCE_LEN);
    hello.extend_from_slice(HELLO);
    hello.extend_from_slice(&(me as u32).to_le_bytes());
    hello.extend_from_slice(&nc);
    stream
        .write_all(&hello)
        .await
        .map_err(|e| io_err("sending hello", e))?;

    let mut reply = [0u8; 8 + 4 + NONCE_LEN + MAC_LEN];
    stream.read_exact(&mut reply).await.map_err(|e| {
        io_err(
            "reading the acceptor's reply (wrong job, or not an mttl rank?)",
            e,
        )
    })?;
    if &reply[..8] != HELLO {
        return Err("the peer does not speak mttl's handshake".into());
    }
    let acceptor = u32::from_le_bytes([reply[8], reply[9], reply[10], reply[11]]) as Rank;
    if acceptor != expect {
        return Err(format!(
            "expected rank {expect}, but rank {acceptor} answered"
        ));
    }
    let mut na = [0u8; NONCE_LEN];
    na.copy_from_slice(&reply[12..12 + NONCE_LEN]);
    mac(secret, b"acceptor", me, acceptor, &nc, &na)
        .verify_slice(&reply[12 + NONCE_LEN..])
        .map_err(|_| {
            format!("rank {acceptor} failed authentication (a different job's secret: is another job using this address?)")
        })?;

    let proof = mac(secret, b"connector", me, acceptor, &nc, &na)
        .finalize()
        .into_bytes();
    stream
        .write_all(&proof)
        .await
        .map_err(|e| io_err("sending the proof", e))?;
    let mut ack = [0u8; 1];
    stream
        .read_exact(&mut ack)
        .await
        .map_err(|e| io_err("waiting for acceptance (rank refused us)", e))?;
    match ack[0] {
        ACCEPT => Ok(Admission::Link),
        CROSSED => Ok(Admission::Crossed),
        _ => Err(format!("rank {acceptor} refused the connection")),
    }
}

/// The acceptor's side: checks that the connector at the other end of
/// `stream` knows the secret; `admit` decides whether the proven rank is
/// one this acceptor expects, and whether its connection becomes a link.
/// Returns the connector's rank and that decision.
pub(crate) async fn accept(
    stream: &mut TcpStream,
    secret: &[u8; SECRET_LEN],
    me: Rank,
    admit: impl FnOnce(Rank) -> Result<Admission, String>,
) -> Result<(Rank, Admission), String> {
    let mut hello = [0u8; 8 + 4 + NONCE_LEN];
    stream
        .read_exact(&mut hello)
        .await
        .map_err(|e| io_err("reading hello", e))?;
    if &hello[..8] != HELLO {
        return Err("not an mttl handshake (bad hello)".into());
    }
    let connector = u32::from_le_bytes([hello[8], hello[9], hello[10], hello[11]]) as Rank;
    let mut nc = [0u8; NONCE_LEN];
    nc.copy_from_slice(&hello[12..]);
    let na = nonce()?;

    let mut reply = Vec::with_capacity(8 + 4 + NONCE_LEN + MAC_LEN);
    reply.extend_from_slice(HELLO);
    reply.extend_from_slice(&(me as u32).to_le_bytes());
    reply.extend_from_slice(&na);
    reply.extend_from_slice(
        &mac(secret, b"acceptor", connector, me, &nc, &na)
            .finalize()
            .into_bytes(),
    );
    stream
        .write_all(&reply)
        .await
        .map_err(|e| io_err("sending the challenge", e))?;

    let mut proof = [0u8; MAC_LEN];
    stream
        .read_exact(&mut proof)
        .await
        .map_err(|e| io_err("reading the proof", e))?;
    mac(secret, b"connector", connector, me, &nc, &na)
        .verify_slice(&proof)
        .map_err(|_| {
            format!("authentication failed (claimed rank {connector}, wrong job secret)")
        })?;
    let admission = admit(connector)?;
    let answer = match admission {
        Admission::Link => ACCEPT,
        Admission::Crossed => CROSSED,
    };
    stream
        .write_all(&[answer])
        .await
        .map_err(|e| io_err("sending acceptance", e))?;
    Ok((connector, admission))
}

#[cfg(test)]
mod tests {
    use std::future::Future;

    use super::*;
    use tokio::net::TcpListener;

    /// How long any one handshake test may take: every step is a loopback
    /// round trip, so running out means a side waits for something the
    /// other will never send.
    const DEADLINE: Duration = Duration::from_secs(10);

    /// Runs `test` to completion, failing it if it takes longer than
    /// [`DEADLINE`].
    fn run<T>(test: impl Future<Output = T>) -> T {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime")
            .block_on(async {
                tokio::time::timeout(DEADLINE, test)
                    .await
                    .unwrap_or_else(|_| {
                        panic!("the handshake test did not end within {DEADLINE:?}")
                    })
            })
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), a.unwrap().0)
    }

    /// Runs both sides of a handshake, each closing its end when it is done
    /// (as bootstrap does), so a side that gives up never leaves the other
    /// waiting.
    async fn handshake(
        connector: (Rank, [u8; SECRET_LEN], Rank),
        acceptor: (Rank, [u8; SECRET_LEN]),
        admit: impl FnOnce(Rank) -> Result<Admission, String>,
    ) -> (Result<Admission, String>, Result<(Rank, Admission), String>) {
        let (mut c, mut a) = pair().await;
        let (me, secret, expect) = connector;
        let (acceptor_rank, acceptor_secret) = acceptor;
        tokio::join!(
            async move { connect(&mut c, &secret, me, expect).await },
            async move { accept(&mut a, &acceptor_secret, acceptor_rank, admit).await }
        )
    }

    #[test]
    fn same_secret_is_accepted() {
        let s = [7u8; SECRET_LEN];
        let (rc, ra) = run(handshake((3, s, 1), (1, s), |_| Ok(Admission::Link)));
        assert_eq!(rc, Ok(Admission::Link));
        assert_eq!(ra, Ok((3, Admission::Link)));
    }

    /// An acceptor connecting to the connector itself answers `CROSSED`:
    /// both sides learn it, and neither counts it as a failure.
    #[test]
    fn a_crossed_connection_is_told_so() {
        let s = [7u8; SECRET_LEN];
        let (rc, ra) = run(handshake((3, s, 1), (1, s), |_| Ok(Admission::Crossed)));
        assert_eq!(rc, Ok(Admission::Crossed));
        assert_eq!(ra, Ok((3, Admission::Crossed)));
    }

    #[test]
    fn wrong_secret_is_refused_on_both_sides() {
        let (rc, ra) = run(handshake(
            (2, [1u8; SECRET_LEN], 0),
            (0, [2u8; SECRET_LEN]),
            |_| Ok(Admission::Link),
        ));
        assert_eq!(
            rc,
            Err("rank 0 failed authentication (a different job's secret: \
                 is another job using this address?)"
                .to_string())
        );
        // The acceptor never saw a proof: the connector gave up first.
        let ra = ra.unwrap_err();
        assert!(ra.starts_with("reading the proof: "), "{ra}");
    }

    #[test]
    fn unexpected_rank_is_refused() {
        let s = [9u8; SECRET_LEN];
        let (rc, ra) = run(handshake((5, s, 0), (0, s), |r| {
            Err(format!("rank {r} is not expected"))
        }));
        let rc = rc.unwrap_err();
        assert!(
            rc.starts_with("waiting for acceptance (rank refused us): "),
            "{rc}"
        );
        assert_eq!(ra, Err("rank 5 is not expected".to_string()));
    }

    #[test]
    fn a_connector_expecting_another_rank_gives_up() {
        let s = [4u8; SECRET_LEN];
        let (rc, ra) = run(handshake((3, s, 2), (1, s), |_| Ok(Admission::Link)));
        assert_eq!(rc, Err("expected rank 2, but rank 1 answered".to_string()));
        assert!(ra.unwrap_err().starts_with("reading the proof: "));
    }

    #[test]
    fn a_data_frame_instead_of_hello_is_refused() {
        run(async {
            let (mut c, mut a) = pair().await;
            let frame = super::super::frame::Header {
                kind: super::super::frame::FrameKind::Data,
                tag: 1,
                len: 16,
                bulk: false,
            }
            .encode();
            let mut bytes = frame.to_vec();
            bytes.extend_from_slice(&[0u8; 40]);
            c.write_all(&bytes).await.unwrap();
            let r = accept(&mut a, &[0u8; SECRET_LEN], 0, |_| Ok(Admission::Link)).await;
            assert_eq!(r, Err("not an mttl handshake (bad hello)".to_string()));
        });
    }

    #[test]
    fn a_peer_that_is_not_an_acceptor_is_refused() {
        run(async {
            let (mut c, mut a) = pair().await;
            let mut hello = [0u8; 8 + 4 + NONCE_LEN];
            let (rc, _) = tokio::join!(connect(&mut c, &[0u8; SECRET_LEN], 1, 0), async move {
                a.read_exact(&mut hello).await.unwrap();
                // Something of the right length that is not a reply.
                a.write_all(&[b'x'; 8 + 4 + NONCE_LEN + MAC_LEN])
                    .await
                    .unwrap();
            });
            assert_eq!(
                rc,
                Err("the peer does not speak mttl's handshake".to_string())
            );
        });
    }

    /// A side whose peer hangs up says which step failed.
    #[test]
    fn a_peer_that_hangs_up_is_named_by_the_step() {
        run(async {
            let (mut c, a) = pair().await;
            drop(a);
            let e = connect(&mut c, &[0u8; SECRET_LEN], 1, 0).await.unwrap_err();
            assert!(
                e.starts_with("reading the acceptor's reply (wrong job, or not an mttl rank?): ")
                    || e.starts_with("sending hello: "),
                "{e}"
            );
            let (c, mut a) = pair().await;
            drop(c);
            let e = accept(&mut a, &[0u8; SECRET_LEN], 0, |_| Ok(Admission::Link))
                .await
                .unwrap_err();
            assert!(e.starts_with("reading hello: "), "{e}");
        });
    }

    /// The two random nonces of a handshake, as a man in the middle sees
    /// them, and the connector's messages, recorded for a replay.
    struct Recorded {
        connector_nonce: Vec<u8>,
        acceptor_nonce: Vec<u8>,
        hello: Vec<u8>,
        proof: Vec<u8>,
    }

    /// Runs a handshake between rank 3 and rank 1 (secret `s`) through a
    /// relay that records it.
    async fn recorded_handshake(s: [u8; SECRET_LEN]) -> Recorded {
        let (mut c, mut relay_c) = pair().await;
        let (mut relay_a, mut a) = pair().await;
        let relay = async move {
            let mut hello = vec![0u8; 8 + 4 + NONCE_LEN];
            relay_c.read_exact(&mut hello).await.unwrap();
            relay_a.write_all(&hello).await.unwrap();
            let mut reply = vec![0u8; 8 + 4 + NONCE_LEN + MAC_LEN];
            relay_a.read_exact(&mut reply).await.unwrap();
            relay_c.write_all(&reply).await.unwrap();
            let mut proof = vec![0u8; MAC_LEN];
            relay_c.read_exact(&mut proof).await.unwrap();
            relay_a.write_all(&proof).await.unwrap();
            let mut ack = [0u8; 1];
            relay_a.read_exact(&mut ack).await.unwrap();
            relay_c.write_all(&ack).await.unwrap();
            Recorded {
                connector_nonce: hello[12..].to_vec(),
                acceptor_nonce: reply[12..12 + NONCE_LEN].to_vec(),
                hello,
                proof,
            }
        };
        let (rc, ra, recorded) = tokio::join!(
            connect(&mut c, &s, 3, 1),
            accept(&mut a, &s, 1, |_| Ok(Admission::Link)),
            relay
        );
        assert_eq!(rc, Ok(Admission::Link));
        assert_eq!(ra, Ok((3, Admission::Link)));
        recorded
    }

    /// The module's promise: fresh nonces on both sides, so a recorded
    /// exchange cannot be replayed to an acceptor.
    #[test]
    fn every_handshake_has_fresh_nonces_and_a_replay_is_refused() {
        let s = [5u8; SECRET_LEN];
        run(async {
            let first = recorded_handshake(s).await;
            let second = recorded_handshake(s).await;
            assert_ne!(first.connector_nonce, second.connector_nonce);
            assert_ne!(first.acceptor_nonce, second.acceptor_nonce);
            assert_ne!(first.connector_nonce, first.acceptor_nonce);
            assert_ne!(first.connector_nonce, [0u8; NONCE_LEN]);

            // A stranger replays the first exchange's connector side.
            let (mut stranger, mut a) = pair().await;
            let replay = async move {
                stranger.write_all(&first.hello).await.unwrap();
                let mut reply = vec![0u8; 8 + 4 + NONCE_LEN + MAC_LEN];
                stranger.read_exact(&mut reply).await.unwrap();
                stranger.write_all(&first.proof).await.unwrap();
                // Refused: the acceptor closes without a word.
                let mut ack = Vec::new();
                let _ = stranger.read_to_end(&mut ack).await;
                ack
            };
            let acceptor = async move { accept(&mut a, &s, 1, |_| Ok(Admission::Link)).await };
            let (ack, ra) = tokio::join!(replay, acceptor);
            assert_eq!(
                ra,
                Err("authentication failed (claimed rank 3, wrong job secret)".to_string())
            );
            assert!(ack.is_empty(), "a replay was answered with {ack:?}");
        });
    }

    /// An acceptor's own MAC sent back to it as a connector's proof (a
    /// reflection) is refused: the two sides' MACs are labelled apart.
    #[test]
    fn a_reflected_mac_is_refused() {
        let s = [6u8; SECRET_LEN];
        run(async {
            let (mut stranger, mut a) = pair().await;
            let reflect = async move {
                let mut hello = Vec::new();
                hello.extend_from_slice(HELLO);
                hello.extend_from_slice(&2u32.to_le_bytes());
                hello.extend_from_slice(&[1u8; NONCE_LEN]);
                stranger.write_all(&hello).await.unwrap();
                let mut reply = vec![0u8; 8 + 4 + NONCE_LEN + MAC_LEN];
                stranger.read_exact(&mut reply).await.unwrap();
                stranger.write_all(&reply[12 + NONCE_LEN..]).await.unwrap();
            };
            let (_, ra) = tokio::join!(reflect, accept(&mut a, &s, 0, |_| Ok(Admission::Link)));
            assert_eq!(
                ra,
                Err("authentication failed (claimed rank 2, wrong job secret)".to_string())
            );
        });
    }
}
