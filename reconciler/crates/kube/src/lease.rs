//! Leader election on a `coordination.k8s.io/v1` Lease, so that two
//! replicas never both write to the cluster.
//!
//! A replica leads while the Lease names it (`holderIdentity`) and its
//! `renewTime` is younger than `leaseDurationSeconds`. Every write to the
//! Lease is a compare-and-swap: a create (409 when another replica created
//! it first) or a replace carrying the `resourceVersion` last read (409
//! when anyone wrote it since), so two contenders cannot both win. A
//! leader renews when a third of the duration has passed since its last
//! renewal and writes nothing in between renewals that failed: losing the
//! Lease stops its writes at once.

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::Client;
use kube::api::{Api, PostParams};

use model::observed::Timestamp;

use crate::errors::conflict;

/// The Lease's default name.
pub const DEFAULT_LEASE: &str = "gitfleet";
/// How long a Lease holds without renewal, by default (as client-go's 15 s).
pub const DEFAULT_DURATION_SECS: u32 = 15;

/// Which Lease, and who this replica is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseConfig {
    /// The Lease's namespace.
    pub namespace: String,
    /// The Lease's name.
    pub name: String,
    /// This replica's `holderIdentity` (its Pod name, else host and pid).
    pub identity: String,
    /// `leaseDurationSeconds`.
    pub duration_secs: u32,
}

impl LeaseConfig {
    /// The Lease [`DEFAULT_LEASE`] in `namespace`, held for
    /// [`DEFAULT_DURATION_SECS`], by `identity`.
    pub fn new(namespace: impl Into<String>, identity: impl Into<String>) -> Self {
        LeaseConfig {
            namespace: namespace.into(),
            name: DEFAULT_LEASE.to_string(),
            identity: identity.into(),
            duration_secs: DEFAULT_DURATION_SECS,
        }
    }

    /// How long a leader goes on writing after a renewal before it renews
    /// again: a third of the duration.
    pub fn renew_every(&self) -> std::time::Duration {
        std::time::Duration::from_secs(u64::from(self.duration_secs.div_ceil(3)))
    }
}

/// The outcome of a try to lead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Leadership {
    /// This replica holds the Lease.
    Leading,
    /// Another replica holds it (its identity, when known).
    Following {
        /// The holder's identity, or a description.
        holder: String,
    },
}

/// The Lease this replica holds: the object last written (with its
/// resourceVersion) and when.
#[derive(Debug, Clone)]
struct Held {
    lease: Lease,
    renewed: Timestamp,
}

/// Tries to hold a Lease ([`Elector::try_lead`]) and says whether this
/// replica may write ([`Elector::may_write`]).
#[derive(Debug, Clone)]
pub struct Elector {
    config: LeaseConfig,
    held: Option<Held>,
}

fn micro(t: Timestamp) -> Option<MicroTime> {
    let nanos = i32::try_from(t.timestamp_subsec_nanos()).ok()?;
    k8s_openapi::jiff::Timestamp::new(t.timestamp(), nanos)
        .ok()
        .map(MicroTime)
}

fn chrono_of(t: &MicroTime) -> Option<Timestamp> {
    chrono::DateTime::from_timestamp(t.0.as_second(), t.0.subsec_nanosecond().try_into().ok()?)
}

fn after(t: Timestamp, d: std::time::Duration) -> Timestamp {
    chrono::Duration::from_std(d)
        .ok()
        .and_then(|d| t.checked_add_signed(d))
        .unwrap_or(t)
}

/// When the Lease stops holding: `renewTime` + `leaseDurationSeconds`;
/// `None` when either is missing (then it holds no one).
fn expiry(spec: &LeaseSpec) -> Option<Timestamp> {
    let renewed = chrono_of(spec.renew_time.as_ref()?)?;
    let secs = u64::try_from(spec.lease_duration_seconds?).ok()?;
    Some(after(renewed, std::time::Duration::from_secs(secs)))
}

fn post_params() -> PostParams {
    PostParams {
        dry_run: false,
        field_manager: Some(crate::FIELD_MANAGER.to_string()),
    }
}

impl Elector {
    /// An elector that holds nothing yet.
    pub fn new(config: LeaseConfig) -> Self {
        Elector { config, held: None }
    }

    /// Its configuration.
    pub fn config(&self) -> &LeaseConfig {
        &self.config
    }

    fn api(&self, client: &Client) -> Api<Lease> {
        Api::namespaced(client.clone(), &self.config.namespace)
    }

    fn duration(&self) -> i32 {
        i32::try_from(self.config.duration_secs).unwrap_or(i32::MAX)
    }

