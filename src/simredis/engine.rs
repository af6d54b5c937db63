//! The engine: the public face of the simulated Redis node's state machine.
//!
//! It owns the data and the per-connection state (MULTI queues, WATCHes, client names,
//! subscriptions) and runs one client command as Redis's processCommand does: the checks
//! (unknown command, arity, READONLY on a replica, MULTI queueing), then the command from the
//! table (`commands.rs`), or, for the commands that need more than the data, the engine's own
//! handling, which hands scripts to `scripts.rs` and FUNCTION/FCALL to `functions.rs`. It also
//! applies a master's replication stream and runs the active expiry sweep.

use super::clients::ClientNames;
use super::commands::{self, ENGINE};
use super::context::{Ctx, Db, Expiry};
use super::functions::Functions;
use super::keyspace::Data;
use super::reply::{self, bulk};
use super::scripts::{Eval, Scripts};
use super::transactions::Watches;
use redis::Value;
use std::collections::BTreeMap;

pub use super::role::{ClientId, Role};

/// What executing one client command did: its reply, plus what the server must pass on (writes
/// to its replicas, messages to subscribers). Named apart from a judged run's `Outcome`.
#[derive(Clone, Debug, PartialEq)]
pub struct Executed {
    /// The reply the client gets.
    pub reply: redis::Value,
    /// Write effects to replicate, in order, each a full command (args). Relative expiries are
    /// rewritten as absolute (SET ... PXAT t, PEXPIREAT k t); a unit (command, script or
    /// transaction) that produced more than one effect is wrapped in MULTI ... EXEC.
    /// Expiry-driven deletions (lazy on access, and active sweep) appear as DEL. Always empty
    /// on a replica.
    pub effects: Vec<Vec<Vec<u8>>>,
    /// Whether the command wrote anything a replica would have to apply (on a master: whether
    /// `effects` is non-empty, or would be if [`Engine::set_effects_wanted`] had not turned
    /// their recording off).
    pub wrote: bool,
    /// Pub/sub deliveries caused by this command (PUBLISH, including
    /// redis.call('publish', ..) in scripts): (subscriber, channel, payload).
    pub messages: Vec<(ClientId, Vec<u8>, Vec<u8>)>,
}

/// A MULTI in progress on one connection.
#[derive(Debug, Default)]
struct Transaction {
    queued: Vec<Vec<Vec<u8>>>,
    /// A queued command was refused (unknown, wrong arity, READONLY): EXEC will abort.
    dirty: bool,
}

/// A single-node Redis 7.0 command executor. Pure and synchronous: every result depends
/// only on the sequence of calls and the clock readings passed in.
#[derive(Debug)]
pub struct Engine {
    role: Role,
    db: Db,
    /// EVAL's script cache and the native path for known scripts.
    scripts: Scripts,
    transactions: BTreeMap<ClientId, Transaction>,
    watches: Watches,
    names: ClientNames,
    /// FUNCTION libraries: data that replicates, unlike the script cache.
    functions: Functions,
    /// Whether `execute` returns the write effects (see [`Engine::set_effects_wanted`]).
    effects_wanted: bool,
}

impl Engine {
    /// An empty server in `role`.
    pub fn new(role: Role) -> Self {
        Engine {
            role,
            db: Db::default(),
            scripts: Scripts::default(),
            transactions: BTreeMap::new(),
            watches: Watches::default(),
            names: ClientNames::default(),
            functions: Functions::default(),
            effects_wanted: true,
        }
    }

    /// Whether [`Engine::execute`] returns each write's effects. A master with no replica turns
    /// this off (its caller still learns that a command wrote, from [`Executed::wrote`]): copying
    /// every write's arguments for nobody was a few per cent of a simulated lock cycle. `WATCH`
    /// keeps working either way. On by default.
    pub fn set_effects_wanted(&mut self, on: bool) {
        self.effects_wanted = on;
    }

