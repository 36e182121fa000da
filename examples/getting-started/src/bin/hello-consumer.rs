use getting_started::hello::HelloRequest;
use getting_started::hello::greeter_client::GreeterClient;
use lossless_rpc::{Application, Config};

#[tokio::main]
async fn main() {
    if let Err(error) = run().await {
        eprintln!("hello-consumer: {error}");
        std::process::exit(1);
    }
}

async fn run() -> Result<(), Box<dyn std::error::Error>> {
    let config = Config::from_file("config/consumer.yaml")?;
    let mut builder = Application::builder(config);
    // The generated client over a reference: providers found through the registry,
    // balanced, failed over. `consumer.references.hello.Greeter` configures it.
    let mut greeter = GreeterClient::new(builder.reference("hello.Greeter"));
    let app = builder.start().await?; // waits (check: true) until a provider is known
    let request = HelloRequest {
        name: "world".into(),
    };
    let reply = greeter.say_hello(request).await?;
    println!("{}", reply.into_inner().message);
    app.before_shutdown().await; // the graceful shutdown a signal would run
    Ok(())
}
