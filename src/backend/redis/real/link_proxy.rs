//! A node's link proxy in a real Sentinel run: the only way to reach a server or a sentinel, so
//! that a partition cuts exactly the links it names (see `network.rs`).
//!
//! It listens on the node's own address, the one the node announces (`replica-announce-ip/port`,
//! `sentinel announce-ip/port`, the sentinels' `monitor` line), and forwards each connection to
//! the node's process. It knows the sender by the connection's source address. Bytes cross only
//! while the link that way is not cut; a cut link holds them (TCP over a partition) and delivers
//! them when it heals. A server's replication stream to a replica waits the replication lag on
//! the way, and what is still waiting when the master dies is lost with it, as in simulation.

use crate::backend::redis::real::network::Network;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// Read size of the forwarding loops.
const CHUNK: usize = 16 * 1024;

/// A listening link proxy; it lives as long as the tokio runtime that runs it.
pub(crate) struct LinkProxy {
    addr: SocketAddr,
    target: Arc<Mutex<Option<SocketAddr>>>,
}

impl LinkProxy {
    /// Listens on node `node`'s address (a free port) for it. Connections wait until
    /// [`LinkProxy::set_target`] says where the node's process is. Call inside a tokio runtime.
    pub(crate) async fn start(net: Arc<Network>, node: usize) -> std::io::Result<LinkProxy> {
        let listener = TcpListener::bind((Network::address(node), 0)).await?;
        let addr = listener.local_addr()?;
        let target = Arc::new(Mutex::new(None));
        let to = target.clone();
        tokio::spawn(async move {
            while let Ok((inbound, peer)) = listener.accept().await {
                let _ = inbound.set_nodelay(true);
                let target = *to.lock().unwrap();
                tokio::spawn(carry(net.clone(), node, target, inbound, peer));
            }
        });
        Ok(LinkProxy { addr, target })
    }

    /// The node's announced address (this proxy's).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Where the node's process listens now (after a restart, its new port).
    pub(crate) fn set_target(&self, real: SocketAddr) {
        *self.target.lock().unwrap() = Some(real);
    }
}

/// Carries one connection from the sender at `peer` to node `node`'s process at `target`.
async fn carry(
    net: Arc<Network>,
    node: usize,
    target: Option<SocketAddr>,
    mut inbound: TcpStream,
    peer: SocketAddr,
) {
    let from = net.node_of(peer.ip());
    let to = Some(node);
    // The handshake crosses the link both ways: hold the connection (and what the sender
    // writes meanwhile) until both ways carry, as a SYN retransmitted after the partition heals.
    let mut early = Vec::new();
    while !(net.open(from, to) && net.open(to, from)) {
        tokio::select! {
            _ = net.changes() => {}
            read = inbound.read_buf(&mut early) => {
                if !matches!(read, Ok(n) if n > 0) {
                    return;
                }
            }
        }
    }
    let Some(target) = target else { return };
    let Ok(mut outbound) = TcpStream::connect(target).await else {
        // The process is gone (crashed): the sender's connection is refused.
        return;
    };
    let _ = outbound.set_nodelay(true);
    if outbound.write_all(&early).await.is_err() {
        return;
    }
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    let up = pump(net.clone(), from, to, in_read, out_write);
    let down = async {
        if net.lags(node, from) {
            lagged(net.clone(), node, from, out_read, in_write).await
        } else {
            pump(net.clone(), to, from, out_read, in_write).await
        }
    };
    // Either side closing ends the connection on both.
    tokio::select! {
        _ = up => {}
        _ = down => {}
    }
}

/// Copies `from` -> `to` bytes, each read waiting while the link that way is cut. The end of the
/// stream (a close, a reset) crosses too, and also only once the link carries.
async fn pump(
    net: Arc<Network>,
    from: Option<usize>,
    to: Option<usize>,
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
) {
    let mut buf = vec![0u8; CHUNK];
    loop {
        let n = reader.read(&mut buf).await.unwrap_or(0);
        net.wait_open(from, to).await;
        if n == 0 || writer.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A master's replication stream to the replica at `to`: each chunk waits the replication lag
/// (in order, as TCP keeps it), then crosses when the link carries. When the master's side ends
/// (it died), chunks still waiting are dropped: they never left the master.
async fn lagged(
    net: Arc<Network>,
    master: usize,
    to: Option<usize>,
    mut reader: impl AsyncRead + Unpin,
    mut writer: impl AsyncWrite + Unpin,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let read = {
        let net = net.clone();
        async move {
            let mut last = Instant::now();
            let mut buf = vec![0u8; CHUNK];
            loop {
                let n = reader.read(&mut buf).await.unwrap_or(0);
                if n == 0 {
                    return;
                }
                let lag = net.replication_lag();
                last = last.max(Instant::now() + lag);
                if tx.send((last, buf[..n].to_vec())).is_err() {
                    return;
                }
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            net.wait_open(Some(master), to).await;
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
        }
    };
    tokio::select! {
        _ = read => {}
        _ = write => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// An echo server on 127.0.0.1, standing for a node's process.
    async fn echo() -> SocketAddr {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        tokio::spawn(async move {
            while let Ok((mut s, _)) = l.accept().await {
                tokio::spawn(async move {
                    let (mut r, mut w) = s.split();
                    let _ = tokio::io::copy(&mut r, &mut w).await;
                });
            }
        });
        addr
    }

    /// Connects from node `from`'s address to `to`.
    async fn connect_from(from: usize, to: SocketAddr) -> TcpStream {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind((Network::address(from), 0).into()).unwrap();
        socket.connect(to).await.unwrap()
    }

    async fn round_trip(s: &mut TcpStream, within: Duration) -> bool {
        s.write_all(b"ping").await.unwrap();
        let mut buf = [0u8; 4];
        tokio::time::timeout(within, s.read_exact(&mut buf))
            .await
            .is_ok()
    }

    #[tokio::test]
    async fn a_cut_link_holds_bytes_and_delivers_them_when_it_heals() {
        let names = ["sentinel-0", "redis-0", "client-0"]
            .map(String::from)
            .to_vec();
        let net = Arc::new(Network::new(names, vec![false, true, false], [0, 0], 1));
        let proxy = LinkProxy::start(net.clone(), 1).await.unwrap();
        proxy.set_target(echo().await);
        let mut sentinel = connect_from(0, proxy.addr()).await;
        let mut client = connect_from(2, proxy.addr()).await;
        assert!(round_trip(&mut sentinel, Duration::from_secs(2)).await);
        net.cut(&[(1, 0), (0, 1)], true);
        assert!(!round_trip(&mut sentinel, Duration::from_millis(200)).await);
        assert!(
            round_trip(&mut client, Duration::from_secs(2)).await,
            "only the cut link stalls"
        );
        net.cut(&[(1, 0), (0, 1)], false);
        let mut buf = [0u8; 4];
        tokio::time::timeout(Duration::from_secs(2), sentinel.read_exact(&mut buf))
            .await
            .expect("the held bytes arrive after the heal")
            .unwrap();
        assert_eq!(&buf, b"ping");
    }
}
