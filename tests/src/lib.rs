//! Helpers shared by the end-to-end tests in `tests/tests/`: locating the
//! built binaries, starting them on free loopback ports, and gRPC clients.
