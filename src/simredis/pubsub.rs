//! Channel subscriptions (no patterns: the lock designs publish to fixed channels).

use super::role::ClientId;
use std::collections::BTreeMap;

/// Subscribers per channel in subscription order (the order Redis delivers in), and the
/// reverse map so a disconnect drops a client everywhere.
#[derive(Clone, Debug, Default)]
pub struct PubSub {
    channels: BTreeMap<Vec<u8>, Vec<ClientId>>,
    clients: BTreeMap<ClientId, Vec<Vec<u8>>>,
}

impl PubSub {
    /// Returns false if the client was already subscribed.
    pub fn subscribe(&mut self, client: ClientId, channel: &[u8]) -> bool {
        let subs = self.channels.entry(channel.to_vec()).or_default();
        if subs.contains(&client) {
            return false;
        }
        subs.push(client);
        self.clients
            .entry(client)
            .or_default()
            .push(channel.to_vec());
        true
    }

    /// Returns false if the client was not subscribed.
    pub fn unsubscribe(&mut self, client: ClientId, channel: &[u8]) -> bool {
        let Some(subs) = self.channels.get_mut(channel) else {
            return false;
        };
        let Some(i) = subs.iter().position(|&c| c == client) else {
            return false;
        };
        subs.remove(i);
        if subs.is_empty() {
            self.channels.remove(channel);
        }
        if let Some(chs) = self.clients.get_mut(&client) {
            chs.retain(|c| c != channel);
            if chs.is_empty() {
                self.clients.remove(&client);
            }
        }
        true
    }

    pub fn disconnect(&mut self, client: ClientId) {
        for ch in self.clients.remove(&client).unwrap_or_default() {
            if let Some(subs) = self.channels.get_mut(&ch) {
                subs.retain(|&c| c != client);
                if subs.is_empty() {
                    self.channels.remove(&ch);
                }
            }
        }
    }

    /// Number of channels the client is subscribed to (the count in SUBSCRIBE replies).
    pub fn count(&self, client: ClientId) -> usize {
        self.clients.get(&client).map_or(0, Vec::len)
    }

    /// The channels a client is subscribed to, in subscription order.
    pub fn channels_of(&self, client: ClientId) -> Vec<Vec<u8>> {
        self.clients.get(&client).cloned().unwrap_or_default()
    }

    /// The subscribers of a channel, in delivery order.
    pub fn subscribers(&self, channel: &[u8]) -> &[ClientId] {
        self.channels.get(channel).map_or(&[], Vec::as_slice)
    }
}
