//! A TCP forwarder that follows a [`Route`]: how a client program that lockcheck did not write
//! still sees failovers, restarts and partitions.
//!
//! A lock client in another language connects to the address lockcheck gives it and keeps that
//! address. lockcheck gives it this proxy's address instead of a server's; each accepted
//! connection is forwarded to wherever the route leads now (the master, the promoted replica
//! after a failover, the restarted server, or the black hole while the client is cut off). When
//! the route switches, forwarded connections are closed, as the old server's would be: the
//! client sees a dropped connection and reconnects, which now reaches the new target, as a
//! Sentinel-aware or DNS-following client would.

use crate::real::connection::Route;
use crate::real::observers::connection_names::ConnectionNames;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

/// How often a forwarded connection checks whether its route switched.
const ROUTE_POLL: Duration = Duration::from_millis(10);

/// A listening forwarder; it lives as long as the tokio runtime that runs it.
pub struct RouteProxy {
    port: u16,
}

impl RouteProxy {
    /// Binds a free 127.0.0.1 port and forwards every connection along `route`, registering
    /// each connection it opens to a server in `names` as client `client`'s (so the witness knows
    /// whose commands it reads). Call inside a tokio runtime.
    pub async fn start(
        route: Arc<Route>,
        client: u32,
        names: ConnectionNames,
    ) -> std::io::Result<RouteProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(forward(inbound, route.clone(), client, names.clone()));
            }
        });
        Ok(RouteProxy { port })
    }

    /// The `redis://` URL a client program connects to.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }
}

/// `host:port` of a `redis://host:port/...` URL.
fn address(url: &str) -> Option<String> {
    let rest = url.strip_prefix("redis://")?;
    let rest = rest.rsplit('@').next()?;
    Some(rest.split('/').next()?.to_string())
}

async fn forward(inbound: TcpStream, route: Arc<Route>, client: u32, names: ConnectionNames) {
    let (url, generation) = route.current();
    let Some(addr) = address(&url) else { return };
    let Ok(mut outbound) = TcpStream::connect(&addr).await else {
        return;
    };
    // Before the first byte goes through, so the server's MONITOR never shows a command from
    // an address the witness cannot name.
    if let Ok(local) = outbound.local_addr() {
        names.register(local.to_string(), client);
    }
    // And the connection names itself, as lockcheck's own clients do: the server's MONITOR shows
    // the name in its stream, ahead of the connection's first command, so the witness attributes
    // each command by what it read before it. The address alone is not enough: once a
    // connection closes, the system may give its port to another client's next connection,
    // registered before the witness (which reads behind the servers) has read the old one's last
    // commands. The reply is the server's first, and is kept from the program.
    let name = crate::real::observers::witness::client_connection_name(client);
    let setname = format!(
        "*3\r\n$6\r\nCLIENT\r\n$7\r\nSETNAME\r\n${}\r\n{name}\r\n",
        name.len()
    );
    if outbound.write_all(setname.as_bytes()).await.is_err() {
        return;
    }
    let _ = inbound.set_nodelay(true);
    let _ = outbound.set_nodelay(true);
    let (mut from_client, mut to_client) = inbound.into_split();
    let (from_server, mut to_server) = outbound.into_split();
    let mut from_server = BufReader::new(from_server);
    let upstream = tokio::io::copy(&mut from_client, &mut to_server);
    let downstream = async {
        // `+OK`, or an error line (a server that wants `AUTH` first); either way one line.
        let mut reply = Vec::new();
        if from_server.read_until(b'\n', &mut reply).await.ok()? == 0 {
            return None;
        }
        tokio::io::copy_buf(&mut from_server, &mut to_client)
            .await
            .ok()
    };
    let switched = async {
        while route.generation() == generation {
            tokio::time::sleep(ROUTE_POLL).await;
        }
    };
    tokio::select! {
        _ = upstream => {}
        _ = downstream => {}
        _ = switched => {}
    }
}

#[cfg(test)]
mod tests {
    use super::address;

    #[test]
    fn address_of_urls() {
        assert_eq!(
            address("redis://127.0.0.1:7000/").as_deref(),
            Some("127.0.0.1:7000")
        );
        assert_eq!(
            address("redis://u:p@127.0.0.1:7001").as_deref(),
            Some("127.0.0.1:7001")
        );
        assert_eq!(address("http://x"), None);
    }
}