    /// Turns the native path for known scripts (`simredis/native.rs`) off or on: with it off every
    /// script runs in Lua (for tests that compare the two).
    pub fn set_native_scripts(&mut self, on: bool) {
        self.scripts.set_native(on);
    }

    /// How many script calls ran natively so far.
    pub fn native_runs(&self) -> u64 {
        self.scripts.native_runs()
    }

    /// Whether EVAL's Lua host has been built: only once a script had to compile or run in Lua
    /// (tests hold that the lock cycles' native scripts never build it).
    pub fn lua_host_built(&self) -> bool {
        self.scripts.lua_host_built()
    }

    /// Whether it is a master or a replica now (a failover changes it).
    pub fn role(&self) -> Role {
        self.role
    }

    /// Promotion (REPLICAOF NO ONE) keeps the data; from now on the node expires keys itself
    /// (including the ones its clock already considers dead, on their next access or sweep)
    /// and accepts writes. Demotion makes it read-only and stops its own expiry.
    pub fn set_role(&mut self, role: Role) {
        self.role = role;
    }

    fn expiry(&self) -> Expiry {
        match self.role {
            Role::Master => Expiry::Delete,
            // Why replicas never expire keys themselves: their clocks differ from the
            // master's, and a replica that deleted on its own clock would diverge from the
            // master's data; Redis instead has the master send DEL. Reads still hide keys the
            // replica's clock says are dead.
            Role::Replica => Expiry::Hide,
        }
    }

    /// Execute one client command. `now_ms` is THIS node's clock, unix milliseconds (it may
    /// be skewed: it is the only time source).
    pub fn execute(&mut self, now_ms: u64, client: ClientId, args: &[Vec<u8>]) -> Executed {
        let mut ctx = Ctx::new(clock(now_ms), self.expiry());
        ctx.record = self.effects_wanted || !self.watches.is_empty();
        let reply = self.client_command(&mut ctx, client, args);
        if !self.watches.is_empty() {
            self.watches.touch(&ctx.ops);
        }
        let replica = self.role == Role::Replica;
        let effects = if replica || !self.effects_wanted {
            Vec::new()
        } else {
            wrap_unit(ctx.ops)
        };
        Executed {
            reply,
            effects,
            wrote: !replica && ctx.writes > 0,
            messages: ctx.messages,
        }
    }

    /// Apply effects received from the master. A replica applies them even though it is
    /// read-only to clients, and uses keys as stored (expiry is the master's decision).
    pub fn apply_replicated(&mut self, now_ms: u64, cmds: &[Vec<Vec<u8>>]) {
        self.apply_replicated_with_messages(now_ms, cmds);
    }

    /// [`Engine::apply_replicated`], returning the pub/sub deliveries to this node's own
    /// subscribers (Redis replicates PUBLISH so that subscribers of a replica hear it too).
    pub fn apply_replicated_with_messages(
        &mut self,
        now_ms: u64,
        cmds: &[Vec<Vec<u8>>],
    ) -> Vec<(ClientId, Vec<u8>, Vec<u8>)> {
        let mut ctx = Ctx::new(clock(now_ms), Expiry::Ignore);
        if !self.watches.is_empty() {
            self.watches.touch(cmds);
        }
        for cmd in cmds {
            let Some(name) = cmd.first() else { continue };
            if name.eq_ignore_ascii_case(b"multi") || name.eq_ignore_ascii_case(b"exec") {
                continue;
            }
            let Some(spec) = commands::lookup(name) else {
                continue;
            };
            if !spec.arity_ok(cmd.len()) {
                continue;
            }
            if spec.flags & ENGINE != 0 {
                // Effects replication never sends scripts; accepted for completeness. Client
                // state (subscriptions, transactions) has no meaning in the master's stream.
                if matches!(spec.name, "eval" | "evalsha" | "script" | "function") {
                    let _ = self.engine_command(&mut ctx, 0, spec.name, cmd, Role::Master);
                }
            } else {
                let _ = (spec.run)(&mut self.db, &mut ctx, cmd);
            }
        }
        ctx.messages
    }

