//! The in-pod function server.
