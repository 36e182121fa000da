//! Echo calls through a reference, as the fault tests make them: one call that names
//! the provider that answered, and a wait until every provider has answered.

use std::collections::BTreeSet;
use std::time::Duration;

use proto::echo::EchoRequest;
use proto::echo::echo_client::EchoClient;
use rpc::ReferenceChannel;
use tokio::time::Instant;

/// One echo of 16 bytes with a deadline of `timeout`; the answering provider's address.
///
/// # Errors
/// The call's status when it fails.
pub async fn echo_once(
    mut client: EchoClient<ReferenceChannel>,
    timeout: Duration,
) -> Result<String, tonic::Status> {
    let mut request = tonic::Request::new(EchoRequest {
        payload: vec![0; 16].into(),
        delay_ms: None,
    });
    request.set_timeout(timeout);
    Ok(client.echo(request).await?.into_inner().provider)
}

/// Calls (each with `call_timeout`, 20 ms apart) until every address in `addrs` has
/// answered, which means the consumer knows them all.
///
/// # Panics
/// When not every address answered within `bound`, naming those seen.
pub async fn until_every_provider_answers(
    client: &EchoClient<ReferenceChannel>,
    addrs: &[String],
    call_timeout: Duration,
    bound: Duration,
) {
    let deadline = Instant::now() + bound;
    let mut seen = BTreeSet::new();
    while addrs.iter().any(|a| !seen.contains(a)) {
        assert!(
            Instant::now() < deadline,
            "the consumer did not reach every provider within {bound:?}: saw {seen:?} of {addrs:?}"
        );
        if let Ok(provider) = echo_once(client.clone(), call_timeout).await {
            seen.insert(provider);
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
