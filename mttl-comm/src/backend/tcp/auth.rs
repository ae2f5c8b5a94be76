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
//!    byte. Only now does either side treat the connection as part of the
//!    mesh.
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
/// `stream`, which must be rank `expect`. Returns an error sentence on
/// failure.
pub(crate) async fn connect(
    stream: &mut TcpStream,
    secret: &[u8; SECRET_LEN],
    me: Rank,
    expect: Rank,
) -> Result<(), String> {
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
    if ack[0] != ACCEPT {
        return Err(format!("rank {acceptor} refused the connection"));
    }
    Ok(())
}

/// The acceptor's side: checks that the connector at the other end of
/// `stream` knows the secret; `admit` decides whether the proven rank is
/// one this acceptor expects. Returns the connector's rank.
pub(crate) async fn accept(
    stream: &mut TcpStream,
    secret: &[u8; SECRET_LEN],
    me: Rank,
    admit: impl FnOnce(Rank) -> Result<(), String>,
) -> Result<Rank, String> {
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
    admit(connector)?;
    stream
        .write_all(&[ACCEPT])
        .await
        .map_err(|e| io_err("sending acceptance", e))?;
    Ok(connector)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap()
    }

    async fn pair() -> (TcpStream, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let (c, a) = tokio::join!(TcpStream::connect(addr), l.accept());
        (c.unwrap(), a.unwrap().0)
    }

    #[test]
    fn same_secret_is_accepted() {
        rt().block_on(async {
            let (mut c, mut a) = pair().await;
            let s = [7u8; SECRET_LEN];
            let (rc, ra) =
                tokio::join!(connect(&mut c, &s, 3, 1), accept(&mut a, &s, 1, |_| Ok(())));
            assert_eq!(rc, Ok(()));
            assert_eq!(ra, Ok(3));
        });
    }

    #[test]
    fn wrong_secret_is_refused_on_both_sides() {
        rt().block_on(async {
            let (mut c, mut a) = pair().await;
            // Each side closes its end when it gives up, as bootstrap does.
            let (rc, ra) = tokio::join!(
                async move { connect(&mut c, &[1u8; SECRET_LEN], 2, 0).await },
                async move { accept(&mut a, &[2u8; SECRET_LEN], 0, |_| Ok(())).await }
            );
            assert!(rc.unwrap_err().contains("failed authentication"));
            // The acceptor never saw a proof: the connector gave up first.
            assert!(ra.is_err());
        });
    }

    #[test]
    fn unexpected_rank_is_refused() {
        rt().block_on(async {
            let (mut c, mut a) = pair().await;
            let s = [9u8; SECRET_LEN];
            let (rc, ra) =
                tokio::join!(async move { connect(&mut c, &s, 5, 0).await }, async move {
                    accept(&mut a, &s, 0, |r| Err(format!("rank {r} is not expected"))).await
                });
            assert!(rc.is_err());
            assert_eq!(ra, Err("rank 5 is not expected".to_string()));
        });
    }

    #[test]
    fn a_data_frame_instead_of_hello_is_refused() {
        rt().block_on(async {
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
            let r = accept(&mut a, &[0u8; SECRET_LEN], 0, |_| Ok(())).await;
            assert_eq!(r, Err("not an mttl handshake (bad hello)".to_string()));
        });
    }
}
