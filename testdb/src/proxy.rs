//! A TCP proxy between a client and PostgreSQL that loses `COMMIT` acknowledgements on demand.
//!
//! It reads the frontend protocol enough to recognise a simple-query `COMMIT` (what sqlx sends for
//! `Transaction::commit`: a `'Q'` message whose text is `COMMIT`). When a fault is armed, the
//! next `COMMIT` that passes through is handled as the fault says and the connection is cut, so
//! the client sees its connection die with the commit's outcome unknown. Everything else is
//! forwarded byte for byte, in both directions.
//!
//! A client may pipeline: send `COMMIT` before it has the answers to the statements ahead of it.
//! The proxy finds the `COMMIT`'s answer by counting: every simple query, `Sync` and function call
//! the client sends is answered by exactly one `ReadyForQuery`, and the server sends one more when
//! the start-up completes. The `COMMIT`'s answer is what follows the `ReadyForQuery` of the last
//! synchronisation point sent before it.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// What happens to the next `COMMIT` once a fault is armed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CommitFault {
    /// Forward the `COMMIT`, let the server answer, then cut the client before it gets the
    /// answer: the transaction committed and the client cannot know.
    CutAfterReply,
    /// Forward the `COMMIT` and cut both sides at once, without waiting: the server may or may
    /// not have committed by the time anyone looks.
    CutAfterForward,
    /// Cut both sides without forwarding the `COMMIT`: the server rolls back.
    DropCommit,
}

#[derive(Debug, Default)]
struct State {
    armed: Mutex<Option<CommitFault>>,
    commits: AtomicU64,
    cuts: AtomicU64,
    connections: AtomicU64,
}

