//! Deadlines across hops: a plain tonic client calls provider A with a deadline; A's
//! handler works, then calls provider B through a reference. B is sent only what remains
//! of the client's deadline, a retry less than its first attempt, and a request with no
//! time left is refused before B's handler runs.

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use parking_lot::Mutex;
use proto::echo::echo_client::EchoClient;
use proto::echo::echo_server::{Echo, EchoServer};
use proto::echo::{EchoReply, EchoRequest};
use proto::greeter::greeter_client::GreeterClient;
use proto::greeter::greeter_server::{Greeter, GreeterServer};
use proto::greeter::{HelloReply, HelloRequest};
use rpc::registry::MemoryHub;
use rpc::{Application, CallContext, Config, ConfigFormat, ReferenceChannel};
use tonic::{Code, Status};

/// Provider B: records the `grpc-timeout` of every request it executes; the first
/// `failures` requests fail UNAVAILABLE after 20 ms (so a retry leaves visibly later).
#[derive(Clone, Default)]
struct Recorder {
    seen: Arc<Mutex<Vec<Option<Duration>>>>,
    failures: Arc<AtomicUsize>,
}

#[tonic::async_trait]
impl Echo for Recorder {
    async fn echo(
        &self,
        request: tonic::Request<EchoRequest>,
    ) -> Result<tonic::Response<EchoReply>, Status> {
        let headers = request.metadata().clone().into_headers();
        self.seen
            .lock()
            .push(rpc::core::metadata::grpc_timeout(&headers));
        let failing = self
            .failures
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                left.checked_sub(1)
            })
            .is_ok();
        if failing {
            tokio::time::sleep(Duration::from_millis(20)).await;
            return Err(Status::unavailable("scripted failure"));
        }
        Ok(tonic::Response::new(EchoReply {
            payload: request.into_inner().payload,
            provider: String::new(),
        }))
    }
}

/// Provider A: works `work`, then calls B; answers what A's handler saw of its own
/// deadline in the reply's message (milliseconds left when it called B).
struct Gateway {
    work: Duration,
    echo: EchoClient<ReferenceChannel>,
}

