//! HTTP/1.1 to etcd's JSON gRPC gateway (etcd's API guide, "gRPC gateway": every v3 RPC is a
//! `POST /v3/<service>/<method>` with the request as JSON), spoken with `hyper`'s client
//! connection over a tokio `TcpStream`.
//!
//! Why not the `etcd-client` crate (tonic/gRPC): the requests the locks need are the same, and
//! tonic, prost and a `protoc` step would be part of every user's first build. Why a fresh
//! connection per request: a member's crash then costs one request, and a request cut by a
//! partition or a paused client cannot leave a half-read answer on a shared connection.
//!
//! A unary call's answer is one JSON object; a watch's is a stream that never ends, one JSON
//! message per line (the gateway's `application/json` streaming), read by [`Messages`].

use http_body_util::{BodyExt, Full};
use hyper::body::{Bytes, Incoming};
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::Request;
use hyper_util::rt::TokioIo;
use serde_json::Value;
use std::io;
use tokio::net::TcpStream;

/// Sends `body` to `path` on the member listening on `port` (127.0.0.1) and returns the answer
/// whose body is still to be read. The connection is driven by a task of its own, which ends when
/// the answer's body is read or dropped.
async fn send(port: u16, path: &str, body: &Value) -> io::Result<Incoming> {
    let stream = TcpStream::connect(("127.0.0.1", port)).await?;
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .map_err(io::Error::other)?;
    tokio::spawn(async move {
        // An error here is the request's own (the member went away): `send_request` or the
        // body's read reports it to the caller.
        let _ = connection.await;
    });
    let request = Request::post(path)
        .header(HOST, format!("127.0.0.1:{port}"))
        .header(CONTENT_TYPE, "application/json")
        .body(Full::new(Bytes::from(body.to_string())))
        .map_err(io::Error::other)?;
    let answer = sender
        .send_request(request)
        .await
        .map_err(io::Error::other)?;
    Ok(answer.into_body())
}

/// One unary call: the answer's JSON (an error answer's too: the gateway puts etcd's message in
/// its `error` field, which the caller reads).
pub(super) async fn post(port: u16, path: &str, body: &Value) -> io::Result<Value> {
    let bytes = send(port, path, body)
        .await?
        .collect()
        .await
        .map_err(io::Error::other)?
        .to_bytes();
    serde_json::from_slice(&bytes).map_err(|e| {
        io::Error::other(format!(
            "{e} in the answer to {path}: {}",
            String::from_utf8_lossy(&bytes)
        ))
    })
}

/// A streaming call's messages (a watch), one JSON value per line, as they arrive.
pub(super) struct Messages {
    body: Incoming,
    pending: Vec<u8>,
}

impl Messages {
    /// Opens the stream: sends `body` to `path`.
    pub(super) async fn open(port: u16, path: &str, body: &Value) -> io::Result<Messages> {
        Ok(Messages {
            body: send(port, path, body).await?,
            pending: Vec::new(),
        })
    }

    /// The next message; an error when the stream ended (the member went away) or broke.
    /// A line that is not JSON is skipped: the gateway writes only JSON, so it can only be a
    /// keep-alive's empty line.
    pub(super) async fn next(&mut self) -> io::Result<Value> {
        loop {
            while let Some(eol) = self.pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = self.pending.drain(..=eol).collect();
                if let Ok(message) = serde_json::from_slice::<Value>(&line) {
                    return Ok(message);
                }
            }
            match self.body.frame().await {
                None => return Err(io::Error::other("the stream ended")),
                Some(Err(e)) => return Err(io::Error::other(e)),
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.pending.extend_from_slice(&data);
                    }
                }
            }
        }
    }
}