/// A running fault proxy on a loopback port. Stops when dropped.
#[derive(Debug)]
pub struct FaultProxy {
    addr: SocketAddr,
    state: Arc<State>,
    task: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts a proxy forwarding to `upstream`, on a free loopback port.
    pub async fn start(upstream: SocketAddr) -> std::io::Result<FaultProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::default());
        let accept_state = state.clone();
        let task = tokio::spawn(async move {
            let mut connections = tokio::task::JoinSet::new();
            while let Ok((client, _)) = listener.accept().await {
                accept_state.connections.fetch_add(1, Ordering::Relaxed);
                let state = accept_state.clone();
                connections.spawn(async move {
                    let _ = serve(client, upstream, state).await;
                });
                // Reap finished connections so the set does not grow without bound.
                while connections.try_join_next().is_some() {}
            }
        });
        Ok(FaultProxy { addr, state, task })
    }

    /// The port clients connect to.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Arms a fault for the next `COMMIT` (any connection). It fires once, then disarms.
    pub fn arm(&self, fault: CommitFault) {
        *self.state.armed.lock().unwrap_or_else(|e| e.into_inner()) = Some(fault);
    }

    /// Disarms a fault that has not fired yet; returns it.
    pub fn disarm(&self) -> Option<CommitFault> {
        self.state
            .armed
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    /// How many `COMMIT` messages went through (faulted or not).
    pub fn commits_seen(&self) -> u64 {
        self.state.commits.load(Ordering::Relaxed)
    }

    /// How many connections were cut by a fault.
    pub fn cuts(&self) -> u64 {
        self.state.cuts.load(Ordering::Relaxed)
    }

    /// How many client connections were accepted.
    pub fn connections(&self) -> u64 {
        self.state.connections.load(Ordering::Relaxed)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(client: TcpStream, upstream: SocketAddr, state: Arc<State>) -> std::io::Result<()> {
    let server = TcpStream::connect(upstream).await?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let (client_read, client_write) = client.into_split();
    let (server_read, server_write) = server.into_split();
    let link = Link::default();
    // Whichever direction ends first ends the connection: dropping all four halves closes both
    // sockets.
    tokio::select! {
        _ = client_to_server(client_read, server_write, &state, &link) => {}
        _ = server_to_client(server_read, client_write, &link) => {}
    }
    Ok(())
}

/// What one connection's two directions tell each other.
#[derive(Debug, Default)]
struct Link {
    /// One-byte answers the server owes to SSL/GSS encryption requests, sent before any typed
    /// message.
    untyped: AtomicU64,
    /// When non-zero: cut the client once this many `ReadyForQuery` messages have been
    /// forwarded, swallowing what follows (the armed `COMMIT`'s answer).
    cut_after_ready: AtomicU64,
}

const SSL_REQUEST: u32 = 80_877_103;
const GSSENC_REQUEST: u32 = 80_877_104;

async fn client_to_server(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    state: &State,
    link: &Link,
) -> std::io::Result<()> {
    // Untyped start-up messages: SSL/GSS negotiation requests, then the startup message.
    loop {
        let len = from.read_u32().await?;
        let mut body = vec![0u8; (len as usize).saturating_sub(4)];
        from.read_exact(&mut body).await?;
        to.write_all(&len.to_be_bytes()).await?;
        to.write_all(&body).await?;
        let code = body
            .get(..4)
            .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
            .unwrap_or(0);
        if code != SSL_REQUEST && code != GSSENC_REQUEST {
            break;
        }
        link.untyped.fetch_add(1, Ordering::SeqCst);
    }
    // The synchronisation points forwarded so far; the server's start-up `ReadyForQuery` counts
    // as the first answer.
    let mut answered_by_ready = 1u64;
    // Typed messages: one type byte, a length that counts itself, the body.
    loop {
        let kind = from.read_u8().await?;
        let len = from.read_u32().await?;
        let mut body = vec![0u8; (len as usize).saturating_sub(4)];
        from.read_exact(&mut body).await?;
        let mut message = Vec::with_capacity(body.len() + 5);
        message.push(kind);
        message.extend_from_slice(&len.to_be_bytes());
        message.extend_from_slice(&body);
        if kind == b'Q' && is_commit(&body) {
            state.commits.fetch_add(1, Ordering::Relaxed);
            let fault = state.armed.lock().unwrap_or_else(|e| e.into_inner()).take();
            match fault {
                None => {}
                Some(CommitFault::DropCommit) => {
                    state.cuts.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
                Some(CommitFault::CutAfterForward) => {
                    state.cuts.fetch_add(1, Ordering::Relaxed);
                    to.write_all(&message).await?;
                    to.flush().await?;
                    return Ok(());
                }
                Some(CommitFault::CutAfterReply) => {
                    state.cuts.fetch_add(1, Ordering::Relaxed);
                    link.cut_after_ready
                        .store(answered_by_ready, Ordering::SeqCst);
                }
            }
        }
        if matches!(kind, b'Q' | b'S' | b'F') {
            answered_by_ready += 1;
        }
        to.write_all(&message).await?;
    }
}

async fn server_to_client(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    link: &Link,
) -> std::io::Result<()> {
    let mut pending = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    let mut ready = 0u64;
    // After an accepted encryption request the stream is opaque: forwarded as it comes.
    let mut opaque = false;
    loop {
        let n = from.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        if opaque {
            to.write_all(&buf[..n]).await?;
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        // Forward whole messages only, stopping at the armed COMMIT's answer.
        let mut end = 0;
        while end < pending.len() && link.untyped.load(Ordering::SeqCst) > 0 {
            link.untyped.fetch_sub(1, Ordering::SeqCst);
            opaque = pending[end] != b'N';
            end += 1;
        }
        while !opaque && pending.len() - end >= 5 {
            let len = u32::from_be_bytes([
                pending[end + 1],
                pending[end + 2],
                pending[end + 3],
                pending[end + 4],
            ]) as usize;
            if pending.len() - end < 1 + len {
                break;
            }
            let cut = link.cut_after_ready.load(Ordering::SeqCst);
            if cut != 0 && ready >= cut {
                // This is the COMMIT's answer: the server has committed. Swallow it and cut.
                to.write_all(&pending[..end]).await?;
                return Ok(());
            }
            if pending[end] == b'Z' {
                ready += 1;
            }
            end += 1 + len;
        }
        if opaque {
            end = pending.len();
        }
        to.write_all(&pending[..end]).await?;
        pending.drain(..end);
    }
}

/// Whether a simple query's text (NUL-terminated) is a `COMMIT`.
fn is_commit(body: &[u8]) -> bool {
    let text = body.strip_suffix(&[0]).unwrap_or(body);
    let text = String::from_utf8_lossy(text);
    let text = text
        .trim()
        .trim_end_matches(';')
        .trim()
        .to_ascii_uppercase();
    matches!(
        text.as_str(),
        "COMMIT" | "END" | "COMMIT WORK" | "COMMIT TRANSACTION"
    )
}

#[cfg(test)]
mod tests {
    use super::is_commit;

    #[test]
    fn recognises_commit_spellings() {
        assert!(is_commit(b"COMMIT\0"));
        assert!(is_commit(b" commit; \0"));
        assert!(is_commit(b"END\0"));
        assert!(!is_commit(b"COMMIT PREPARED 'x'\0"));
        assert!(!is_commit(b"SELECT 'COMMIT'\0"));
        assert!(!is_commit(b"ROLLBACK\0"));
    }
}
