//! The third seam: a pub/sub subscription, for locks whose waiters are woken by a message
//! (Redisson publishes an unlock message on release, as the Redisson article describes; the
//! Lettuce article notes the contrast with its own 5 ms polling).
//!
//! A lock that needs one asks its connection for a [`Subscription`] ([`Subscribe::subscription`]),
//! subscribes to a channel and awaits [`Subscription::next_message`]. The simulated implementation
//! ([`crate::backend::redis::sim::subscription`]) registers with the simulated server and receives the engine's
//! pub/sub deliveries over the simulated network; the real one ([`crate::backend::redis::real::subscription`]) is a
//! redis-rs `aio::PubSub` connection to the route's current master.
//!
//! Like a real subscriber connection, a subscription belongs to one server: after a failover it
//! hears nothing until the lock subscribes again, which is why waiters also wake after the lock's
//! remaining lease (Redisson waits for the message *or* the returned PTTL).

use std::future::Future;

/// A connection that can open a subscription on the same server(s).
pub trait Subscribe {
    /// The world's subscriber connection (simulated or a real one), so a lock's waiting code is
    /// the same text in both.
    type Subscription: Subscription;
    /// A new, not yet subscribed subscription (a separate connection, as Redis requires).
    fn subscription(&self) -> Self::Subscription;
}

/// One subscriber connection.
pub trait Subscription: Send + 'static {
    /// Subscribes to `channel` and returns once the server confirmed it.
    fn subscribe(&mut self, channel: &str) -> impl Future<Output = redis::RedisResult<()>> + Send;
    /// Unsubscribes from `channel`.
    fn unsubscribe(&mut self, channel: &str)
        -> impl Future<Output = redis::RedisResult<()>> + Send;
    /// The next message's payload on any subscribed channel; `None` when the subscription is
    /// closed (not subscribed, or the server is gone). Waits as long as it takes: callers bound it.
    fn next_message(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send;
}

/// A connection without pub/sub: subscribing fails, so a lock that needs wake-ups falls back to
/// waiting out the lease. For custom connection types in tests.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoSubscription;

impl Subscription for NoSubscription {
    async fn subscribe(&mut self, _channel: &str) -> redis::RedisResult<()> {
        Err(redis::RedisError::from((
            redis::ErrorKind::Client,
            "this connection has no pub/sub",
        )))
    }

    async fn unsubscribe(&mut self, _channel: &str) -> redis::RedisResult<()> {
        Ok(())
    }

    async fn next_message(&mut self) -> Option<Vec<u8>> {
        None
    }
}
