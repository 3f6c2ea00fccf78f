//! Owned by the emitter work.
