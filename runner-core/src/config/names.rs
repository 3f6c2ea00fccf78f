//! The names FunctionConfig documents and image references are matched by.

/// The API group of FunctionConfig.
pub const GROUP: &str = "config.porch.kpt.dev";
/// The `apiVersion` this module understands.
pub const API_VERSION: &str = "config.porch.kpt.dev/v1alpha1";
/// The `kind` of a FunctionConfig document.
pub const KIND: &str = "FunctionConfig";
/// The registry path that short image names (no `/`) belong to.
pub const DEFAULT_IMAGE_PREFIX: &str = "ghcr.io/kptdev/krm-functions-catalog/";
/// The tag an image reference without a tag (and without a constraint) means.
pub const LATEST_TAG: &str = "latest";