    /// Active expiry sweep (masters only; no-op on replicas): deletes every key whose expiry
    /// is before `now_ms` and returns the DEL effects to replicate. Real Redis samples keys
    /// randomly under a time budget; deleting all of them in index order is one of its
    /// possible outcomes and is deterministic.
    pub fn active_expire(&mut self, now_ms: u64) -> Vec<Vec<Vec<u8>>> {
        if self.role == Role::Replica {
            return Vec::new();
        }
        let now = clock(now_ms);
        let keys = self.db.keys.expired_keys(now);
        let mut dels = Vec::with_capacity(keys.len());
        for k in keys {
            self.db.keys.remove(&k);
            dels.push(vec![b"DEL".to_vec(), k]);
        }
        dels
    }

    /// Registers `client` for `channel`'s messages (Redisson's unlock wake-ups).
    pub fn subscribe(&mut self, client: ClientId, channel: &[u8]) {
        self.db.pubsub.subscribe(client, channel);
    }

    /// Stops `client` hearing `channel`.
    pub fn unsubscribe(&mut self, client: ClientId, channel: &[u8]) {
        self.db.pubsub.unsubscribe(client, channel);
    }

    /// Whether `client` is subscribed to any channel here (a subscriber connection of this server).
    pub fn is_subscriber(&self, client: ClientId) -> bool {
        self.db.pubsub.count(client) > 0
    }

    /// Connection closed: drop its subscriptions and any open transaction.
    pub fn disconnect(&mut self, client: ClientId) {
        self.db.pubsub.disconnect(client);
        self.transactions.remove(&client);
        self.watches.unwatch(client);
        self.names.forget(client);
    }

    /// Number of live (not logically expired at now_ms) keys, for tests and reports.
    pub fn dbsize(&self, now_ms: u64) -> usize {
        self.db.keys.len() - self.db.keys.expired_count(clock(now_ms))
    }

    /// The stored value of a string key, ignoring expiry (for tests and checkers).
    pub fn peek(&self, key: &[u8]) -> Option<&[u8]> {
        match self.db.keys.get(key) {
            Some(Data::Str(s)) => Some(s),
            _ => None,
        }
    }

