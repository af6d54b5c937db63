//! The simulated pub/sub subscription: a subscriber connection to the current master of a group.
//!
//! `SUBSCRIBE` travels to the server like any command and registers the connection with the
//! engine; the engine's deliveries (`Executed::messages`, from `PUBLISH` and from scripts that call
//! `redis.call('publish', ...)`) come back over the simulated network, one latency later, unless
//! the link is cut or the server died first.

use super::connection::SimConnection;
use crate::backend::redis::sim::cluster::{Cluster, Subscriber};
use crate::sim::network::Network;
use crate::simredis::ClientId;
use crate::subscription::{Subscribe, Subscription};
use futures::channel::mpsc;
use futures::StreamExt;
use std::time::Duration;

/// Subscriber connection ids start here, apart from command connections.
const SUBSCRIBER_IDS: ClientId = 1 << 32;

/// One simulated subscriber connection.
pub struct SimSubscription {
    cluster: Cluster,
    net: Network,
    node: usize,
    group: usize,
    id: ClientId,
    timeout: Duration,
    inbox: Option<mpsc::UnboundedReceiver<Vec<u8>>>,
    /// The server it subscribed on.
    server: Option<usize>,
}

impl SimSubscription {
    async fn command(&mut self, server: usize, args: Vec<Vec<u8>>) -> redis::RedisResult<()> {
        madsim::time::sleep(self.net.latency()).await;
        let ok = self
            .cluster
            .execute(self.node, server, self.id, &args)
            .is_ok();
        madsim::time::sleep(self.net.latency()).await;
        if ok && self.cluster.reachable(server, self.node) {
            Ok(())
        } else {
            madsim::time::sleep(self.timeout).await;
            Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                "simulated subscription request timed out",
            )
            .into())
        }
    }
}

impl Subscription for SimSubscription {
    async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        let server = self
            .cluster
            .subscription_server(self.node, self.group, channel);
        if self.server != Some(server) {
            // A new server: a new connection, with a fresh inbox.
            self.cluster.drop_subscriber(self.id);
            let (tx, rx) = mpsc::unbounded();
            self.cluster.register_subscriber(
                self.id,
                Subscriber {
                    node: self.node,
                    inbox: tx,
                },
            );
            self.inbox = Some(rx);
            self.server = Some(server);
        }
        let r = self
            .command(
                server,
                vec![b"SUBSCRIBE".to_vec(), channel.as_bytes().to_vec()],
            )
            .await;
        if r.is_err() {
            self.server = None;
            self.inbox = None;
        }
        r
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        let Some(server) = self.server else {
            return Ok(());
        };
        self.command(
            server,
            vec![b"UNSUBSCRIBE".to_vec(), channel.as_bytes().to_vec()],
        )
        .await
    }

    async fn next_message(&mut self) -> Option<Vec<u8>> {
        let message = match &mut self.inbox {
            Some(rx) => rx.next().await,
            None => None,
        };
        if message.is_none() {
            // The connection closed (its server died): the next `subscribe` opens a new one.
            self.server = None;
            self.inbox = None;
        }
        message
    }
}

impl Drop for SimSubscription {
    fn drop(&mut self) {
        if self.server.is_some() {
            self.cluster.drop_subscriber(self.id);
        }
    }
}

impl Subscribe for SimConnection {
    type Subscription = SimSubscription;

    fn subscription(&self) -> SimSubscription {
        let (cluster, net, node, group, id, timeout) = self.parts();
        SimSubscription {
            cluster,
            net,
            node,
            group,
            id: SUBSCRIBER_IDS + id,
            timeout,
            inbox: None,
            server: None,
        }
    }
}
