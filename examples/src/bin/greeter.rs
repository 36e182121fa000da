//! Two greeter providers and one consumer in one process, on the in-process registry.
//! Every reply names the provider (host:port) that answered.
//!
//! `cargo run --bin greeter -- [CALLS]` (default 10 calls).

use std::collections::BTreeMap;

use lossless_rpc::{Application, ApplicationError, Config};
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc_testkit::services::GreeterProvider;

fn config(name: &str) -> Config {
    let mut config = Config::default();
    config.application.name = name.to_owned();
    // In one process the framework must not take over SIGINT: the example ends by itself.
    config.graceful_shutdown.internal_signal = false;
    // Three applications in one process: each admin endpoint on a free port.
    config.admin.port = 0;
    config
}

async fn provider(name: &str) -> Result<Application, ApplicationError> {
    let mut builder = Application::builder(config(name));
    builder.service(GreeterServer::new(GreeterProvider));
    builder.start().await
}

/// Prints a line; a closed stdout (`greeter | head -1`) is not an error worth a panic.
fn say(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

#[tokio::main]
async fn main() {
    rpc_testkit::init_logging();
    let calls: usize = match std::env::args().nth(1).map(|arg| arg.parse()) {
        None => 10,
        Some(Ok(calls)) => calls,
        Some(Err(_)) => {
            eprintln!("usage: greeter [CALLS]   (CALLS: a number, default 10)");
            std::process::exit(2);
        }
    };
    if let Err(error) = run(calls).await {
        eprintln!("greeter: {error}");
        std::process::exit(1);
    }
}

async fn run(calls: usize) -> Result<(), Box<dyn std::error::Error>> {
    let providers = [provider("provider-1").await?, provider("provider-2").await?];
    for app in &providers {
        let addr = app.local_addr().map(|a| a.to_string()).unwrap_or_default();
        say(format_args!("provider listening on {addr}"));
    }

    let mut builder = Application::builder(config("consumer"));
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await?;

    let mut answered: BTreeMap<String, usize> = BTreeMap::new();
    for n in 1..=calls {
        let request = HelloRequest {
            name: format!("call {n}"),
            count: 0,
        };
        let reply = client.say_hello(request).await?.into_inner();
        say(format_args!("{} <- {}", reply.message, reply.provider));
        *answered.entry(reply.provider).or_default() += 1;
    }
    let mut stream = client
        .say_hello_stream(HelloRequest {
            name: "stream".to_owned(),
            count: 3,
        })
        .await?
        .into_inner();
    while let Some(reply) = stream.message().await? {
        say(format_args!(
            "{} <- {} (stream)",
            reply.message, reply.provider
        ));
    }

    say(format_args!("replies per provider: {answered:?}"));
    consumer.before_shutdown().await;
    for app in &providers {
        let report = app.before_shutdown().await;
        say(format_args!("provider shut down: {report}"));
    }
    Ok(())
}
