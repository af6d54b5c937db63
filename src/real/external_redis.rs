//! Servers lockcheck did not start (`--redis URL`, `--key-prefix`): what the command line gives,
//! checked, for the runs of every lock kind (a kind whose backend cannot use them says so).
//! Running a scenario against them is the Redis backend's (`backend/redis/real/external.rs`).

use crate::real::RealError;

/// Redis servers that lockcheck did not start: one URL per master group of the scenario.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExternalRedis {
    /// `redis://[user:password@]host:port[/db]`, in master group order.
    pub urls: Vec<String>,
    /// Prefix of every key lockcheck writes (`None`: a fresh `lockcheck:<uuid>:` per run).
    pub key_prefix: Option<String>,
}

impl ExternalRedis {
    /// From `--redis` (comma-separated URLs) and `--key-prefix`.
    pub fn parse(urls: &str, key_prefix: Option<String>) -> Result<ExternalRedis, RealError> {
        let urls: Vec<String> = urls
            .split(',')
            .map(|u| u.trim().to_string())
            .filter(|u| !u.is_empty())
            .collect();
        if urls.is_empty() {
            return Err(RealError::External(
                "--redis: give at least one URL, e.g. --redis redis://127.0.0.1:6380".into(),
            ));
        }
        for u in &urls {
            if let Err(e) = redis::Client::open(u.as_str()) {
                return Err(RealError::External(format!(
                    "--redis {}: not a Redis URL ({e}); write redis://[user:password@]host:port[/db]",
                    redact(u)
                )));
            }
        }
        if key_prefix.as_deref() == Some("") {
            return Err(RealError::External(
                "--key-prefix is empty: lockcheck deletes every key under its prefix afterwards, \
                 so the prefix must set its keys apart (e.g. --key-prefix lockcheck:test:)"
                    .into(),
            ));
        }
        Ok(ExternalRedis { urls, key_prefix })
    }

    /// The prefix for one run: the one given, or a fresh `lockcheck:<uuid>:`.
    pub fn prefix_for_run(&self) -> String {
        self.key_prefix
            .clone()
            .unwrap_or_else(|| format!("lockcheck:{}:", uuid::Uuid::new_v4()))
    }
}

/// `url` with its password replaced by `***`, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s => {
            let cred = &url[s + 3..at];
            match cred.find(':') {
                Some(colon) => format!("{}{}:***{}", &url[..s + 3], &cred[..colon], &url[at..]),
                None => format!("{}***{}", &url[..s + 3], &url[at..]),
            }
        }
        _ => url.to_string(),
    }
}
