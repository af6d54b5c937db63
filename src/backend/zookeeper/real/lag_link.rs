//! A TCP forwarder that delays one direction of a link by a fixed time: what a slow network
//! between two servers of an ensemble looks like to the one that receives late.
//!
//! Why it exists: CURATOR-604 needs a ZooKeeper follower that applies the leader's commits late,
//! so that a session's close (and with it the deletion of its ephemeral lock node) reaches the
//! follower after the follower has already told a reconnecting client that its session expired.
//! A real follower learns of commits only from the leader's quorum connection, which it opens
//! to the leader's peer port; putting a [`LagLink`] on that port in the follower's `zoo.cfg`
//! delays every packet the leader sends it (proposals, commits, pings, the answers to its
//! session revalidations) and nothing it sends the leader. Order is kept: each chunk read from
//! the upstream side is written downstream `lag` after it was read, in the order it was read, as
//! a link with a constant one-way delay would deliver it.
//!
//! Plain threads and blocking sockets, not tasks: the link is made before any runtime exists
//! (servers are spawned by blocking code) and lives as long as the servers do. Dropping the link
//! shuts every connection down and stops its threads.

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use crate::real::RealError;

/// One listening port forwarding to `upstream`, delaying what `upstream` sends by `lag`.
#[derive(Debug)]
pub struct LagLink {
    port: u16,
    stop: Arc<AtomicBool>,
    /// Every socket of every forwarded connection, shut down on drop so blocked reads return.
    sockets: Arc<Mutex<Vec<TcpStream>>>,
}

impl LagLink {
    /// Listens on a free port of 127.0.0.1; every connection accepted there is forwarded to
    /// `upstream` (connected when the connection is accepted, so the upstream side need not be up
    /// yet when the link is made).
    pub fn start(upstream: SocketAddr, lag: Duration) -> Result<LagLink, RealError> {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .map_err(|e| RealError::io("binding a lag link's port", e))?;
        let port = listener
            .local_addr()
            .map_err(|e| RealError::io("reading a lag link's port", e))?
            .port();
        let stop = Arc::new(AtomicBool::new(false));
        let sockets = Arc::new(Mutex::new(Vec::new()));
        let (stop2, sockets2) = (stop.clone(), sockets.clone());
        thread::Builder::new()
            .name(format!("lag-link-{port}"))
            .spawn(move || accept_loop(listener, upstream, lag, stop2, sockets2))
            .map_err(|e| RealError::io("starting a lag link's thread", e))?;
        Ok(LagLink {
            port,
            stop,
            sockets,
        })
    }

    /// The port a peer connects to instead of `upstream`'s.
    pub fn port(&self) -> u16 {
        self.port
    }
}

impl Drop for LagLink {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the blocked accept, which then sees `stop`.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
        for s in self
            .sockets
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
        {
            let _ = s.shutdown(Shutdown::Both);
        }
    }
}

fn accept_loop(
    listener: TcpListener,
    upstream: SocketAddr,
    lag: Duration,
    stop: Arc<AtomicBool>,
    sockets: Arc<Mutex<Vec<TcpStream>>>,
) {
    for down in listener.incoming() {
        if stop.load(Ordering::SeqCst) {
            return;
        }
        let Ok(down) = down else { continue };
        // A peer that is down refuses: the connecting server sees a refusal too, and retries.
        let Ok(up) = TcpStream::connect_timeout(&upstream, Duration::from_secs(2)) else {
            continue;
        };
        let _ = (down.set_nodelay(true), up.set_nodelay(true));
        let (Ok(down2), Ok(up2)) = (down.try_clone(), up.try_clone()) else {
            continue;
        };
        {
            let mut all = sockets.lock().unwrap_or_else(|p| p.into_inner());
            all.retain(|s| s.peer_addr().is_ok());
            for s in [&down, &up] {
                if let Ok(s) = s.try_clone() {
                    all.push(s);
                }
            }
        }
        // Downstream to upstream: at once.
        thread::spawn(move || copy_now(down, up2));
        // Upstream to downstream: each chunk `lag` after it was read.
        let (tx, rx) = mpsc::channel::<(Instant, Vec<u8>)>();
        thread::spawn(move || read_stamped(up, tx));
        thread::spawn(move || write_when_due(rx, down2, lag));
    }
}

/// Copies `from` to `to` until either side closes, then shuts both down.
fn copy_now(mut from: TcpStream, mut to: TcpStream) {
    let mut buf = [0u8; 16 * 1024];
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 || to.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

/// Reads `from`, stamping each chunk with the time it was read; an empty chunk means the end.
fn read_stamped(mut from: TcpStream, tx: mpsc::Sender<(Instant, Vec<u8>)>) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(n) if n > 0 => {
                if tx.send((Instant::now(), buf[..n].to_vec())).is_err() {
                    break;
                }
            }
            _ => {
                let _ = tx.send((Instant::now(), Vec::new()));
                break;
            }
        }
    }
}

/// Writes each chunk to `to` once `lag` has passed since it was read, in order.
fn write_when_due(rx: mpsc::Receiver<(Instant, Vec<u8>)>, mut to: TcpStream, lag: Duration) {
    while let Ok((read_at, bytes)) = rx.recv() {
        let due = read_at + lag;
        let now = Instant::now();
        if due > now {
            thread::sleep(due - now);
        }
        if bytes.is_empty() || to.write_all(&bytes).is_err() {
            break;
        }
    }
    let _ = to.shutdown(Shutdown::Both);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An echo server's answer comes back `lag` late; what is sent to it is not delayed, and
    /// bytes arrive in the order they were sent.
    #[test]
    fn the_upstream_side_is_heard_late_and_in_order() {
        let echo = TcpListener::bind(("127.0.0.1", 0)).unwrap();
        let addr = echo.local_addr().unwrap();
        thread::spawn(move || {
            let (mut s, _) = echo.accept().unwrap();
            let mut buf = [0u8; 64];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 || s.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
        let lag = Duration::from_millis(200);
        let link = LagLink::start(addr, lag).unwrap();
        let mut c = TcpStream::connect(("127.0.0.1", link.port())).unwrap();
        let sent = Instant::now();
        for b in 0u8..10 {
            c.write_all(&[b]).unwrap();
        }
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        while got.len() < 10 {
            let n = c.read(&mut buf).unwrap();
            assert!(n > 0);
            got.extend_from_slice(&buf[..n]);
        }
        let waited = sent.elapsed();
        assert_eq!(got, (0u8..10).collect::<Vec<_>>());
        assert!(waited >= lag, "answered after {waited:?}, before the lag");
        assert!(waited < lag * 5, "answered after {waited:?}");
        drop(link);
    }
}
