//! Starting one nacos-sdk connection (a `NamingService`): at start-up, and again on
//! another server when the one in use falls silent (`presence.rs`).

use std::path::Path;
use std::sync::Arc;

use nacos_sdk::api::naming::{NamingService, NamingServiceBuilder};
use nacos_sdk::api::props::ClientProps;
use rpc_core::RegistryError;
use tokio::time::Instant;

use crate::nacos::config::NacosConfig;
use crate::nacos::error::is_refusal;
use crate::nacos::login::HttpLogin;
use crate::remote::probe::refine_unreachable;
use crate::remote::retry::bounded;

/// Starts the SDK on `servers` (of `config`; HTTP `host:port`s) with its disk cache in
/// `cache`, logging in when `config` has credentials, and checks with a read that the
/// server accepts this client — all before `deadline`. `url` names the registry in
/// errors.
///
/// # Errors
/// [`RegistryError::Unreachable`] when no server answers in time;
/// [`RegistryError::Operation`] when the server refuses the read (e.g. bad credentials).
pub(super) async fn start(
    url: &str,
    config: &NacosConfig,
    servers: &[String],
    cache: &Path,
    deadline: Instant,
) -> Result<NamingService, RegistryError> {
    let network = &config.network;
    let mut props = ClientProps::new()
        .server_addr(servers.join(","))
        .namespace(config.namespace.clone())
        .app_name("rpc")
        .naming_push_empty_protection(false)
        .naming_load_cache_at_start(false)
        .cache_dir(cache)
        // The URL is the whole configuration: no NACOS_* environment overrides.
        .env_first(false);
    if let Some(port) = config.grpc_port {
        props = props.remote_grpc_port(port);
    }
    let mut builder = NamingServiceBuilder::new(props);
    if let Some((user, password)) = &network.credentials {
        builder = builder.with_auth_plugin(Arc::new(HttpLogin::new(
            user.clone(),
            password.clone(),
            network.connect_timeout,
        )));
    }
    let timeout = network.connect_timeout;
    // `build` checks the connection with a health request and logs in; whatever fails
    // there, no server accepted a connection.
    let naming = match bounded(until(deadline), builder.build()).await {
        Ok(naming) => naming,
        Err(failure) => {
            // nacos-sdk retries a refused connection until the bound: ask the sockets.
            let error = failure.into_connect_error(url, timeout, |_| false);
            return Err(refine_unreachable(error, &network.endpoints).await);
        }
    };
    // A read proves the credentials (and the namespace) are accepted.
    bounded(
        until(deadline),
        naming.get_service_list(1, 1, Some(config.group.clone())),
    )
    .await
    .map_err(|failure| failure.into_connect_error(url, timeout, is_refusal))?;
    Ok(naming)
}

/// The time left until `deadline`, at least 100 ms (a request needs a moment).
fn until(deadline: Instant) -> std::time::Duration {
    deadline
        .saturating_duration_since(Instant::now())
        .max(std::time::Duration::from_millis(100))
}