    /// Acquires the Lease when it is absent, free or expired, renews it
    /// when this replica holds it, and otherwise follows. An API error
    /// drops what was held (no writes until a try succeeds).
    pub async fn try_lead(
        &mut self,
        client: &Client,
        now: Timestamp,
    ) -> Result<Leadership, kube::Error> {
        if self.held.is_some() {
            return self.renew(client, now).await;
        }
        let api = self.api(client);
        let Some(lease) = api.get_opt(&self.config.name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.name.clone()),
                    namespace: Some(self.config.namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(self.config.identity.clone()),
                    lease_duration_seconds: Some(self.duration()),
                    acquire_time: micro(now),
                    renew_time: micro(now),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match api.create(&post_params(), &lease).await {
                Ok(lease) => Ok(self.lead(lease, now)),
                // Another replica created it first.
                Err(e) if conflict(&e) => Ok(Leadership::Following {
                    holder: "another replica".to_string(),
                }),
                Err(e) => Err(e),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        let holder = spec.holder_identity.clone().unwrap_or_default();
        let ours = holder == self.config.identity;
        let free = holder.is_empty() || expiry(&spec).is_none_or(|until| until <= now);
        if !ours && !free {
            return Ok(Leadership::Following { holder });
        }
        let mut next = lease;
        next.spec = Some(LeaseSpec {
            holder_identity: Some(self.config.identity.clone()),
            lease_duration_seconds: Some(self.duration()),
            acquire_time: if ours {
                spec.acquire_time.clone()
            } else {
                micro(now)
            },
            renew_time: micro(now),
            lease_transitions: Some(spec.lease_transitions.unwrap_or(0) + i32::from(!ours)),
            ..spec
        });
        match api.replace(&self.config.name, &post_params(), &next).await {
            Ok(lease) => Ok(self.lead(lease, now)),
            // Written by someone else since it was read.
            Err(e) if conflict(&e) => Ok(Leadership::Following { holder }),
            Err(e) => Err(e),
        }
    }

    fn lead(&mut self, lease: Lease, now: Timestamp) -> Leadership {
        self.held = Some(Held {
            lease,
            renewed: now,
        });
        Leadership::Leading
    }

    /// Renews the Lease held (one replace with the resourceVersion last
    /// written: a 409 means another replica took it).
    async fn renew(&mut self, client: &Client, now: Timestamp) -> Result<Leadership, kube::Error> {
        let Some(held) = self.held.take() else {
            return Ok(Leadership::Following {
                holder: "another replica".to_string(),
            });
        };
        let mut next = held.lease;
        if let Some(spec) = next.spec.as_mut() {
            spec.renew_time = micro(now);
        }
        match self
            .api(client)
            .replace(&self.config.name, &post_params(), &next)
            .await
        {
            Ok(lease) => Ok(self.lead(lease, now)),
            Err(e) if conflict(&e) => Ok(Leadership::Following {
                holder: "another replica (the Lease changed)".to_string(),
            }),
            Err(e) => Err(e),
        }
    }

    /// Whether this replica may write at `now`: it holds the Lease and
    /// renewed it less than [`LeaseConfig::renew_every`] ago, or renews
    /// it now. Never acquires: a replica that lost the Lease writes
    /// nothing until the next [`Elector::try_lead`] wins it.
    pub async fn may_write(
        &mut self,
        client: &Client,
        now: Timestamp,
    ) -> Result<bool, kube::Error> {
        let Some(held) = &self.held else {
            return Ok(false);
        };
        if now < after(held.renewed, self.config.renew_every()) {
            return Ok(true);
        }
        Ok(self.renew(client, now).await? == Leadership::Leading)
    }

    /// Gives the Lease up, as client-go's `ReleaseOnCancel` does: one
    /// replace of the object last written (its resourceVersion: a
    /// compare-and-swap) with no `holderIdentity` and
    /// `leaseDurationSeconds: 1`, so another replica takes it over at its
    /// next try instead of waiting out the duration. Nothing is written
    /// when this replica does not hold the Lease; a 409 (another replica
    /// took it meanwhile) leaves it as it is. Whether it was released.
    pub async fn release(&mut self, client: &Client, now: Timestamp) -> Result<bool, kube::Error> {
        let Some(held) = self.held.take() else {
            return Ok(false);
        };
        let mut next = held.lease;
        let transitions = next.spec.as_ref().and_then(|s| s.lease_transitions);
        next.spec = Some(LeaseSpec {
            holder_identity: Some(String::new()),
            lease_duration_seconds: Some(1),
            acquire_time: micro(now),
            renew_time: micro(now),
            lease_transitions: transitions,
            ..next.spec.unwrap_or_default()
        });
        match self
            .api(client)
            .replace(&self.config.name, &post_params(), &next)
            .await
        {
            Ok(_) => Ok(true),
            Err(e) if conflict(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// Whether it holds the Lease (as of its last write).
    pub fn is_leading(&self) -> bool {
        self.held.is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    #[test]
    fn a_lease_expires_its_duration_after_its_renewal() {
        let spec = LeaseSpec {
            renew_time: micro(t("2026-11-21T12:00:00Z")),
            lease_duration_seconds: Some(15),
            ..LeaseSpec::default()
        };
        assert_eq!(expiry(&spec), Some(t("2026-11-21T12:00:15Z")));
        assert_eq!(expiry(&LeaseSpec::default()), None);
        let config = LeaseConfig::new("gitfleet", "pod-a");
        assert_eq!(config.renew_every(), std::time::Duration::from_secs(5));
    }
}
