//! Security tests: input (see main.rs).
