//! A watch cache of one kind of object (Nodes, gitfleet's Pods): one LIST,
//! then a WATCH from the list's `resourceVersion` that stays open between
//! iterations. [`Watched::sync`] is called at the start of each
//! observation and drains, without waiting, the events the API server has
//! sent since the last one (at most [`MAX_EVENTS`]), so an unchanged
//! iteration makes no request and reads nothing.
//!
//! - A watch the server ended (its `timeoutSeconds`, a dropped
//!   connection, a broken event) is opened again from the last
//!   `resourceVersion` seen (objects and bookmarks move it on).
//! - `410 Gone` (the version is older than the server keeps), as the
//!   answer to the WATCH or as an event in it, drops the cache: the
//!   objects are listed again and a new watch starts from that list.
//!
//! No background task: what is drained is what has arrived when the
//! observation starts, so a test that sends events before it observes
//! gets them all, in order. The cache may lag the cluster by what is
//! still in flight; the executor confirms with a LIST before it acts on
//! what the cache says (docs/kubernetes.md, "Watching").

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Mutex;

use futures_util::future::FutureExt;
use futures_util::stream::{BoxStream, StreamExt};
use kube::api::{Api, ListParams, WatchEvent, WatchParams};
use kube::core::Resource;
use serde::de::DeserializeOwned;

/// The most events drained per kind in one observation; the rest wait
/// for the next one.
pub const MAX_EVENTS: usize = 100_000;

/// The `timeoutSeconds` of each WATCH (kube-rs's default): the server
/// ends the watch after it, and the next observation opens another.
pub const WATCH_TIMEOUT_SECS: u32 = 290;

/// What one [`Watched::sync`] did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Synced {
    /// LISTs made (a first sync, or after 410 Gone).
    pub lists: usize,
    /// WATCHes opened.
    pub watches: usize,
    /// Events applied (bookmarks included).
    pub events: usize,
}

/// The objects of one kind, kept current by a watch.
pub struct Watched<K> {
    /// (namespace, name) → the object, as last listed or watched.
    objects: BTreeMap<(String, String), K>,
    /// The version to watch from; `None`: list first.
    version: Option<String>,
    /// The open watch, if any (in a mutex only to be `Sync`: it is only
    /// reached through `&mut self`).
    stream: Option<Mutex<BoxStream<'static, kube::Result<WatchEvent<K>>>>>,
    /// The label selector of the LIST and the WATCH.
    selector: Option<String>,
}

impl<K> Debug for Watched<K> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watched")
            .field("objects", &self.objects.len())
            .field("version", &self.version)
            .field("watching", &self.stream.is_some())
            .finish()
    }
}

/// Why draining stopped.
enum Stop {
    /// Nothing more has arrived.
    Idle,
    /// The watch ended (or broke): open it again from the last version.
    Ended,
    /// The version is gone: list again.
    Gone,
}

fn key<K: Resource>(object: &K) -> (String, String) {
    let meta = object.meta();
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

fn gone(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 410)
}

