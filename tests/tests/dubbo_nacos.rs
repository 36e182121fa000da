//! Dubbo's layout on Nacos (`format: dubbo`): our provider registers as Dubbo's Nacos
//! registry writes a provider (service `providers:<interface>:<version>:<group>`, the
//! provider URL's parameters as metadata), read back through Nacos' own HTTP API, and our
//! consumer finds it there. Against the real Nacos-compatible server `RPC_TEST_NACOS_URL`
//! (`scripts/registries.sh`); skipped, saying so, when it is not set and not required.

mod common;

use std::time::Duration;

use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::GreeterServer;
use rpc::Application;
use rpc::config::{RegistryConfig, ServiceConfig};
use rpc::registry::RegistryFormat;
use rpc_testkit::services::GreeterProvider;

const SERVICE: &str = "helloworld.Greeter";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn our_provider_is_listed_under_dubbos_nacos_service_name_and_found_there() {
    let Ok(url) = std::env::var("RPC_TEST_NACOS_URL") else {
        assert!(
            std::env::var_os("RPC_TEST_REQUIRE_REGISTRIES").is_none(),
            "RPC_TEST_NACOS_URL is not set but RPC_TEST_REQUIRE_REGISTRIES is"
        );
        eprintln!("SKIPPED dubbo_nacos: RPC_TEST_NACOS_URL is not set (scripts/test.sh sets it)");
        return;
    };
    let url = url.trim().to_owned();
    // A Nacos group of this test alone.
    let group = format!("dubbo-nacos-{:08x}", fastrand::u32(..));
    let separator = if url.contains('?') { '&' } else { '?' };
    let registry = RegistryConfig::new(format!("{url}{separator}group={group}"))
        .with_format(RegistryFormat::Dubbo);

    let mut config = common::config("rust-provider");
    config.registries = [("main".to_owned(), registry.clone())].into();
    let mut service = ServiceConfig::default();
    service.version = "1.0.0".into();
    service.group = "blue".into();
    config.provider.services.insert(SERVICE.to_owned(), service);
    let mut builder = Application::builder(config);
    builder.service(GreeterServer::new(GreeterProvider));
    let provider = builder.start().await.expect("provider starts");
    let address = provider.local_addr().unwrap();

    // As Dubbo's Nacos registry lists a provider.
    let server = url.trim_start_matches("nacos://");
    let server = server.rsplit('@').next().unwrap_or(server);
    let server = server.split(['/', '?', ',']).next().unwrap();
    let server: std::net::SocketAddr = server.parse().expect("the Nacos URL's host is an address");
    let path = format!(
        "/nacos/v1/ns/instance/list?serviceName=providers%3A{SERVICE}%3A1.0.0%3Ablue&groupName={group}&namespaceId=public"
    );
    let listed = rpc_testkit::http::get(server, &path)
        .await
        .expect("Nacos answers");
    let json: serde_json::Value = serde_json::from_str(&listed.body).expect("JSON");
    let hosts = json["hosts"].as_array().cloned().unwrap_or_default();
    assert_eq!(hosts.len(), 1, "{}", listed.body);
    assert_eq!(hosts[0]["port"].as_u64(), Some(u64::from(address.port())));
    let metadata = &hosts[0]["metadata"];
    for (key, value) in [
        ("protocol", "tri"),
        ("path", SERVICE),
        ("interface", SERVICE),
        ("version", "1.0.0"),
        ("group", "blue"),
        ("side", "provider"),
        ("application", "rust-provider"),
    ] {
        assert_eq!(metadata[key].as_str(), Some(value), "{key} in {metadata}");
    }

    let mut config = common::config("rust-consumer");
    config.registries = [("main".to_owned(), registry)].into();
    config.consumer.check_timeout = Duration::from_secs(10);
    let reference = config
        .consumer
        .references
        .entry(SERVICE.to_owned())
        .or_default();
    reference.version = "1.0.0".into();
    reference.group = "blue".into();
    let mut builder = Application::builder(config);
    let mut client = GreeterClient::new(builder.reference(SERVICE));
    let consumer = builder
        .start()
        .await
        .expect("consumer starts: it finds the provider");
    for n in 0..20 {
        let reply = client
            .say_hello(HelloRequest {
                name: format!("n{n}"),
                count: 0,
            })
            .await
            .expect("served")
            .into_inner();
        assert_eq!(reply.provider, address.to_string());
    }
    consumer.before_shutdown().await;
    assert_eq!(provider.before_shutdown().await.exit_code(), 0);
}
