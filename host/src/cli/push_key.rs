//! `lab push-key [--rotate]`: print lab's VAPID public key, or replace it.

use crate::notify::push::{subscriptions::Store, Vapid};
use crate::store::paths::{resolve_home, Home};
use std::path::PathBuf;

pub fn run(home: Option<PathBuf>, rotate: bool) -> anyhow::Result<()> {
    let home = Home::new(resolve_home(home)?);
    let dir = home.push_dir();
    let key_file = home.vapid_key_file();
    if !rotate {
        crate::store::fsutil::private_dir(&home.root)?;
        crate::store::fsutil::private_dir(&dir)?;
        println!("{}", Vapid::load_or_create(&key_file)?.public_key());
        return Ok(());
    }
    // A running serve holds the key in memory: it replaces it (and its subscriptions)
    // itself, asked through its control socket (never over TCP to an address an old
    // serve.json names). serve.json left without a serve answering: an error, since
    // a serve that cannot be reached may still hold the key.
    if super::local_client::serve_addr(&home)?.is_some() || home.control_socket().exists() {
        let token = crate::edge::token::read_token(&crate::edge::token::token_path(&home.root))?
            .ok_or_else(|| anyhow::anyhow!("this lab has no token yet"))?;
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
        let answer: serde_json::Value = rt
            .block_on(super::local_client::post_control(&home, &token, "/push/key/rotate", serde_json::json!({})))
            .map_err(|e| {
                anyhow::anyhow!(
                    "{e}\n(if no `lab serve` runs for this home, delete {} and try again)",
                    home.serve_file().display()
                )
            })?;
        eprintln!(
            "lab: new VAPID key; {} push subscription(s) removed: press Push again on each device",
            answer["removed_subscriptions"]
        );
        println!("{}", answer["public_key"].as_str().unwrap_or_default());
        return Ok(());
    }
    crate::store::fsutil::private_dir(&home.root)?;
    crate::store::fsutil::private_dir(&dir)?;
    let vapid = Vapid::create(&key_file)?;
    let removed = Store::open(home.push_subscriptions_file())?.clear()?;
    eprintln!("lab: new VAPID key; {removed} push subscription(s) removed: press Push again on each device");
    println!("{}", vapid.public_key());
    Ok(())
}