impl<K> Watched<K>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    /// An empty cache of the objects matching `selector` (all when `None`);
    /// the first [`sync`](Self::sync) lists them.
    pub fn new(selector: Option<&str>) -> Self {
        Watched {
            objects: BTreeMap::new(),
            version: None,
            stream: None,
            selector: selector.map(str::to_string),
        }
    }

    /// The cached objects, by (namespace, name).
    pub fn objects(&self) -> &BTreeMap<(String, String), K> {
        &self.objects
    }

    /// The `resourceVersion` the cache is at, if it has been listed.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Forgets everything: the next sync lists again.
    pub fn reset(&mut self) {
        self.objects.clear();
        self.version = None;
        self.stream = None;
    }

    fn list_params(&self) -> ListParams {
        match &self.selector {
            Some(s) => ListParams::default().labels(s),
            None => ListParams::default(),
        }
    }

    fn watch_params(&self) -> WatchParams {
        let wp = WatchParams::default().timeout(WATCH_TIMEOUT_SECS);
        match &self.selector {
            Some(s) => wp.labels(s),
            None => wp,
        }
    }

    /// Brings the cache up to what the API server has sent: lists when it
    /// has no version, opens the watch when none is open, then drains the
    /// events that have arrived, without waiting. At most two LISTs and two
    /// WATCHes per call (a watch that ends at once is opened again at the
    /// next call). An error (the LIST or the WATCH refused, the server
    /// unreachable) leaves the cache as it was, to try again next time.
    pub async fn sync(&mut self, api: &Api<K>) -> kube::Result<Synced> {
        let mut done = Synced::default();
        // Bounded: each turn lists or opens a watch, or drains.
        for _ in 0..4 {
            if self.version.is_none() {
                let list = api.list(&self.list_params()).await?;
                done.lists += 1;
                self.objects = list.items.into_iter().map(|o| (key(&o), o)).collect();
                self.version = Some(list.metadata.resource_version.unwrap_or_default());
            }
            if self.stream.is_none() {
                let version = self.version.clone().unwrap_or_default();
                match api.watch(&self.watch_params(), &version).await {
                    Ok(stream) => {
                        done.watches += 1;
                        self.stream = Some(Mutex::new(stream.boxed()));
                    }
                    Err(e) if gone(&e) => {
                        tracing::info!(version, "watch version gone (410): listing again");
                        self.reset();
                        continue;
                    }
                    Err(e) => return Err(e),
                }
            }
            match self.drain(&mut done).await {
                Stop::Idle => break,
                Stop::Ended => {
                    self.stream = None;
                    if done.watches >= 2 {
                        break;
                    }
                }
                Stop::Gone => {
                    tracing::info!("watch event 410 Gone: listing again");
                    self.reset();
                    if done.lists >= 2 {
                        break;
                    }
                }
            }
        }
        Ok(done)
    }

    /// Applies every event that has arrived; what stopped it.
    async fn drain(&mut self, done: &mut Synced) -> Stop {
        // Tokio's cooperative budget would make a ready channel look empty
        // after a few hundred polls; nothing here waits, so it is lifted.
        for _ in 0..MAX_EVENTS {
            match tokio::task::unconstrained(async { self.next_event() }).await {
                Ok(event) => {
                    done.events += 1;
                    self.apply(event);
                }
                Err(stop) => return stop,
            }
        }
        Stop::Idle
    }

    /// The next thing the watch has for us, without waiting.
    fn next_event(&mut self) -> Result<WatchEvent<K>, Stop> {
        let Some(stream) = self.stream.as_mut() else {
            return Err(Stop::Ended);
        };
        let stream = stream
            .get_mut()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match stream.next().now_or_never() {
            None => Err(Stop::Idle),
            Some(None) => Err(Stop::Ended),
            Some(Some(Ok(WatchEvent::Error(status)))) if status.code == 410 => Err(Stop::Gone),
            Some(Some(Ok(WatchEvent::Error(status)))) => {
                tracing::warn!(code = status.code, message = %status.message, "watch error event: watching again");
                Err(Stop::Ended)
            }
            Some(Some(Ok(event))) => Ok(event),
            Some(Some(Err(e))) => {
                tracing::warn!(error = %e, "watch broke: watching again");
                Err(Stop::Ended)
            }
        }
    }

    fn apply(&mut self, event: WatchEvent<K>) {
        match event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) => {
                self.version = o.meta().resource_version.clone().or(self.version.take());
                self.objects.insert(key(&o), o);
            }
            WatchEvent::Deleted(o) => {
                self.version = o.meta().resource_version.clone().or(self.version.take());
                self.objects.remove(&key(&o));
            }
            WatchEvent::Bookmark(b) => self.version = Some(b.metadata.resource_version),
            WatchEvent::Error(_) => {}
        }
    }
}
