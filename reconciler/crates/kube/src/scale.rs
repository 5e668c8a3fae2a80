//! Pool scaling through the `/scale` subresource of a target configured
//! per pool (a Cluster API MachineDeployment, a cloud node group's custom
//! resource): `spec.replicas` read, then patched to the planned size,
//! kept within the pool's `size.min` and `size.max`.

use kube::Client;
use kube::api::{Api, DynamicObject};
use kube::core::{ApiResource, GroupVersionKind};

/// The object whose `/scale` subresource sizes a pool.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScaleTarget {
    /// API group (`cluster.x-k8s.io`; empty for the core group).
    pub group: String,
    /// API version (`v1beta1`).
    pub version: String,
    /// Kind (`MachineDeployment`); the resource is its lower-case plural.
    pub kind: String,
    /// The object's namespace.
    pub namespace: String,
    /// The object's name.
    pub name: String,
}

/// A `--kube-scale-target` that does not read as `POOL=GROUP/VERSION/KIND/NAMESPACE/NAME`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "--kube-scale-target {0}: expected POOL=GROUP/VERSION/KIND/NAMESPACE/NAME, e.g. h100-a=cluster.x-k8s.io/v1beta1/MachineDeployment/capi/h100-a"
)]
pub struct ParseTargetError(pub String);

/// Reads `POOL=GROUP/VERSION/KIND/NAMESPACE/NAME` (the group may be empty
/// for the core API: `POOL=/v1/ReplicationController/ns/name`).
pub fn parse_target(given: &str) -> Result<(String, ScaleTarget), ParseTargetError> {
    let bad = || ParseTargetError(given.to_string());
    let (pool, path) = given.split_once('=').ok_or_else(bad)?;
    let parts: Vec<&str> = path.split('/').collect();
    let [group, version, kind, namespace, name] = parts.as_slice() else {
        return Err(bad());
    };
    if pool.is_empty()
        || [version, kind, namespace, name]
            .iter()
            .any(|p| p.is_empty())
    {
        return Err(bad());
    }
    Ok((
        pool.to_string(),
        ScaleTarget {
            group: (*group).to_string(),
            version: (*version).to_string(),
            kind: (*kind).to_string(),
            namespace: (*namespace).to_string(),
            name: (*name).to_string(),
        },
    ))
}

impl ScaleTarget {
    /// The target's resource (plural guessed from the kind, as kube-rs does).
    pub fn api_resource(&self) -> ApiResource {
        ApiResource::from_gvk(&GroupVersionKind::gvk(
            &self.group,
            &self.version,
            &self.kind,
        ))
    }

    /// The API over the target's namespace.
    pub fn api(&self, client: &Client) -> Api<DynamicObject> {
        Api::namespaced_with(client.clone(), &self.namespace, &self.api_resource())
    }
}

/// The replicas to write for a planned size: within `[min, max]` when the
/// pool's size is known.
pub fn clamp(to: u32, size: Option<(u32, u32)>) -> i32 {
    let to = match size {
        Some((min, max)) => to.max(min).min(max.max(min)),
        None => to,
    };
    i32::try_from(to).unwrap_or(i32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_parse_and_name_their_resource() {
        let (pool, t) =
            parse_target("h100-a=cluster.x-k8s.io/v1beta1/MachineDeployment/capi/md-h100").unwrap();
        assert_eq!(pool, "h100-a");
        assert_eq!(t.namespace, "capi");
        assert_eq!(t.name, "md-h100");
        let ar = t.api_resource();
        assert_eq!(ar.plural, "machinedeployments");
        assert_eq!(ar.api_version, "cluster.x-k8s.io/v1beta1");
        let (_, core) = parse_target("p=/v1/ReplicationController/ns/rc").unwrap();
        assert_eq!(core.api_resource().api_version, "v1");
        for bad in [
            "h100-a",
            "=g/v1/K/ns/n",
            "p=g/v1/K/n",
            "p=g/v1/K/ns/n/extra",
            "p=g//K/ns/n",
        ] {
            assert_eq!(
                parse_target(bad),
                Err(ParseTargetError(bad.to_string())),
                "{bad}"
            );
        }
    }

    #[test]
    fn sizes_stay_within_the_pool() {
        assert_eq!(clamp(5, Some((2, 4))), 4);
        assert_eq!(clamp(0, Some((2, 4))), 2);
        assert_eq!(clamp(3, Some((2, 4))), 3);
        assert_eq!(clamp(7, None), 7);
        assert_eq!(clamp(u32::MAX, None), i32::MAX);
    }
}
