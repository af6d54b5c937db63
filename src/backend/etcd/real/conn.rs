//! A client of real `etcd` members over etcd's JSON gRPC gateway (`/v3/kv/range`, `/v3/kv/txn`,
//! `/v3/lease/grant`, `/v3/watch`, ... on the client port: etcd's API guide, "gRPC gateway"),
//! behind the same [`EtcdClient`] seam as the simulated etcd.
//!
//! Why the gateway and not the `etcd-client` crate (tonic/gRPC): the gateway is a few HTTP/1.1
//! requests with JSON bodies (`etcd_gateway.rs`, with `hyper`'s client), while the gRPC client
//! would add tonic, prost and a `protoc` step to every user's first build for the same requests.
//! Keys and values are base64 in the gateway's JSON, 64-bit numbers are strings, and zero values
//! are left out (proto3's JSON mapping).
//!
//! A request that gets no answer within the timeout fails with [`EtcdError::NoAnswer`]; the next
//! one goes to the next member, as etcd's own client balances across its endpoints.

use std::time::Duration;

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use serde_json::{json, Value};

use crate::backend::etcd::real::gateway::{post, Messages};
use crate::backend::etcd::seam::{
    EtcdClient, EtcdError, KeyValue, Lease, LeaseId, RangeRequest, RangeResponse,
};
use crate::backend::etcd::seam::{Revision, Txn, TxnOp, TxnOpResponse, TxnResponse};

/// One client of a real etcd cluster: the members' client ports on 127.0.0.1.
#[derive(Clone, Debug)]
pub struct RealEtcdConn {
    ports: Vec<u16>,
    current: usize,
    timeout: Duration,
}

impl RealEtcdConn {
    /// A client of the members listening on `ports` (127.0.0.1); every request gets `timeout`
    /// to answer. Connects per request, so a member's crash costs one request.
    pub fn new(ports: Vec<u16>, timeout: Duration) -> RealEtcdConn {
        assert!(
            !ports.is_empty(),
            "an etcd client needs at least one member"
        );
        RealEtcdConn {
            ports,
            current: 0,
            timeout,
        }
    }

    async fn post(&mut self, path: &str, body: Value) -> Result<Value, EtcdError> {
        let port = self.ports[self.current];
        let answer = tokio::time::timeout(self.timeout, post(port, path, &body)).await;
        let failed = |e: String| EtcdError::NoAnswer(format!("{path} on port {port}: {e}"));
        let result = match answer {
            Err(_) => Err(failed("timed out".into())),
            Ok(Err(e)) => Err(failed(e.to_string())),
            Ok(Ok(v)) => Ok(v),
        };
        if result.is_err() {
            self.current = (self.current + 1) % self.ports.len();
        }
        let v = result?;
        if let Some(message) = v.get("error").and_then(Value::as_str) {
            return Err(refusal(message));
        }
        Ok(v)
    }
}

/// The refusals etcd words as "outcome unknown" (gRPC `Unavailable`, `rpctypes/error.go`).
const UNAVAILABLE: [&str; 3] = ["leader changed", "no leader", "request timed out"];

/// A gateway error's message as the seam's error.
fn refusal(message: &str) -> EtcdError {
    let text = message
        .strip_prefix("etcdserver: ")
        .unwrap_or(message)
        .to_string();
    if message.contains("requested lease not found") {
        EtcdError::LeaseNotFound
    } else if UNAVAILABLE.iter().any(|u| text.starts_with(u)) {
        EtcdError::Unavailable(text)
    } else {
        EtcdError::Rejected(text)
    }
}

pub(super) fn b64(text: &str) -> String {
    B64.encode(text.as_bytes())
}

pub(super) fn unb64(v: &Value) -> String {
    v.as_str()
        .and_then(|s| B64.decode(s).ok())
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .unwrap_or_default()
}

/// A proto3 JSON 64-bit number: a string, or absent for 0.
pub(super) fn int(v: &Value) -> i64 {
    match v {
        Value::String(s) => s.parse().unwrap_or(0),
        Value::Number(n) => n.as_i64().unwrap_or(0),
        _ => 0,
    }
}

fn revision(v: &Value) -> Revision {
    int(&v["header"]["revision"])
}

fn key_value(v: &Value) -> KeyValue {
    KeyValue {
        key: unb64(&v["key"]),
        value: unb64(&v["value"]),
        create_revision: int(&v["create_revision"]),
        mod_revision: int(&v["mod_revision"]),
        version: int(&v["version"]),
        lease: int(&v["lease"]),
    }
}

fn kvs(v: &Value) -> Vec<KeyValue> {
    v["kvs"]
        .as_array()
        .map(|a| a.iter().map(key_value).collect())
        .unwrap_or_default()
}

fn range_json(r: &RangeRequest) -> Value {
    let mut v = json!({ "key": b64(&r.key) });
    if let Some(end) = &r.range_end {
        v["range_end"] = json!(b64(end));
    }
    if let Some(ascending) = r.by_create_ascending {
        v["sort_target"] = json!("CREATE");
        v["sort_order"] = json!(if ascending { "ASCEND" } else { "DESCEND" });
    }
    if r.limit > 0 {
        v["limit"] = json!(r.limit.to_string());
    }
    if r.max_create_revision > 0 {
        v["max_create_revision"] = json!(r.max_create_revision.to_string());
    }
    v
}

