use getting_started::MyGreeter;
use getting_started::hello::greeter_server::GreeterServer;
use lossless_rpc::{Application, Config};

#[tokio::main]
async fn main() {
    let config = match Config::from_file("config/provider.yaml") {
        Ok(config) => config,
        Err(error) => exit_with(2, &error),
    };
    let mut builder = Application::builder(config);
    // The generated server, unchanged; `provider.services.hello.Greeter` configures it.
    builder.service(GreeterServer::new(MyGreeter));
    // Logs to stderr from here (RUST_LOG; lossless-rpc's crates at info by default),
    // registers once serving.
    let app = match builder.start().await {
        Ok(app) => app,
        Err(error) => exit_with(1, &error),
    };
    // SIGTERM / SIGINT run the graceful shutdown; the exit code says how it went:
    // 0 clean, 1 something had to be forced, 130 / 143 after a second signal.
    std::process::exit(app.wait().await.exit_code());
}

fn exit_with(code: i32, error: &dyn std::error::Error) -> ! {
    eprintln!("hello-provider: {error}");
    std::process::exit(code);
}