    /// Who holds a lock entry at `now_ms`, as the server sees it: a string key's value, or a hash
    /// key's field names (Redisson-style holders); empty when the key is absent or logically
    /// expired. Lets the deployment record which client's entry a command removed.
    pub fn live_holders(&self, key: &[u8], now_ms: u64) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        self.live_holders_into(key, now_ms, &mut out);
        out
    }

    /// A number that changes whenever the data may have changed (`Keyspace::version`): equal
    /// before and after a command means the command changed no key.
    pub fn data_version(&self) -> u64 {
        self.db.keys.version()
    }

    /// [`Engine::live_holders`] into `out`, reusing its buffers: the deployment asks before and
    /// after every command, so this must not allocate once the buffers have grown.
    pub fn live_holders_into(&self, key: &[u8], now_ms: u64, out: &mut Vec<Vec<u8>>) {
        let mut n = 0;
        let mut put = |holder: &[u8]| {
            match out.get_mut(n) {
                Some(buf) => {
                    buf.clear();
                    buf.extend_from_slice(holder);
                }
                None => out.push(holder.to_vec()),
            }
            n += 1;
        };
        match self.db.keys.get_live(key, clock(now_ms)) {
            Some(Data::Str(s)) => put(s),
            Some(Data::Hash(h)) => h.iter().for_each(|(f, _)| put(f)),
            _ => {}
        }
        out.truncate(n);
    }

    /// Whether key `key` exists at `now_ms` (a Redis Cluster node's question during a slot's
    /// migration: is the key still here, or must the client ask the target?).
    pub fn has_key(&self, key: &[u8], now_ms: u64) -> bool {
        self.db.keys.contains(key) && !self.db.keys.is_expired(key, clock(now_ms))
    }

    /// The live keys at `now_ms` that `keep` accepts, in byte order: a Redis Cluster slot's
    /// keys, for `MIGRATE` (`migrate.rs`).
    pub fn live_keys_where(&self, now_ms: u64, keep: impl Fn(&[u8]) -> bool) -> Vec<Vec<u8>> {
        super::migrate::live_keys_where(&self.db.keys, clock(now_ms), keep)
    }

    /// The commands that rebuild live key `key` on another node, its remaining time to live
    /// included (`MIGRATE`'s `DUMP` and `RESTORE`); `None` if it is absent or expired.
    pub fn rebuild_commands(&self, key: &[u8], now_ms: u64) -> Option<Vec<Vec<Vec<u8>>>> {
        super::migrate::rebuild_commands(&self.db.keys, key, clock(now_ms))
    }

    /// The absolute expiry of a stored key, in this node's clock (for tests and reports).
    pub fn expire_at(&self, key: &[u8]) -> Option<i64> {
        self.db.keys.expire_at(key)
    }

    /// Whether a FUNCTION library registered a function of this name (case-insensitively).
    pub fn function_exists(&self, name: &str) -> bool {
        self.functions.exists(name)
    }

    /// Whether a script with this sha1 is cached.
    pub fn script_exists(&self, sha: &[u8]) -> bool {
        self.scripts.exists(sha)
    }

    /// A command from a client connection: Redis's processCommand checks, then the command.
    fn client_command(&mut self, ctx: &mut Ctx, client: ClientId, args: &[Vec<u8>]) -> Value {
        let Some(name) = args.first() else {
            return reply::error("ERR empty command");
        };
        let spec = commands::lookup(name);
        let in_tx = self.transactions.contains_key(&client);
        let refused = match spec {
            None => Some(reply::unknown_command(args)),
            Some(s) if !s.arity_ok(args.len()) => Some(reply::arity(s.name)),
            Some(s) if self.role == Role::Replica && s.is_write() => Some(reply::readonly()),
            // Container commands: the subcommand is checked before MULTI queues it.
            Some(s) if in_tx => match s.name {
                "function" => Functions::refuse(args, self.role),
                "script" => Scripts::refuse(args),
                "client" => ClientNames::refuse(args),
                _ => None,
            },
            Some(_) => None,
        };
        if let Some(err) = refused {
            if let Some(tx) = self.transactions.get_mut(&client) {
                tx.dirty = true;
            }
            return err;
        }
        let spec = spec.expect("refused above otherwise");
        if in_tx && !matches!(spec.name, "exec" | "discard" | "multi" | "watch") {
            let tx = self.transactions.get_mut(&client).expect("in tx");
            tx.queued.push(args.to_vec());
            return Value::SimpleString("QUEUED".into());
        }
        if spec.flags & ENGINE != 0 {
            let role = self.role;
            return self.engine_command(ctx, client, spec.name, args, role);
        }
        (spec.run)(&mut self.db, ctx, args)
    }

    /// Commands that need more than the data: scripts, subscriptions, transactions.
    fn engine_command(
        &mut self,
        ctx: &mut Ctx,
        client: ClientId,
        name: &str,
        args: &[Vec<u8>],
        role: Role,
    ) -> Value {
        match name {
            "eval" => self.eval(ctx, args, Eval::default(), role),
            "evalsha" => self.eval(ctx, args, Eval::by_sha(), role),
            "eval_ro" => self.eval(ctx, args, Eval::read_only(), role),
            "evalsha_ro" => self.eval(ctx, args, Eval::by_sha().and_read_only(), role),
            "script" => self.scripts.command(args),
            "subscribe" => {
                let replies = args[1..]
                    .iter()
                    .map(|ch| {
                        self.db.pubsub.subscribe(client, ch);
                        pubsub_reply("subscribe", Some(ch), self.db.pubsub.count(client))
                    })
                    .collect();
                one_or_many(replies)
            }
            "unsubscribe" => {
                let channels: Vec<Vec<u8>> = if args.len() > 1 {
                    args[1..].to_vec()
                } else {
                    self.db.pubsub.channels_of(client)
                };
                if channels.is_empty() {
                    return pubsub_reply("unsubscribe", None, 0);
                }
                let replies = channels
                    .iter()
                    .map(|ch| {
                        self.db.pubsub.unsubscribe(client, ch);
                        pubsub_reply("unsubscribe", Some(ch), self.db.pubsub.count(client))
                    })
                    .collect();
                one_or_many(replies)
            }
            "multi" => {
                if self.transactions.contains_key(&client) {
                    return reply::error("ERR MULTI calls can not be nested");
                }
                self.transactions.insert(client, Transaction::default());
                Value::Okay
            }
            "watch" if self.transactions.contains_key(&client) => {
                reply::error("ERR WATCH inside MULTI is not allowed")
            }
            "watch" => {
                self.watches
                    .watch(client, &self.db.keys, ctx.now, &args[1..]);
                Value::Okay
            }
            "client" => self.names.command(client, args),
            "hello" => self.names.hello(client, args, role),
            "function" => self.functions.command(ctx, args, role),
            "fcall" => self.functions.fcall(&mut self.db, ctx, args, role, false),
            "fcall_ro" => self.functions.fcall(&mut self.db, ctx, args, role, true),
            "unwatch" => {
                self.watches.unwatch(client);
                Value::Okay
            }
            "discard" => match self.transactions.remove(&client) {
                Some(_) => {
                    self.watches.unwatch(client);
                    Value::Okay
                }
                None => reply::error("ERR DISCARD without MULTI"),
            },
            "exec" => match self.transactions.remove(&client) {
                None => reply::error("ERR EXEC without MULTI"),
                Some(tx) if tx.dirty => {
                    self.watches.unwatch(client);
                    reply::error("EXECABORT Transaction discarded because of previous errors.")
                }
                // A watched key was touched: the transaction does not run (a null array).
                Some(_) if !self.watches.exec_allowed(client, &self.db.keys, ctx.now) => Value::Nil,
                Some(tx) => Value::Array(
                    tx.queued
                        .iter()
                        .map(|cmd| self.client_command(ctx, client, cmd))
                        .collect(),
                ),
            },
            _ => reply::error("ERR command handled by the node layer"),
        }
    }
    /// EVAL and its forms: the script runs on the engine's data, in this unit's context.
    fn eval(&mut self, ctx: &mut Ctx, args: &[Vec<u8>], how: Eval, role: Role) -> Value {
        self.scripts.eval(&mut self.db, ctx, args, how, role)
    }
}

