//! Security tests: state (see main.rs).
