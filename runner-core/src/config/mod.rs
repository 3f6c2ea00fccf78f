//! FunctionConfig documents (`config.porch.kpt.dev/v1alpha1`, kind `FunctionConfig`) and
//! image matching.
//!
//! A FunctionConfig says how a function image is executed: by a local binary
//! (`binaryExecutor`), in a cached pod (`podExecutor`) or by a built-in Go function
//! (`goExecutor`), each for a list of tags. This module
//!
//! * defines the document types and their validation ([`FunctionConfig`] and friends;
//!   `types`),
//! * parses them from a directory ([`load_dir`]), one string ([`parse_str`]) or one object of
//!   the API server ([`parse_object`], which the cluster watch feeds), validating types and
//!   semantics and reporting every bad document with its file, document number and field
//!   while the good ones still load (`load`),
//! * builds an [`ImageIndex`] answering "which binary / which pod settings for this requested
//!   image and tag constraint" with hash-map lookups (`index`),
//! * resolves semver tag constraints ([`resolve_tag`], [`TagConstraint`]; `tag`),
//! * holds the index in use, swapped whole when the configs change ([`LiveIndex`]; `live`),
//! * reads the FunctionConfigs a runner starts with, once ([`FunctionConfigs`]; `startup`).
//!
//! The FunctionConfig CustomResourceDefinition (generated from these types) and the watch
//! of FunctionConfig objects in the cluster are the kube backend's (`runner-kube`).
//!
//! Image references are split by [`crate::image`] and Go durations parsed by
//! [`krm_fn::duration`]; the names config's users need from them are re-exported here.
//!
//! # Image names
//!
//! A request names an image as `[REGISTRY/PATH/]NAME[:TAG][@DIGEST]`; a name without any `/`
//! is a short name of the default image prefix (see [`crate::image`]).
//!
//! A FunctionConfig whose `spec.image` has no `/` (e.g. `set-namespace`) matches
//! `PREFIX/set-namespace:TAG` for every prefix in `spec.prefixes` and every tag of the
//! executor. Prefixes are registry paths; a trailing (or leading) `/` is optional and the
//! empty prefix `""` stands for the default image prefix (as in Porch). With no prefixes
//! the default prefix applies. A `spec.image` that contains a `/` is a full image path and
//! matches exactly that path; `spec.prefixes` is then ignored.
//!
//! # Parsing leniency
//!
//! Unknown fields are ignored and `null` counts as absent. Values of the wrong shape (a
//! string for a list, a list for a string, a non-number for a count, a non-mapping for
//! `resources` or `securityContext`) are errors. As in serde_yaml_ng generally, an unquoted
//! scalar in a string field is taken as written (`tags: [1.10]` is the tag `1.10`).

mod error;
mod index;
mod live;
mod load;
mod names;
mod pod_cache;
mod startup;
mod tag;
mod types;

/// Helpers for the tests of this crate and of the crates above it (feature
/// `test-support`).
#[cfg(any(test, feature = "test-support"))]
#[doc(hidden)]
pub mod test_support;

pub use error::{ConfigError, DocLocation, Position};
pub use index::{
    partition_duplicates, remove_duplicates, BinaryMatch, GoMatch, ImageIndex, PodMatch,
};
pub use live::{IndexPublisher, LiveIndex};
pub use load::{
    load_dir, load_dir_with_prefix, parse_object, parse_str, parse_str_with, LoadReport,
};
pub use names::{API_VERSION, DEFAULT_IMAGE_PREFIX, GROUP, KIND, LATEST_TAG};
pub use pod_cache::{load_pod_cache_config, PodCacheConfigError};
pub use startup::{FunctionConfigs, StartupError};
pub use tag::{resolve_tag, tag_version, TagConstraint};
pub use types::{
    BinaryExecutor, ContainerOverrides, FunctionConfig, FunctionConfigSpec, GoExecutor, ObjectMeta,
    PodExecutor, TemplateOverrides,
};

pub use crate::image::{normalize_image_name, ImageRef};
pub use krm_fn::duration::{parse_go_duration, DurationError, PositiveDuration};