/// Node clocks are unix ms; the keyspace works in i64 as Redis does.
fn clock(now_ms: u64) -> i64 {
    i64::try_from(now_ms).unwrap_or(i64::MAX)
}

/// A unit that wrote more than once replicates as one MULTI ... EXEC, so a replica applies
/// it atomically (Redis 7.0's propagatePendingCommands).
fn wrap_unit(ops: Vec<Vec<Vec<u8>>>) -> Vec<Vec<Vec<u8>>> {
    if ops.len() <= 1 {
        return ops;
    }
    let mut out = Vec::with_capacity(ops.len() + 2);
    out.push(vec![b"MULTI".to_vec()]);
    out.extend(ops);
    out.push(vec![b"EXEC".to_vec()]);
    out
}

fn pubsub_reply(kind: &str, channel: Option<&[u8]>, count: usize) -> Value {
    Value::Array(vec![
        bulk(kind.as_bytes()),
        channel.map_or(Value::Nil, bulk),
        Value::Int(count as i64),
    ])
}

/// SUBSCRIBE with several channels sends one confirmation per channel; `execute` returns one
/// reply, so several confirmations come back as an array of them.
fn one_or_many(mut replies: Vec<Value>) -> Value {
    if replies.len() == 1 {
        replies.pop().expect("one")
    } else {
        Value::Array(replies)
    }
}
