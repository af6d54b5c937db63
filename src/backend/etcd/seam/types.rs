//! The requests and answers of the etcd v3 API subset the locks use, shaped like etcd's own
//! protobuf messages (`etcdserverpb`) so that both worlds read them the same way: key-values with
//! their revisions, ranges, and transactions that compare a key's create revision.

/// A lease's id, as etcd hands it out (the simulated service counts from 1; a real one draws
/// them at random: compare ids only with each other).
pub type LeaseId = i64;

/// A revision of the whole key space: every change (put, delete, lease expiry's deletes) makes
/// the next one. A key's `create_revision` is the revision that created it, the fencing token
/// of the etcd lock.
pub type Revision = i64;

/// One key and its revisions (etcd's `mvccpb.KeyValue`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyValue {
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
    /// The revision of the put that created the key (0 for a key that does not exist).
    pub create_revision: Revision,
    /// The revision of the key's last put.
    pub mod_revision: Revision,
    /// How many puts since the key was created (1 after its creation).
    pub version: i64,
    /// The lease the key is attached to (0: none); the key goes when the lease does.
    pub lease: LeaseId,
}

/// What a range reads: one key, or every key in `[key, range_end)`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeRequest {
    /// The key, or the start of the range.
    pub key: String,
    /// The end of the range (excluded); `None` reads `key` alone.
    pub range_end: Option<String>,
    /// Order by create revision: `Some(true)` ascending, `Some(false)` descending; `None` keeps
    /// etcd's key order.
    pub by_create_ascending: Option<bool>,
    /// At most this many keys (0: all).
    pub limit: i64,
    /// Only keys whose create revision is at most this (0: no bound), etcd's
    /// `max_create_revision`: the lock asks for the waiters ahead of it with it.
    pub max_create_revision: Revision,
}

impl RangeRequest {
    /// Reads one key.
    pub fn key(key: impl Into<String>) -> RangeRequest {
        RangeRequest {
            key: key.into(),
            ..RangeRequest::default()
        }
    }

    /// Reads every key that starts with `prefix` (etcd's `WithPrefix`).
    pub fn prefix(prefix: impl Into<String>) -> RangeRequest {
        let key = prefix.into();
        RangeRequest {
            range_end: Some(prefix_end(&key)),
            key,
            ..RangeRequest::default()
        }
    }

    /// The first created key of the range (etcd's `WithFirstCreate`).
    pub fn first_created(mut self) -> RangeRequest {
        self.by_create_ascending = Some(true);
        self.limit = 1;
        self
    }

    /// The last created key of the range whose create revision is at most `max` (etcd's
    /// `WithLastCreate` and `WithMaxCreateRev`).
    pub fn last_created_up_to(mut self, max: Revision) -> RangeRequest {
        self.by_create_ascending = Some(false);
        self.limit = 1;
        self.max_create_revision = max;
        self
    }
}

/// The end of a prefix range: the prefix with its last byte incremented (etcd's
/// `GetPrefixRangeEnd`), so every key that starts with it sorts below it. The locks' prefixes are
/// ASCII ending in `/`, which always increments within ASCII.
pub fn prefix_end(prefix: &str) -> String {
    let mut bytes = prefix.as_bytes().to_vec();
    while let Some(last) = bytes.pop() {
        if last < 0x7f {
            bytes.push(last + 1);
            return String::from_utf8(bytes).unwrap_or_default();
        }
    }
    // etcd's "\0": every key from `prefix` on.
    "\0".to_string()
}

/// The answer to a range: the store's revision when it was read and the keys found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RangeResponse {
    /// The key space's revision at the read.
    pub revision: Revision,
    /// The keys, in the order asked for, at most `limit`.
    pub kvs: Vec<KeyValue>,
}

/// One operation inside a transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOp {
    /// A put, with the lease the key is attached to (0: none).
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
        /// The lease (0: none).
        lease: LeaseId,
    },
    /// A range read.
    Range(RangeRequest),
    /// Deletes one key.
    Delete {
        /// The key.
        key: String,
    },
}

/// One answer inside a transaction's answer, in the order of its operations.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TxnOpResponse {
    /// A put happened.
    Put,
    /// What a range read.
    Range(Vec<KeyValue>),
    /// How many keys a delete removed.
    Delete(i64),
}

/// A transaction: if every key of `compare` has the given create revision (0: the key does not
/// exist), run `success`, otherwise `failure`, atomically. The only comparison the locks need
/// is on the create revision (`concurrency.Mutex`'s `CreateRevision(key) = 0`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Txn {
    /// `(key, create revision)` pairs that must all hold.
    pub compare: Vec<(String, Revision)>,
    /// What runs when they do.
    pub success: Vec<TxnOp>,
    /// What runs when one does not.
    pub failure: Vec<TxnOp>,
}

/// A transaction's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TxnResponse {
    /// Whether the comparisons held (so `success` ran).
    pub succeeded: bool,
    /// The key space's revision after the transaction.
    pub revision: Revision,
    /// One answer per operation that ran.
    pub responses: Vec<TxnOpResponse>,
}

/// A granted lease: its id and the TTL the server granted (seconds; etcd raises a TTL below its
/// minimum).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The lease's id.
    pub id: LeaseId,
    /// The granted TTL in seconds.
    pub ttl_s: i64,
}
