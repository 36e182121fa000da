//! The first call to an instance whose host does not answer the dial (paused, gone, a
//! lost SYN): when its answer is due and the dial is still under way, the attempt
//! leaves the dial, not sent, and the call is answered by another instance; the dial
//! goes on in the background with the instance kept out of the picks, and once it
//! connects the instance takes calls again. The fleet simulator found the wait (seed
//! 2232: a consumer restarted during a provider's pause waited 636 ms on its first dial
//! there).
//!
//! The consumer dials through a network stack that holds every dial to provider B until
//! the test releases it, and its connect timeout and attempt timeout are 10 minutes: a
//! call that waited for the dial would not end within the test's bound.

mod common;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use futures_util::future::BoxFuture;
use proto::greeter::HelloRequest;
use proto::greeter::greeter_client::GreeterClient;
use rpc::ReferenceChannel;
use rpc::cluster::{LoadBalanceKind, ReferenceConfig};
use rpc::core::{Registry, ServiceKey};
use rpc::registry::MemoryHub;
use rpc::transport::{BoxStream, ChannelOptions, Network, NetworkListener, NetworkStack};
use tokio::sync::watch;

/// Bound on each call, and on the wait for B to answer once its dial is released.
const BOUND: Duration = Duration::from_secs(20);

/// Calls made while B's dial is held.
const HELD_CALLS: usize = 40;

/// TCP, except that dials to `held` wait until `released` turns true.
struct HeldDials {
    held: String,
    released: watch::Receiver<bool>,
    dials_to_held: Arc<AtomicUsize>,
}

impl NetworkStack for HeldDials {
    fn connect(&self, authority: &str) -> BoxFuture<'static, io::Result<BoxStream>> {
        let hold = (authority == self.held).then(|| {
            self.dials_to_held.fetch_add(1, Ordering::SeqCst);
            self.released.clone()
        });
        let authority = authority.to_owned();
        Box::pin(async move {
            if let Some(mut released) = hold {
                // An error only when the sender is gone: the test ended.
                let _ = released.wait_for(|released| *released).await;
            }
            let stream = tokio::net::TcpStream::connect(authority).await?;
            stream.set_nodelay(true)?;
            Ok(Box::new(stream) as BoxStream)
        })
    }

    fn bind(&self, _: SocketAddr) -> BoxFuture<'static, io::Result<Box<dyn NetworkListener>>> {
        Box::pin(async { Err(io::Error::from(io::ErrorKind::Unsupported)) })
    }
}

async fn answered_by(client: &mut GreeterClient<ReferenceChannel>) -> String {
    let hello = HelloRequest {
        name: "dial".to_owned(),
        count: 0,
    };
    let call = client.say_hello(hello);
    tokio::time::timeout(BOUND, call)
        .await
        .expect("a call waited for the held dial")
        .expect("no call fails")
        .into_inner()
        .provider
}

#[tokio::test]
async fn a_call_leaves_a_dial_that_is_overdue_and_the_instance_returns_once_connected() {
    common::logs();
    let hub = MemoryHub::new();
    let a = common::greeter_provider(&hub).await;
    let a_addr = a.local_addr().expect("serving").to_string();
    let (release, released) = watch::channel(false);
    let dials_to_held = Arc::new(AtomicUsize::new(0));

    // B serves, listed on a hub of its own: it joins the consumer's registry later,
    // once the consumer knows how fast A answers (a call is overdue only against a
    // latency it knows).
    let b_hub = MemoryHub::new();
    let b = common::greeter_provider(&b_hub).await;
    let b_port = b.local_addr().expect("serving").port();
    let b_addr = format!("127.0.0.1:{b_port}");
    let mut config = common::config("consumer");
    let mut reference = ReferenceConfig::default();
    reference.loadbalance = LoadBalanceKind::RoundRobin;
    reference.timeout = Some(Duration::from_secs(600));
    config
        .consumer
        .references
        .insert("helloworld.Greeter".to_owned(), reference);
    let mut builder = common::builder_with(config, &hub, Duration::ZERO);
    let mut options = ChannelOptions::default();
    options.connect_timeout = Duration::from_secs(600);
    builder.channel_options(options);
    builder.network(Network::new(HeldDials {
        held: b_addr.clone(),
        released,
        dials_to_held: dials_to_held.clone(),
    }));
    let mut client = GreeterClient::new(builder.reference("helloworld.Greeter"));
    let consumer = builder.start().await.expect("consumer starts");
    for _ in 0..10 {
        assert_eq!(answered_by(&mut client).await, a_addr);
    }

    let b_entry = rpc::Instance::new(ServiceKey::new("helloworld.Greeter"), "127.0.0.1", b_port);
    let b_lister = hub.client();
    Registry::register(&b_lister, &b_entry)
        .await
        .expect("B listed");
    let deadline = tokio::time::Instant::now() + BOUND;
    while dials_to_held.load(Ordering::SeqCst) == 0 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "B was not picked within {BOUND:?} of its listing"
        );
        assert_eq!(answered_by(&mut client).await, a_addr, "B's dial is held");
    }
    for _ in 0..HELD_CALLS {
        assert_eq!(answered_by(&mut client).await, a_addr, "B's dial is held");
    }
    // The attempt that picked B dialled once and left; the background dial is the
    // second. No call picked B again while it was under way.
    assert_eq!(dials_to_held.load(Ordering::SeqCst), 2);

    release.send_replace(true);
    let deadline = tokio::time::Instant::now() + BOUND;
    let mut back = false;
    while !back && tokio::time::Instant::now() < deadline {
        back = answered_by(&mut client).await == b_addr;
    }
    assert!(
        back,
        "B answered no call within {BOUND:?} of its dial's release"
    );

    consumer.before_shutdown().await;
    for provider in [&a, &b] {
        assert_eq!(provider.before_shutdown().await.exit_code(), 0);
    }
}
