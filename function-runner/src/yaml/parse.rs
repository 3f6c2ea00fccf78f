//! Owned by the parser work.
