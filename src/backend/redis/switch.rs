//! The Redis seams through the world switch: a connection ([`redis::aio::ConnectionLike`]) and
//! pub/sub ([`Subscribe`]) that are the simulated ones in simulation and the real ones on
//! spawned servers, so a Redis lock is written once against `ConnectionLike + Subscribe`.

use crate::env::Switch;
use crate::subscription::{Subscribe, Subscription};
use futures::future::Either;
use redis::aio::ConnectionLike;
use redis::{Cmd, Pipeline, RedisFuture};
use std::future::Future;

impl<S: ConnectionLike, R: ConnectionLike> ConnectionLike for Switch<S, R> {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, redis::Value> {
        match self {
            Switch::Sim(c) => c.req_packed_command(cmd),
            Switch::Real(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Switch::Sim(c) => c.req_packed_commands(pipeline, offset, count),
            Switch::Real(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Switch::Sim(c) => c.get_db(),
            Switch::Real(c) => c.get_db(),
        }
    }
}

impl<S: Subscribe, R: Subscribe> Subscribe for Switch<S, R> {
    type Subscription = Switch<S::Subscription, R::Subscription>;

    fn subscription(&self) -> Self::Subscription {
        match self {
            Switch::Sim(c) => Switch::Sim(c.subscription()),
            Switch::Real(c) => Switch::Real(c.subscription()),
        }
    }
}

impl<S: Subscription, R: Subscription> Subscription for Switch<S, R> {
    fn subscribe(&mut self, channel: &str) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            Switch::Sim(s) => Either::Left(s.subscribe(channel)),
            Switch::Real(s) => Either::Right(s.subscribe(channel)),
        }
    }

    fn unsubscribe(
        &mut self,
        channel: &str,
    ) -> impl Future<Output = redis::RedisResult<()>> + Send {
        match self {
            Switch::Sim(s) => Either::Left(s.unsubscribe(channel)),
            Switch::Real(s) => Either::Right(s.unsubscribe(channel)),
        }
    }

    fn next_message(&mut self) -> impl Future<Output = Option<Vec<u8>>> + Send {
        match self {
            Switch::Sim(s) => Either::Left(s.next_message()),
            Switch::Real(s) => Either::Right(s.next_message()),
        }
    }
}
