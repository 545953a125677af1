//! The boundary types, generated once from `wit/v0.9.0/` (world `screen-provider`,
//! which uses every type). Only the types are used from here: a provider's export
//! macro generates its own world's glue in the provider's crate and maps `types` to
//! this module with `with:`, so every provider speaks these very Rust types.
//! `pub_export_macro` keeps this generation from declaring any export in a component.
#![allow(missing_docs, clippy::all)]

wit_bindgen::generate!({
    path: "../wit/v0.9.0",
    world: "screen-provider",
    pub_export_macro: true,
    export_macro_name: "__lab_unused_export",
    default_bindings_module: "::lab_provider_sdk::bindings",
    runtime_path: "::lab_provider_sdk::wit_bindgen::rt",
    additional_derives: [PartialEq, Eq],
});
