//! A TCP proxy that holds every byte for a fixed time in each direction: a database across a
//! network, on one machine. Between a service and PostgreSQL on loopback it turns each round
//! trip into one of `2 × one_way` more, as a network does, and it counts them.
//!
//! Threads, not tasks: each direction of a connection has a reader and a writer thread, the
//! writer sleeping (`nanosleep`, tens of microseconds of slack) until each chunk's time is due.
//! tokio's timer rounds to milliseconds, which would make 0.5 ms one.
//!
//! A round trip is counted when the server answers after the client spoke: per connection, each
//! change of direction from client → server to server → client. For a driver that waits for each
//! answer (sqlx) that is its round trips; a pipelining driver that sends while answers still
//! arrive is counted at least once per batch it waits for, and exactly once when the delay is
//! longer than the gaps between the writes of one batch (the answer to its first write reaches
//! the proxy after its last).

use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

/// What the proxy has seen since it started.
#[derive(Debug, Default)]
pub struct DelayCounters {
    connections: AtomicU64,
    round_trips: AtomicU64,
}

impl DelayCounters {
    /// Connections accepted.
    pub fn connections(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Server answers that followed the client's words (see the module's docs).
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(Ordering::Relaxed)
    }
}

/// A running delay proxy on a loopback port. Stops accepting when dropped; connections already
/// made run until either side closes.
#[derive(Debug)]
pub struct DelayProxy {
    addr: SocketAddr,
    counters: Arc<DelayCounters>,
    stop: Arc<AtomicBool>,
}

impl DelayProxy {
    /// Starts a proxy to `upstream` on `listen` (port 0: a free one), holding each chunk
    /// `one_way` in each direction.
    pub fn start(
        listen: SocketAddr,
        upstream: SocketAddr,
        one_way: Duration,
    ) -> io::Result<DelayProxy> {
        let listener = TcpListener::bind(listen)?;
        let addr = listener.local_addr()?;
        let counters = Arc::new(DelayCounters::default());
        let stop = Arc::new(AtomicBool::new(false));
        let (accept_counters, accept_stop) = (counters.clone(), stop.clone());
        std::thread::Builder::new()
            .name("delay-accept".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if accept_stop.load(Ordering::SeqCst) {
                        return;
                    }
                    let Ok(client) = client else { continue };
                    accept_counters.connections.fetch_add(1, Ordering::Relaxed);
                    let counters = accept_counters.clone();
                    let _ = connect(client, upstream, one_way, counters);
                }
            })?;
        Ok(DelayProxy {
            addr,
            counters,
            stop,
        })
    }

    /// Where clients connect.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// What it has seen.
    pub fn counters(&self) -> &Arc<DelayCounters> {
        &self.counters
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = TcpStream::connect(self.addr);
    }
}

/// Who spoke last on a connection.
const NOBODY: u8 = 0;
const CLIENT: u8 = 1;
const SERVER: u8 = 2;

/// Connects `client` to `upstream` through four threads: a reader and a delaying writer each way.
fn connect(
    client: TcpStream,
    upstream: SocketAddr,
    one_way: Duration,
    counters: Arc<DelayCounters>,
) -> io::Result<()> {
    let server = TcpStream::connect(upstream)?;
    client.set_nodelay(true)?;
    server.set_nodelay(true)?;
    let last = Arc::new(AtomicU8::new(NOBODY));
    let up = (client.try_clone()?, server.try_clone()?);
    let down = (server, client);
    {
        let last = last.clone();
        pump(up.0, up.1, one_way, move |_| {
            last.store(CLIENT, Ordering::Relaxed);
        })?;
    }
    pump(down.0, down.1, one_way, move |_| {
        if last.swap(SERVER, Ordering::Relaxed) == CLIENT {
            counters.round_trips.fetch_add(1, Ordering::Relaxed);
        }
    })?;
    Ok(())
}

/// Copies `from` to `to`, each chunk written `delay` after it was read; `seen` is told of each
/// chunk as it is read. When `from` ends, `to`'s writing half is shut once all is written.
fn pump(
    mut from: TcpStream,
    mut to: TcpStream,
    delay: Duration,
    seen: impl Fn(usize) + Send + 'static,
) -> io::Result<()> {
    let (send, receive) = mpsc::channel::<(Instant, Vec<u8>)>();
    std::thread::Builder::new()
        .name("delay-read".into())
        .spawn(move || {
            let mut buf = vec![0u8; 64 * 1024];
            loop {
                match from.read(&mut buf) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => {
                        seen(n);
                        if send
                            .send((Instant::now() + delay, buf[..n].to_vec()))
                            .is_err()
                        {
                            return;
                        }
                    }
                }
            }
        })?;
    std::thread::Builder::new()
        .name("delay-write".into())
        .spawn(move || {
            for (due, bytes) in receive {
                let now = Instant::now();
                if due > now {
                    std::thread::sleep(due - now);
                }
                if to.write_all(&bytes).is_err() {
                    break;
                }
            }
            let _ = to.shutdown(Shutdown::Write);
        })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server answering each line at once: the proxy adds `2 × one_way` to each
    /// exchange and counts one round trip per exchange.
    #[test]
    fn each_exchange_takes_two_delays_and_counts_one_round_trip() {
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let upstream = echo.local_addr().unwrap();
        std::thread::spawn(move || {
            let (mut conn, _) = echo.accept().unwrap();
            let mut buf = [0u8; 64];
            while let Ok(n) = conn.read(&mut buf) {
                if n == 0 || conn.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
        });
        let one_way = Duration::from_millis(20);
        let proxy = DelayProxy::start("127.0.0.1:0".parse().unwrap(), upstream, one_way).unwrap();
        let mut client = TcpStream::connect(proxy.addr()).unwrap();
        client.set_nodelay(true).unwrap();
        let mut buf = [0u8; 5];
        for _ in 0..5 {
            let started = Instant::now();
            client.write_all(b"ping\n").unwrap();
            client.read_exact(&mut buf).unwrap();
            let took = started.elapsed();
            assert_eq!(&buf, b"ping\n");
            assert!(took >= 2 * one_way, "an exchange took {took:?}");
            assert!(took < 2 * one_way + Duration::from_millis(200), "{took:?}");
        }
        assert_eq!(proxy.counters().round_trips(), 5);
        assert_eq!(proxy.counters().connections(), 1);
    }
}
