//! The procedure and the assertions of each case, from the interop test descriptions.
//! A failed assertion ends the case with [`Verdict::Fail`] and says what was seen.

use std::time::Duration;

use proto::interop::{
    BoolValue, EchoStatus, Empty, SimpleRequest, StreamingInputCallRequest,
    StreamingOutputCallRequest,
};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codec::CompressionEncoding;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::{Code, Request};

use super::case::{Case, Verdict};
use super::checks::{
    Checked, call_failed, check_echo, check_payload, check_status, expect_code, fail, show,
};
use super::client::InteropClient;
use super::duplex::{expect_end, next_response, open_duplex, send};
use super::echo::{ECHO_INITIAL, ECHO_TRAILING};
use super::messages::{
    INITIAL_VALUE, LARGE_REQUEST, LARGE_RESPONSE, REQUEST_SIZES, RESPONSE_SIZES,
    SPECIAL_STATUS_MESSAGE, STATUS_MESSAGE, TRAILING_VALUE, large_request, parameters, ping, zeros,
};

/// Runs `case` on `client`. Cases share the client's record of response flags, so run
/// them one at a time on one client (clones included).
pub async fn run(client: &InteropClient, case: Case) -> Verdict {
    let checked = match case {
        Case::EmptyUnary => empty_unary(client).await,
        Case::LargeUnary => large_unary(client).await,
        Case::ClientCompressedUnary => client_compressed_unary(client).await,
        Case::ServerCompressedUnary => server_compressed_unary(client).await,
        Case::ClientStreaming => client_streaming(client).await,
        Case::ServerStreaming => server_streaming(client).await,
        Case::PingPong => ping_pong(client).await,
        Case::EmptyStream => empty_stream(client).await,
        Case::CustomMetadata => custom_metadata(client).await,
        Case::StatusCodeAndMessage => status_code_and_message(client).await,
        Case::SpecialStatusMessage => special_status_message(client).await,
        Case::UnimplementedMethod => unimplemented_method(client).await,
        Case::UnimplementedService => unimplemented_service(client).await,
        Case::CancelAfterBegin => cancel_after_begin(client).await,
        Case::CancelAfterFirstResponse => cancel_after_first_response(client).await,
        Case::TimeoutOnSleepingServer => timeout_on_sleeping_server(client).await,
    };
    checked.err().unwrap_or(Verdict::Pass)
}

async fn empty_unary(client: &InteropClient) -> Checked {
    client
        .test
        .clone()
        .empty_call(Empty {})
        .await
        .map_err(call_failed)?;
    Ok(())
}

async fn large_unary(client: &InteropClient) -> Checked {
    let response = client
        .test
        .clone()
        .unary_call(large_request())
        .await
        .map_err(call_failed)?;
    check_payload(response.get_ref().payload.as_ref(), LARGE_RESPONSE)
}

async fn client_compressed_unary(client: &InteropClient) -> Checked {
    // The probe: an uncompressed message that says it is compressed. A server with the
    // CompressedRequest feature refuses it.
    let probe = SimpleRequest {
        expect_compressed: Some(BoolValue { value: true }),
        ..large_request()
    };
    match client.test.clone().unary_call(probe.clone()).await {
        Err(status) if status.code() == Code::InvalidArgument => {}
        Ok(_) => {
            return Err(Verdict::NotApplicable(
                "the server accepted the probe: it cannot tell a compressed request (no CompressedRequest feature)".into(),
            ));
        }
        Err(status) => {
            return Err(fail(format!(
                "probe: want INVALID_ARGUMENT, got {}",
                show(&status)
            )));
        }
    }
    let compressing = client
        .test
        .clone()
        .send_compressed(CompressionEncoding::Gzip);
    let response = compressing
        .clone()
        .unary_call(probe)
        .await
        .map_err(|status| fail(format!("compressed call: {}", show(&status))))?;
    check_payload(response.get_ref().payload.as_ref(), LARGE_RESPONSE)?;
    let plain = SimpleRequest {
        expect_compressed: Some(BoolValue { value: false }),
        ..large_request()
    };
    let response = client
        .test
        .clone()
        .unary_call(plain)
        .await
        .map_err(|status| fail(format!("uncompressed call: {}", show(&status))))?;
    check_payload(response.get_ref().payload.as_ref(), LARGE_RESPONSE)
}

