//! The runner side of the KRM function runtime.
