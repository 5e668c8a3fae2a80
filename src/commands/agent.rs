//! `gitfleet inventory --watch --publish-node NODE`: the node agent. Each
//! read of this host is published on Node `NODE` as the annotation
//! `gitfleet.io/gpus` when it changed, and at least every five minutes
//! (docs/kubernetes.md, "Node agent"). A publication that fails is a
//! warning; the next read tries again.

use miette::{Result, miette};
use reconciler::kube::agent::{self, AgentView};
use reconciler::observed::{ObservedNode, Timestamp};

/// Publishes the host's view on its Node through the cluster's API.
pub struct Publisher {
    runtime: tokio::runtime::Runtime,
    client: reconciler::kube::Client,
    node: String,
    last: Option<AgentView>,
}

impl Publisher {
    /// Connects with the cluster configuration found the usual way (in a
    /// DaemonSet: the service account).
    pub fn connect(node: &str) -> Result<Self> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| miette!("cannot start the async runtime: {e}"))?;
        let client = runtime.block_on(async {
            let config = reconciler::kube::infer_config()
                .await
                .map_err(|e| miette!("--publish-node: {e}"))?;
            reconciler::kube::Client::try_from(config)
                .map_err(|e| miette!("--publish-node: cannot make a Kubernetes client: {e}"))
        })?;
        Ok(Publisher {
            runtime,
            client,
            node: node.to_string(),
            last: None,
        })
    }

    /// Publishes `host` as read at `at`, if it changed or a heartbeat is due.
    pub fn offer(&mut self, host: &ObservedNode, at: Timestamp) {
        let view = AgentView::of(host, at);
        if !agent::due(self.last.as_ref(), &view) {
            return;
        }
        let done = self
            .runtime
            .block_on(agent::publish(&self.client, &self.node, &view));
        match done {
            Ok(()) => self.last = Some(view),
            Err(e) => eprintln!(
                "warning: cannot publish the GPUs on Node {}: {e}; trying again at the next read",
                self.node
            ),
        }
    }
}