fn op_json(op: &TxnOp) -> Value {
    match op {
        TxnOp::Put { key, value, lease } => {
            let mut put = json!({ "key": b64(key), "value": b64(value) });
            if *lease != 0 {
                put["lease"] = json!(lease.to_string());
            }
            json!({ "request_put": put })
        }
        TxnOp::Range(r) => json!({ "request_range": range_json(r) }),
        TxnOp::Delete { key } => json!({ "request_delete_range": { "key": b64(key) } }),
    }
}

fn op_response(op: &TxnOp, v: &Value) -> TxnOpResponse {
    match op {
        TxnOp::Put { .. } => TxnOpResponse::Put,
        TxnOp::Range(_) => TxnOpResponse::Range(kvs(&v["response_range"])),
        TxnOp::Delete { .. } => TxnOpResponse::Delete(int(&v["response_delete_range"]["deleted"])),
    }
}

impl EtcdClient for RealEtcdConn {
    async fn lease_grant(&mut self, ttl_s: i64) -> Result<Lease, EtcdError> {
        let v = self
            .post("/v3/lease/grant", json!({ "TTL": ttl_s }))
            .await?;
        Ok(Lease {
            id: int(&v["ID"]),
            ttl_s: int(&v["TTL"]),
        })
    }

    async fn lease_keep_alive(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        let v = self
            .post("/v3/lease/keepalive", json!({ "ID": id.to_string() }))
            .await?;
        // The stream's one answer is under `result`; a lease that is gone answers TTL 0 (left
        // out), which etcd's own client reads as "lease not found".
        match int(&v["result"]["TTL"]) {
            ttl if ttl > 0 => Ok(ttl),
            _ => Err(EtcdError::LeaseNotFound),
        }
    }

    async fn lease_time_to_live(&mut self, id: LeaseId) -> Result<i64, EtcdError> {
        let v = self
            .post("/v3/lease/timetolive", json!({ "ID": id.to_string() }))
            .await?;
        match int(&v["TTL"]) {
            ttl if ttl >= 0 => Ok(ttl),
            _ => Err(EtcdError::LeaseNotFound),
        }
    }

    async fn lease_revoke(&mut self, id: LeaseId) -> Result<(), EtcdError> {
        self.post("/v3/lease/revoke", json!({ "ID": id.to_string() }))
            .await?;
        Ok(())
    }

    async fn range(&mut self, request: RangeRequest) -> Result<RangeResponse, EtcdError> {
        let v = self.post("/v3/kv/range", range_json(&request)).await?;
        Ok(RangeResponse {
            revision: revision(&v),
            kvs: kvs(&v),
        })
    }

    async fn txn(&mut self, txn: Txn) -> Result<TxnResponse, EtcdError> {
        let compare: Vec<Value> = txn
            .compare
            .iter()
            .map(|(key, create)| {
                json!({ "target": "CREATE", "key": b64(key), "result": "EQUAL",
                        "create_revision": create.to_string() })
            })
            .collect();
        let body = json!({
            "compare": compare,
            "success": txn.success.iter().map(op_json).collect::<Vec<_>>(),
            "failure": txn.failure.iter().map(op_json).collect::<Vec<_>>(),
        });
        let v = self.post("/v3/kv/txn", body).await?;
        let succeeded = v["succeeded"].as_bool().unwrap_or(false);
        let ops = if succeeded {
            &txn.success
        } else {
            &txn.failure
        };
        let answers = v["responses"].as_array().cloned().unwrap_or_default();
        Ok(TxnResponse {
            succeeded,
            revision: revision(&v),
            responses: ops
                .iter()
                .zip(answers.iter().chain(std::iter::repeat(&Value::Null)))
                .map(|(op, a)| op_response(op, a))
                .collect(),
        })
    }

    async fn delete(&mut self, key: &str) -> Result<(i64, Revision), EtcdError> {
        let v = self
            .post("/v3/kv/deleterange", json!({ "key": b64(key) }))
            .await?;
        Ok((int(&v["deleted"]), revision(&v)))
    }

    async fn wait_deleted(
        &mut self,
        key: &str,
        from_revision: Revision,
    ) -> Result<Revision, EtcdError> {
        let port = self.ports[self.current];
        let body = json!({ "create_request": {
            "key": b64(key), "start_revision": from_revision.to_string() } });
        let failed = |e: std::io::Error| EtcdError::NoAnswer(format!("watch on port {port}: {e}"));
        let mut messages = Messages::open(port, "/v3/watch", &body)
            .await
            .map_err(failed)?;
        loop {
            let message = match messages.next().await {
                Ok(m) => m,
                Err(e) => {
                    self.current = (self.current + 1) % self.ports.len();
                    return Err(failed(e));
                }
            };
            if let Some(error) = message["error"]["message"].as_str() {
                return Err(refusal(error));
            }
            let result = &message["result"];
            if result["canceled"].as_bool() == Some(true) {
                let reason = result["cancel_reason"].as_str().unwrap_or("watch canceled");
                return Err(EtcdError::Rejected(reason.to_string()));
            }
            let events = result["events"].as_array().cloned().unwrap_or_default();
            for event in events {
                if event["type"].as_str() == Some("DELETE") {
                    return Ok(int(&event["kv"]["mod_revision"]));
                }
            }
        }
    }
}