#[tonic::async_trait]
impl Greeter for Gateway {
    async fn say_hello(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<HelloReply>, Status> {
        tokio::time::sleep(self.work).await;
        let left = CallContext::current().and_then(|served| served.remaining());
        let request = EchoRequest {
            payload: bytes::Bytes::from_static(b"x"),
            delay_ms: None,
        };
        self.echo.clone().echo(request).await?;
        Ok(tonic::Response::new(HelloReply {
            message: format!("{:?}", left.map(|left| left.as_millis())),
            provider: String::new(),
        }))
    }

    type SayHelloStreamStream = futures_util::stream::Empty<Result<HelloReply, Status>>;

    async fn say_hello_stream(
        &self,
        _request: tonic::Request<HelloRequest>,
    ) -> Result<tonic::Response<Self::SayHelloStreamStream>, Status> {
        Err(Status::unimplemented("not in this test"))
    }
}

async fn provider_b(hub: &MemoryHub, recorder: &Recorder) -> Application {
    let mut builder = common::builder("b", hub, Duration::ZERO);
    builder.service(EchoServer::new(recorder.clone()));
    builder.start().await.expect("B starts")
}

async fn provider_a(hub: &MemoryHub, work: Duration, reference: &str) -> Application {
    let text = format!(
        "application: {{ name: a, logging: false }}\n\
         admin: {{ port: 0 }}\n\
         graceful_shutdown: {{ internal_signal: false }}\n\
         consumer:\n  references:\n    echo.Echo: {{ {reference} }}\n"
    );
    let config = Config::from_str(&text, ConfigFormat::Yaml, "a.yaml").expect("valid");
    let mut builder = common::builder_with(config, hub, Duration::ZERO);
    let echo = EchoClient::new(builder.reference("echo.Echo"));
    builder.service(GreeterServer::new(Gateway { work, echo }));
    builder.start().await.expect("A starts")
}

async fn client_of(app: &Application) -> GreeterClient<tonic::transport::Channel> {
    let address = app.local_addr().expect("A listens");
    GreeterClient::connect(format!("http://{address}"))
        .await
        .expect("client connects")
}

fn hello(deadline: Option<Duration>) -> tonic::Request<HelloRequest> {
    let mut request = tonic::Request::new(HelloRequest {
        name: "chain".into(),
        count: 0,
    });
    if let Some(deadline) = deadline {
        request.set_timeout(deadline);
    }
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_next_hop_gets_what_remains_and_a_retry_gets_less() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    // Two instances of B: failover sends a retry to another instance.
    let b = [
        provider_b(&hub, &recorder).await,
        provider_b(&hub, &recorder).await,
    ];
    let a = provider_a(
        &hub,
        Duration::from_millis(700),
        "idempotent: true, retries: 1",
    )
    .await;
    let mut client = client_of(&a).await;

    let deadline = Duration::from_secs(1);
    let reply = client
        .say_hello(hello(Some(deadline)))
        .await
        .expect("the chain answers");
    let sent = recorder.seen.lock().clone();
    println!(
        "deadline_hops: client deadline {deadline:?}, A worked 700 ms, A saw {} ms left; B was sent {sent:?}",
        reply.get_ref().message
    );
    let [Some(sent)] = sent[..] else {
        panic!("B executes one request, with a deadline: {sent:?}")
    };
    assert!(
        sent <= deadline - Duration::from_millis(700),
        "B gets at most what remains after A's 700 ms of work: {sent:?}"
    );

    // A retry sends only what remains after the failed attempt.
    recorder.seen.lock().clear();
    recorder.failures.store(1, Ordering::SeqCst);
    client
        .say_hello(hello(Some(deadline)))
        .await
        .expect("the retry answers");
    let sent = recorder.seen.lock().clone();
    println!("deadline_hops: first attempt and retry were sent {sent:?}");
    let [Some(first), Some(retry)] = sent[..] else {
        panic!("B executes a failed first attempt and a retry, both with deadlines: {sent:?}")
    };
    assert!(first <= Duration::from_millis(300), "{first:?}");
    assert!(
        retry < first,
        "the retry is sent less than the first attempt: {sent:?}"
    );

    // Without a deadline from the client, B is sent none: A's reference timeout bounds
    // each attempt until its response head, and is not a deadline for B.
    recorder.seen.lock().clear();
    client
        .say_hello(hello(None))
        .await
        .expect("the chain answers");
    assert_eq!(*recorder.seen.lock(), [None]);

    a.before_shutdown().await;
    for b in b {
        b.before_shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_with_no_time_left_is_refused_before_its_handler() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    let b = provider_b(&hub, &recorder).await;
    let address = b.local_addr().expect("B listens");
    let mut client = EchoClient::connect(format!("http://{address}"))
        .await
        .expect("connects");
    let mut request = tonic::Request::new(EchoRequest {
        payload: bytes::Bytes::from_static(b"x"),
        delay_ms: None,
    });
    request
        .metadata_mut()
        .insert("grpc-timeout", "0m".parse().expect("a valid value"));
    let status = client.echo(request).await.expect_err("no time left");
    assert_eq!(status.code(), Code::DeadlineExceeded);
    assert_eq!(status.message(), rpc::core::metadata::NO_TIME_LEFT);
    assert!(recorder.seen.lock().is_empty(), "B's handler never ran");
    b.before_shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reference_that_opts_out_sends_no_inherited_deadline() {
    let hub = MemoryHub::new();
    let recorder = Recorder::default();
    let b = provider_b(&hub, &recorder).await;
    let a = provider_a(&hub, Duration::from_millis(10), "inherit_deadline: false").await;
    let mut client = client_of(&a).await;
    client
        .say_hello(hello(Some(Duration::from_secs(5))))
        .await
        .expect("the chain answers");
    assert_eq!(
        *recorder.seen.lock(),
        [None],
        "the opt-out sends no deadline"
    );
    a.before_shutdown().await;
    b.before_shutdown().await;
}
