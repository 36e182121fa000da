//! The child program of `tests/registry_conformance.rs`'s rule 3 (a dead provider
//! disappears by itself): registers the instance its one argument describes
//! (`{"url": ..., "instance": ...}`) in the registry at `url`, prints `REGISTERED`, and
//! lives until the test kills it with SIGKILL, so it never unregisters. Bounded to 60 s,
//! so it never outlives a crashed parent for long.

use std::time::Duration;

use rpc_core::Instance;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let spec = std::env::args()
        .nth(1)
        .ok_or("usage: registry_child '{\"url\": ..., \"instance\": ...}'")?;
    let spec: serde_json::Value = serde_json::from_str(&spec)?;
    let url = spec["url"].as_str().ok_or("spec: no `url`")?;
    let instance: Instance = serde_json::from_value(spec["instance"].clone())?;
    let registry = rpc_registry::connect(url).await?;
    registry.register(&instance).await?;
    println!("REGISTERED");
    tokio::time::sleep(Duration::from_secs(60)).await;
    Ok(())
}