async fn server_compressed_unary(client: &InteropClient) -> Checked {
    let accepting = client
        .test
        .clone()
        .accept_compressed(CompressionEncoding::Gzip);
    for compressed in [true, false] {
        let request = SimpleRequest {
            response_compressed: Some(BoolValue { value: compressed }),
            ..large_request()
        };
        let response = accepting
            .clone()
            .unary_call(request)
            .await
            .map_err(|status| {
                fail(format!(
                    "response_compressed={compressed}: {}",
                    show(&status)
                ))
            })?;
        check_payload(response.get_ref().payload.as_ref(), LARGE_RESPONSE)?;
        let flags = client.response_flags.pending();
        if flags != [compressed] {
            return Err(fail(format!(
                "response_compressed={compressed}: the response message flags were {flags:?}"
            )));
        }
    }
    Ok(())
}

async fn client_streaming(client: &InteropClient) -> Checked {
    let requests = REQUEST_SIZES.map(|size| StreamingInputCallRequest {
        payload: Some(zeros(size)),
        expect_compressed: None,
    });
    let response = client
        .test
        .clone()
        .streaming_input_call(tokio_stream::iter(requests))
        .await
        .map_err(call_failed)?;
    let total = response.get_ref().aggregated_payload_size;
    if total != 74_922 {
        return Err(fail(format!("aggregated_payload_size {total}, want 74922")));
    }
    Ok(())
}

async fn server_streaming(client: &InteropClient) -> Checked {
    let request = StreamingOutputCallRequest {
        response_parameters: RESPONSE_SIZES
            .iter()
            .map(|&size| parameters(size))
            .collect(),
        ..StreamingOutputCallRequest::default()
    };
    let mut responses = client
        .test
        .clone()
        .streaming_output_call(request)
        .await
        .map_err(call_failed)?
        .into_inner();
    for size in RESPONSE_SIZES {
        let response = next_response(&mut responses).await?;
        check_payload(response.payload.as_ref(), size)?;
    }
    expect_end(&mut responses).await
}

async fn ping_pong(client: &InteropClient) -> Checked {
    let rounds = REQUEST_SIZES.into_iter().zip(RESPONSE_SIZES);
    let first = ping(REQUEST_SIZES[0], RESPONSE_SIZES[0]);
    let (requests, _, mut responses) = open_duplex(client, MetadataMap::new(), vec![first], false)
        .await
        .map_err(call_failed)?;
    for (round, (request_size, response_size)) in rounds.enumerate() {
        if round > 0 {
            send(requests.as_ref(), ping(request_size, response_size)).await?;
        }
        let response = next_response(&mut responses).await?;
        check_payload(response.payload.as_ref(), response_size)?;
    }
    drop(requests);
    expect_end(&mut responses).await
}

async fn empty_stream(client: &InteropClient) -> Checked {
    let (_, _, mut responses) = open_duplex(client, MetadataMap::new(), vec![], true)
        .await
        .map_err(call_failed)?;
    expect_end(&mut responses).await
}

async fn custom_metadata(client: &InteropClient) -> Checked {
    let mut metadata = MetadataMap::new();
    metadata.insert(ECHO_INITIAL, MetadataValue::from_static(INITIAL_VALUE));
    metadata.insert_bin(ECHO_TRAILING, MetadataValue::from_bytes(&TRAILING_VALUE));

    let mut request = Request::new(large_request());
    *request.metadata_mut() = metadata.clone();
    let response = client
        .test
        .clone()
        .unary_call(request)
        .await
        .map_err(|status| fail(format!("unary: {}", show(&status))))?;
    // tonic merges a unary call's trailers into its metadata.
    check_echo("unary", response.metadata(), response.metadata())?;

    let first = ping(LARGE_REQUEST, LARGE_RESPONSE);
    let (_, initial, mut responses) = open_duplex(client, metadata, vec![first], true)
        .await
        .map_err(call_failed)?;
    let response = next_response(&mut responses).await?;
    check_payload(response.payload.as_ref(), LARGE_RESPONSE)?;
    expect_end(&mut responses).await?;
    let trailers = responses
        .trailers()
        .await
        .map_err(|status| fail(format!("bidi trailers: {}", show(&status))))?
        .unwrap_or_default();
    check_echo("bidi", &initial, &trailers)
}

