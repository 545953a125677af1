//! Host-side bindings for the WIT package `lab:provider@0.1.0`.
//!
//! Only the full world (`hooker-provider`) is generated; a component of the
//! base-only world is driven through the per-interface `GuestIndices`, so the
//! capability is found by trying `dialog_hooker::GuestIndices::new` on the loaded
//! component, never by the provider's name.

wasmtime::component::bindgen!({
    path: "../wit/v0.1.0",
    world: "hooker-provider",
});

pub use self::lab::provider::types;
pub use exports::lab::provider::base;
pub use exports::lab::provider::dialog_hooker;

/// The WIT package version these bindings were generated from.
pub const WIT_PACKAGE: &str = "lab:provider@0.1.0";
