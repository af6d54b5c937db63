//! The real pub/sub subscription: a redis-rs `aio::PubSub` connection to the route's current
//! master (a separate connection, as RESP2 requires for subscribers).

use crate::real::connection::{ConnectionTimeouts, Route, RoutedConnection};
use crate::subscription::{Subscribe, Subscription};
use futures::StreamExt;
use std::sync::Arc;

/// One real subscriber connection. It connects on the first `subscribe`, to whatever server the
/// route names then; after a failover it hears nothing until the lock subscribes again.
pub struct RealSubscription {
    route: Arc<Route>,
    timeouts: ConnectionTimeouts,
    pubsub: Option<(u64, redis::aio::PubSub)>,
}

impl RealSubscription {
    async fn connect(&mut self) -> redis::RedisResult<&mut redis::aio::PubSub> {
        let (url, generation) = self.route.current();
        if self.pubsub.as_ref().is_none_or(|(g, _)| *g != generation) {
            self.pubsub = None;
            let client = redis::Client::open(url.as_str())?;
            let pubsub = tokio::time::timeout(self.timeouts.connect, client.get_async_pubsub())
                .await
                .map_err(|_| timed_out())??;
            self.pubsub = Some((generation, pubsub));
        }
        Ok(&mut self.pubsub.as_mut().expect("connected above").1)
    }
}

fn timed_out() -> redis::RedisError {
    std::io::Error::new(std::io::ErrorKind::TimedOut, "subscription timed out").into()
}

impl Subscription for RealSubscription {
    async fn subscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        let timeout = self.timeouts.response;
        let r = match self.connect().await {
            Ok(ps) => tokio::time::timeout(timeout, ps.subscribe(channel))
                .await
                .map_err(|_| timed_out())
                .and_then(|r| r),
            Err(e) => Err(e),
        };
        if r.is_err() {
            self.pubsub = None;
        }
        r
    }

    async fn unsubscribe(&mut self, channel: &str) -> redis::RedisResult<()> {
        let timeout = self.timeouts.response;
        match &mut self.pubsub {
            Some((_, ps)) => tokio::time::timeout(timeout, ps.unsubscribe(channel))
                .await
                .map_err(|_| timed_out())?,
            None => Ok(()),
        }
    }

    async fn next_message(&mut self) -> Option<Vec<u8>> {
        let (_, ps) = self.pubsub.as_mut()?;
        let next = ps.on_message().next().await;
        match next {
            Some(msg) => Some(msg.get_payload_bytes().to_vec()),
            None => {
                self.pubsub = None;
                None
            }
        }
    }
}

impl Subscribe for RoutedConnection {
    type Subscription = RealSubscription;

    fn subscription(&self) -> RealSubscription {
        RealSubscription {
            route: self.route().clone(),
            timeouts: self.timeouts(),
            pubsub: None,
        }
    }
}
