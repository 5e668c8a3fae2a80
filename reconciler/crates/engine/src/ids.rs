//! Dense ids for the engine's tables, and GPU model interning.

use rustc_hash::FxHashMap as HashMap;

/// Index into the cluster's nodes.
pub type NodeId = u32;
/// Index into the job table.
pub type JobId = u32;
/// Index into the running-job table.
pub type RunId = u32;
/// Index into the pool table.
pub type PoolId = u32;
/// Index into the queue tree.
pub type QueueId = u32;
/// Interned GPU model name.
pub type ModelId = u16;

/// GPU model names ↔ ids. Ids follow first use; nothing depends on their order
/// for output, which always prints names.
#[derive(Debug, Clone, Default)]
pub struct Models {
    names: Vec<String>,
    ids: HashMap<String, ModelId>,
}

impl Models {
    /// The id of `name`, adding it if new.
    pub fn intern(&mut self, name: &str) -> ModelId {
        if let Some(id) = self.ids.get(name) {
            return *id;
        }
        let id = self.names.len() as ModelId;
        self.names.push(name.to_string());
        self.ids.insert(name.to_string(), id);
        id
    }

    /// The id of `name`, if known.
    pub fn get(&self, name: &str) -> Option<ModelId> {
        self.ids.get(name).copied()
    }

    /// The name of `id`.
    pub fn name(&self, id: ModelId) -> &str {
        &self.names[id as usize]
    }

    /// The names, by id.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// How many models are known.
    pub fn len(&self) -> usize {
        self.names.len()
    }
}
