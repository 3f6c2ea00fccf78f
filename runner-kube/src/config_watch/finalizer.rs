//! Porch's FunctionConfig finalizer, kept as Porch's function runner keeps
//! it (`controllers/functionconfigs/reconciler`): on every FunctionConfig
//! the runner watches while it lives, and taken off once the object is
//! being deleted, so that a deletion completes once a runner has let the
//! function go. A runner started with Porch's command line adds it, as
//! Porch's does; every runner takes it off, so objects that Porch's runner
//! finalized before a swap are let go. (Added by a runner that is then
//! uninstalled first, it holds their deletion, as Porch's own does: delete
//! FunctionConfigs before the runner.)
//!
//! Unlike Porch's (a merge patch of the whole list, which may drop another
//! controller's finalizer added meanwhile), the patch carries the
//! resourceVersion it was computed from: the API server refuses it (409) if
//! the object changed since, and the watch's next event computes it again.

use std::collections::BTreeMap;

use kube::api::DynamicObject;
use serde_json::{json, Value};

use super::ObjectKey;

/// Porch's function runner's finalizer on FunctionConfigs.
pub const FINALIZER: &str = "config.porch.kpt.dev/functionconfig-function-runner";

/// The merge patch that puts the finalizer where it belongs on `object`, if
/// it is not there yet: present while the object lives (if `add`), gone
/// once it is being deleted.
pub(crate) fn patch_for(object: &DynamicObject, add: bool) -> Option<Value> {
    let finalizers = object.metadata.finalizers.as_deref().unwrap_or_default();
    let has = finalizers.iter().any(|f| f == FINALIZER);
    let deleting = object.metadata.deletion_timestamp.is_some();
    let wanted: Vec<&str> = match (deleting, has) {
        (false, false) if add => finalizers
            .iter()
            .map(String::as_str)
            .chain([FINALIZER])
            .collect(),
        (true, true) => finalizers
            .iter()
            .map(String::as_str)
            .filter(|f| *f != FINALIZER)
            .collect(),
        _ => return None,
    };
    let version = object.metadata.resource_version.as_deref()?;
    Some(json!({"metadata": {"resourceVersion": version, "finalizers": wanted}}))
}

/// The finalizer writes still to make, by object.
#[derive(Debug, Default)]
pub(crate) struct Pending {
    patches: BTreeMap<ObjectKey, Value>,
    /// Whether live objects get the finalizer (Porch's command line).
    add: bool,
}

impl Pending {
    /// Writes that add the finalizer to live objects if `add`, and take it
    /// off deleted ones.
    pub(crate) fn new(add: bool) -> Self {
        Pending {
            patches: BTreeMap::new(),
            add,
        }
    }

    /// Notes what `object`, as now seen, needs.
    pub(crate) fn observe(&mut self, key: ObjectKey, object: &DynamicObject) {
        match patch_for(object, self.add) {
            Some(patch) => self.patches.insert(key, patch),
            None => self.patches.remove(&key),
        };
    }

    /// The object is gone: nothing to write.
    pub(crate) fn forget(&mut self, key: &ObjectKey) {
        self.patches.remove(key);
    }

    /// A complete list: only its objects may need a write.
    pub(crate) fn replace<'a>(
        &mut self,
        objects: impl IntoIterator<Item = (ObjectKey, &'a DynamicObject)>,
    ) {
        self.patches.clear();
        for (key, object) in objects {
            self.observe(key, object);
        }
    }

    /// The writes to make now.
    pub(crate) fn patches(&self) -> Vec<(ObjectKey, Value)> {
        self.patches
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The write for `key` is done, or moot (the object changed or went:
    /// its next event says what it needs).
    pub(crate) fn done(&mut self, key: &ObjectKey, patch: &Value) {
        if self.patches.get(key) == Some(patch) {
            self.patches.remove(key);
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn object(finalizers: &[&str], deleting: bool) -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "config.porch.kpt.dev/v1alpha1",
            "kind": "FunctionConfig",
            "metadata": {
                "name": "fc",
                "namespace": "ns",
                "resourceVersion": "7",
                "finalizers": finalizers,
                "deletionTimestamp": deleting.then_some("2026-01-01T00:00:00Z"),
            },
        }))
        .unwrap()
    }

    #[test]
    fn the_finalizer_is_added_while_the_object_lives_and_removed_once_it_is_deleted() {
        let other = "config.porch.kpt.dev/functionconfig-porch-server";
        assert_eq!(
            patch_for(&object(&[other], false), true).unwrap(),
            json!({"metadata": {"resourceVersion": "7", "finalizers": [other, FINALIZER]}})
        );
        assert_eq!(patch_for(&object(&[FINALIZER, other], false), true), None);
        assert_eq!(
            patch_for(&object(&[FINALIZER, other], true), true).unwrap(),
            json!({"metadata": {"resourceVersion": "7", "finalizers": [other]}})
        );
        assert_eq!(
            patch_for(&object(&[FINALIZER], true), true).unwrap(),
            json!({"metadata": {"resourceVersion": "7", "finalizers": []}})
        );
        // Being deleted without it: nothing to do (and never added back).
        assert_eq!(patch_for(&object(&[other], true), true), None);
        // A runner that does not add it still takes Porch's off.
        assert_eq!(patch_for(&object(&[other], false), false), None);
        assert_eq!(
            patch_for(&object(&[FINALIZER], true), false).unwrap(),
            json!({"metadata": {"resourceVersion": "7", "finalizers": []}})
        );
    }

    #[test]
    fn pending_writes_follow_the_latest_sight_of_each_object() {
        let key = ObjectKey {
            namespace: "ns".into(),
            name: "fc".into(),
        };
        let mut pending = Pending::new(true);
        pending.observe(key.clone(), &object(&[], false));
        let patches = pending.patches();
        assert_eq!(patches.len(), 1);
        // Seen with it since: nothing left to write.
        pending.observe(key.clone(), &object(&[FINALIZER], false));
        assert!(pending.patches().is_empty());
        // A write done for an older sight leaves a newer one pending.
        pending.observe(key.clone(), &object(&[FINALIZER], true));
        pending.done(&key, &patches[0].1);
        assert_eq!(pending.patches().len(), 1);
        pending.forget(&key);
        assert!(pending.patches().is_empty());
        pending.replace([(key.clone(), &object(&[], false))]);
        assert_eq!(pending.patches().len(), 1);
    }
}
