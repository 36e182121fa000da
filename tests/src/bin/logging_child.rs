//! The child program of `tests/first_hour.rs`'s logging tests: starts a provider with the
//! logging its one argument names and stops it. `default`: start-up installs its own
//! subscriber (to stderr); `off`: `application.logging: false`, nothing is installed;
//! `own`: a subscriber of the program's own (to stdout) is installed first, and start-up
//! leaves it. A process of its own per case, as a global subscriber is installed once.

use proto::greeter::greeter_server::GreeterServer;
use rpc::{Application, Config};
use rpc_testkit::services::GreeterProvider;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mode = std::env::args().nth(1).unwrap_or_default();
    let mut config = Config::default();
    config.graceful_shutdown.internal_signal = false;
    config.admin.port = 0;
    match mode.as_str() {
        "default" => {}
        "off" => config.application.logging = false,
        "own" => {
            tracing_subscriber::fmt()
                .with_writer(std::io::stdout)
                .with_max_level(tracing::Level::INFO)
                .without_time()
                .try_init()
                .map_err(|error| error.to_string())?;
        }
        other => return Err(format!("unknown mode `{other}`: default, off or own").into()),
    }
    let mut builder = Application::builder(config);
    builder.service(GreeterServer::new(GreeterProvider));
    let app = builder.start().await?;
    app.before_shutdown().await;
    Ok(())
}
