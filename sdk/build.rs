//! Bakes the WIT package into the export macros, so a provider crate needs nothing but
//! this crate: `export_provider!` and friends expand to a `wit_bindgen::generate!` with
//! the WIT inline, in the provider's own crate, for exactly the world it asks for (the
//! types mapped to this crate's with `with:`).
use std::{env, fs, path::PathBuf};

fn main() {
    let manifest = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let wit = manifest.join("../wit/v0.9.0/provider.wit");
    println!("cargo:rerun-if-changed={}", wit.display());
    println!("cargo:rerun-if-changed=src/export.rs.in");
    let wit_text = fs::read_to_string(&wit).expect("read wit/v0.9.0/provider.wit");
    let template = fs::read_to_string(manifest.join("src/export.rs.in")).expect("read export.rs.in");
    let out = template.replace("@WIT@", &format!("{wit_text:?}"));
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    fs::write(out_dir.join("export.rs"), out).unwrap();
}