async fn status_code_and_message(client: &InteropClient) -> Checked {
    echoed_status(client, STATUS_MESSAGE).await?;
    let asking = StreamingOutputCallRequest {
        response_status: Some(EchoStatus {
            code: Code::Unknown as i32,
            message: STATUS_MESSAGE.to_owned(),
        }),
        ..StreamingOutputCallRequest::default()
    };
    // A server may end the call in its response headers (trailers-only) or after them.
    let ended = match open_duplex(client, MetadataMap::new(), vec![asking], true).await {
        Err(status) => Err(status),
        Ok((_, _, mut responses)) => responses.message().await.map(drop),
    };
    match ended {
        Err(status) => check_status("bidi", &status, Code::Unknown, STATUS_MESSAGE),
        Ok(()) => Err(fail("bidi: want UNKNOWN, got a message or the end")),
    }
}

async fn special_status_message(client: &InteropClient) -> Checked {
    echoed_status(client, SPECIAL_STATUS_MESSAGE).await
}

async fn unimplemented_method(client: &InteropClient) -> Checked {
    let result = client.test.clone().unimplemented_call(Empty {}).await;
    expect_code(result.map(drop), Code::Unimplemented)
}

async fn unimplemented_service(client: &InteropClient) -> Checked {
    let result = client
        .unimplemented
        .clone()
        .unimplemented_call(Empty {})
        .await;
    expect_code(result.map(drop), Code::Unimplemented)
}

async fn cancel_after_begin(client: &InteropClient) -> Checked {
    let (requests, receiver) = mpsc::channel::<StreamingInputCallRequest>(1);
    let mut test = client.test.clone();
    let call = test.streaming_input_call(ReceiverStream::new(receiver));
    tokio::pin!(call);
    // Begin the call (its first poll sends the request on its way), then cancel it by
    // dropping it before any message was sent: in Rust a call is cancelled by dropping
    // it, which resets the HTTP/2 stream (RST_STREAM CANCEL) toward the server.
    let result = tokio::select! {
        biased;
        result = &mut call => Some(result),
        () = std::future::ready(()) => None,
    };
    drop(requests);
    match result {
        None => Ok(()),
        Some(result) => Err(fail(format!(
            "the call ended before it was cancelled: {:?}",
            result.map(|r| r.into_inner())
        ))),
    }
}

async fn cancel_after_first_response(client: &InteropClient) -> Checked {
    let first = ping(REQUEST_SIZES[0], RESPONSE_SIZES[0]);
    let (requests, _, mut responses) = open_duplex(client, MetadataMap::new(), vec![first], false)
        .await
        .map_err(call_failed)?;
    next_response(&mut responses).await?;
    // Cancel while the server waits for the next message: dropping the call resets its
    // HTTP/2 stream (RST_STREAM CANCEL); the caller's outcome is CANCELLED by definition.
    drop(responses);
    drop(requests);
    Ok(())
}

async fn timeout_on_sleeping_server(client: &InteropClient) -> Checked {
    let (requests, receiver) = mpsc::channel(4);
    send(
        Some(&requests),
        StreamingOutputCallRequest {
            payload: Some(zeros(27_182)),
            ..StreamingOutputCallRequest::default()
        },
    )
    .await?;
    let mut request = Request::new(ReceiverStream::new(receiver));
    request.set_timeout(Duration::from_millis(1));
    // The deadline may pass before the response headers (the call fails) or after
    // (the stream fails); either way the status must be DEADLINE_EXCEEDED, and the
    // client keeps its request stream open, as if it had more to send.
    let outcome = match client.test.clone().full_duplex_call(request).await {
        Err(status) => Err(status),
        Ok(response) => response.into_inner().message().await.map(drop),
    };
    drop(requests);
    expect_code(outcome, Code::DeadlineExceeded)
}

/// UnaryCall asking for status UNKNOWN with `message`.
async fn echoed_status(client: &InteropClient, message: &str) -> Checked {
    let request = SimpleRequest {
        response_status: Some(EchoStatus {
            code: Code::Unknown as i32,
            message: message.to_owned(),
        }),
        ..SimpleRequest::default()
    };
    match client.test.clone().unary_call(request).await {
        Err(status) => check_status("unary", &status, Code::Unknown, message),
        Ok(response) => Err(fail(format!(
            "unary: want UNKNOWN, got a response {:?}",
            response.into_inner()
        ))),
    }
}
