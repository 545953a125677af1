//! Security tests: http (see main.rs).
