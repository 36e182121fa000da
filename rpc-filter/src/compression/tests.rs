//! The two layers over a stand-in for tonic's routes and for the cluster.

use std::io::Read;
use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Request, Response};
use http_body_util::{BodyExt, StreamBody};
use parking_lot::Mutex;
use tonic::body::Body as TonicBody;
use tonic::{Code, Status};
use tower::{Layer, Service, ServiceExt};

use super::*;

fn framed(compressed: bool, message: &[u8]) -> Bytes {
    let mut bytes = vec![u8::from(compressed)];
    bytes.extend_from_slice(&(message.len() as u32).to_be_bytes());
    bytes.extend_from_slice(message);
    Bytes::from(bytes)
}

fn gzipped(message: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(message).unwrap();
    encoder.finish().unwrap()
}

fn gunzipped(message: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(message)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The messages of a body: (compressed flag, bytes).
fn messages(mut bytes: &[u8]) -> Vec<(bool, Vec<u8>)> {
    let mut messages = Vec::new();
    while bytes.len() >= 5 {
        let length = u32::from_be_bytes([bytes[1], bytes[2], bytes[3], bytes[4]]) as usize;
        messages.push((bytes[0] == 1, bytes[5..5 + length].to_vec()));
        bytes = &bytes[5 + length..];
    }
    messages
}

/// A body of `chunks` followed by `grpc-status: 0` trailers.
fn body(chunks: Vec<Bytes>) -> TonicBody {
    let mut trailers = HeaderMap::new();
    trailers.insert("grpc-status", HeaderValue::from_static("0"));
    let frames = chunks
        .into_iter()
        .map(|chunk| Ok::<_, Status>(http_body::Frame::data(chunk)))
        .chain([Ok(http_body::Frame::trailers(trailers))]);
    TonicBody::new(StreamBody::new(futures_util::stream::iter(frames)))
}

/// What the stand-in saw of a request.
#[derive(Debug)]
struct Seen {
    headers: HeaderMap,
    body: Result<Bytes, Status>,
    arrived: Option<RequestEncoding>,
}

type Record = Arc<Mutex<Option<Seen>>>;

/// A stand-in that reads the whole request and answers `reply` (one message).
fn routes(
    record: Record,
    reply: &'static [u8],
) -> impl Service<
    Request<TonicBody>,
    Response = Response<TonicBody>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone {
    tower::service_fn(move |request: Request<TonicBody>| {
        let record = record.clone();
        async move {
            let arrived = request.extensions().get::<RequestEncoding>().cloned();
            let (parts, body) = request.into_parts();
            let body = body.collect().await.map(|collected| collected.to_bytes());
            *record.lock() = Some(Seen {
                headers: parts.headers,
                body,
                arrived,
            });
            let mut response = Response::new(body_of_reply(reply));
            response
                .headers_mut()
                .insert("content-type", HeaderValue::from_static("application/grpc"));
            Ok(response)
        }
    })
}

fn body_of_reply(reply: &'static [u8]) -> TonicBody {
    body(vec![framed(false, reply)])
}

fn request(headers: &[(&'static str, &'static str)], chunks: Vec<Bytes>) -> Request<TonicBody> {
    let mut request = Request::new(body(chunks));
    *request.uri_mut() = "/helloworld.Greeter/SayHello".parse().unwrap();
    for (name, value) in headers {
        request
            .headers_mut()
            .append(*name, HeaderValue::from_static(value));
    }
    request
}

fn provider(services: &[(&str, Compression)]) -> ProviderCompressionLayer {
    ProviderCompressionLayer::new(
        services
            .iter()
            .map(|(name, compression)| ((*name).to_owned(), *compression)),
        CompressionLimits {
            max_decoding_message_size: 1 << 20,
            max_encoding_message_size: 1 << 20,
        },
    )
}

async fn read(response: Response<TonicBody>) -> (HeaderMap, Result<Bytes, Status>) {
    let (parts, body) = response.into_parts();
    (parts.headers, body.collect().await.map(|c| c.to_bytes()))
}

const MESSAGE: &[u8] = b"a message that compresses, a message that compresses";
const REPLY: &[u8] = b"the reply, the reply, the reply, the reply, the reply";

#[tokio::test]
async fn a_gzip_request_reaches_the_routes_decompressed_and_unmarked() {
    let record = Record::default();
    let service = provider(&[]).layer(routes(record.clone(), REPLY));
    let compressed = framed(true, &gzipped(MESSAGE));
    let response = service
        .oneshot(request(&[("grpc-encoding", "gzip")], vec![compressed]))
        .await
        .unwrap();
    let (headers, body) = read(response).await;
    let seen = record.lock().take().unwrap();
    assert!(
        seen.headers.get("grpc-encoding").is_none(),
        "header removed"
    );
    assert_eq!(seen.body.unwrap(), framed(false, MESSAGE));
    let arrived = seen.arrived.expect("the request says what arrived");
    assert_eq!(arrived.encoding(), Encoding::Gzip);
    assert_eq!(arrived.next_message_compressed(), Some(true));
    // Not configured to compress: the response is plain, and says what it reads.
    assert_eq!(headers["grpc-accept-encoding"], "gzip,zstd,identity");
    assert!(headers.get("grpc-encoding").is_none());
    assert_eq!(body.unwrap(), framed(false, REPLY));
}

#[tokio::test]
async fn a_configured_service_compresses_for_clients_that_accept_it() {
    for (accept, compressed) in [("identity,deflate,gzip", true), ("identity", false)] {
        let record = Record::default();
        let layer = provider(&[("helloworld.Greeter", Compression::Gzip)]);
        let service = layer.layer(routes(record.clone(), REPLY));
        let response = service
            .oneshot(request(
                &[("grpc-accept-encoding", accept)],
                vec![framed(false, MESSAGE)],
            ))
            .await
            .unwrap();
        let (headers, body) = read(response).await;
        let sent = messages(&body.unwrap());
        assert_eq!(sent.len(), 1);
        if compressed {
            assert_eq!(headers["grpc-encoding"], "gzip");
            assert!(sent[0].0, "the flag is set");
            assert_eq!(gunzipped(&sent[0].1), REPLY);
        } else {
            assert!(headers.get("grpc-encoding").is_none(), "{accept}");
            assert_eq!(sent[0], (false, REPLY.to_vec()));
        }
    }
}

#[tokio::test]
async fn other_services_and_trailers_only_answers_are_not_compressed() {
    let record = Record::default();
    let layer = provider(&[("other.Service", Compression::Zstd)]);
    let response = layer
        .layer(routes(record.clone(), REPLY))
        .oneshot(request(&[("grpc-accept-encoding", "zstd")], vec![]))
        .await
        .unwrap();
    assert!(response.headers().get("grpc-encoding").is_none());

    let refusing = tower::service_fn(|_: Request<TonicBody>| async {
        Ok::<_, std::convert::Infallible>(Status::unavailable("closing").into_http())
    });
    let response = provider(&[("helloworld.Greeter", Compression::Zstd)])
        .layer(refusing)
        .oneshot(request(&[("grpc-accept-encoding", "zstd")], vec![]))
        .await
        .unwrap();
    assert!(response.headers().get("grpc-encoding").is_none());
    assert_eq!(response.headers()["grpc-status"], "14");
}

#[tokio::test]
async fn an_unknown_encoding_is_unimplemented_without_reaching_the_routes() {
    let record = Record::default();
    let service = provider(&[]).layer(routes(record.clone(), REPLY));
    let response = service
        .oneshot(request(
            &[("grpc-encoding", "snappy")],
            vec![framed(true, b"?")],
        ))
        .await
        .unwrap();
    assert!(record.lock().is_none(), "the routes never ran");
    let headers = response.headers();
    assert_eq!(headers["grpc-status"], "12", "UNIMPLEMENTED, trailers-only");
    assert_eq!(headers["grpc-accept-encoding"], "gzip,zstd,identity");
    let message = headers["grpc-message"].to_str().unwrap();
    assert!(message.contains("snappy"), "{message}");
}

#[tokio::test]
async fn a_decompression_bomb_reaches_the_routes_as_resource_exhausted() {
    let record = Record::default();
    let service = provider(&[]).layer(routes(record.clone(), REPLY));
    // 16 MiB of zeros in about 16 KiB, over the 1 MiB limit.
    let bomb = framed(true, &gzipped(&vec![0; 16 << 20]));
    assert!(bomb.len() < 100 << 10);
    service
        .oneshot(request(&[("grpc-encoding", "gzip")], vec![bomb]))
        .await
        .unwrap();
    let seen = record.lock().take().unwrap();
    let status = seen.body.unwrap_err();
    assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
}

#[tokio::test]
async fn a_zstd_request_is_read_and_a_malformed_one_is_internal() {
    let record = Record::default();
    let service = provider(&[]).layer(routes(record.clone(), REPLY));
    let compressed = framed(true, &zstd::encode_all(MESSAGE, 3).unwrap());
    service
        .clone()
        .oneshot(request(&[("grpc-encoding", "zstd")], vec![compressed]))
        .await
        .unwrap();
    assert_eq!(
        record.lock().take().unwrap().body.unwrap(),
        framed(false, MESSAGE)
    );
    service
        .oneshot(request(
            &[("grpc-encoding", "zstd")],
            vec![framed(true, b"not zstd")],
        ))
        .await
        .unwrap();
    let status = record.lock().take().unwrap().body.unwrap_err();
    assert_eq!(status.code(), Code::Internal, "{status:?}");
}

/// A stand-in for the cluster: records the request, answers `reply` marked with
/// `encoding` (already compressed by the caller of this function).
fn cluster(
    record: Record,
    encoding: Option<&'static str>,
    reply: Bytes,
) -> impl Service<
    Request<TonicBody>,
    Response = Response<TonicBody>,
    Error = std::convert::Infallible,
    Future = impl Send,
> + Clone {
    tower::service_fn(move |request: Request<TonicBody>| {
        let record = record.clone();
        let reply = reply.clone();
        async move {
            let (parts, body) = request.into_parts();
            let body = body.collect().await.map(|c| c.to_bytes());
            *record.lock() = Some(Seen {
                headers: parts.headers,
                body,
                arrived: None,
            });
            let mut response = Response::new(body_of(reply));
            if let Some(encoding) = encoding {
                response
                    .headers_mut()
                    .insert("grpc-encoding", HeaderValue::from_static(encoding));
            }
            Ok(response)
        }
    })
}

fn body_of(chunk: Bytes) -> TonicBody {
    body(vec![chunk])
}

#[tokio::test]
async fn a_reference_compresses_requests_and_reads_compressed_responses() {
    let record = Record::default();
    let reply = framed(true, &gzipped(REPLY));
    let layer = ConsumerCompressionLayer::new(Compression::Gzip, CompressionLimits::default());
    let response = layer
        .layer(cluster(record.clone(), Some("gzip"), reply))
        .oneshot(request(&[], vec![framed(false, MESSAGE)]))
        .await
        .unwrap();
    let seen = record.lock().take().unwrap();
    assert_eq!(seen.headers["grpc-encoding"], "gzip");
    assert_eq!(seen.headers["grpc-accept-encoding"], "gzip,zstd");
    let sent = messages(&seen.body.unwrap());
    assert!(sent[0].0, "the request message is flagged compressed");
    assert_eq!(gunzipped(&sent[0].1), MESSAGE);
    let (headers, body) = read(response).await;
    assert!(headers.get("grpc-encoding").is_none(), "header removed");
    assert_eq!(body.unwrap(), framed(false, REPLY));
}

#[tokio::test]
async fn a_reference_leaves_alone_what_the_generated_client_does_itself() {
    let record = Record::default();
    let reply = framed(true, &gzipped(REPLY));
    let layer = ConsumerCompressionLayer::new(Compression::Zstd, CompressionLimits::default());
    let own = framed(true, &gzipped(MESSAGE));
    let response = layer
        .layer(cluster(record.clone(), Some("gzip"), reply.clone()))
        .oneshot(request(
            &[("grpc-encoding", "gzip"), ("grpc-accept-encoding", "gzip")],
            vec![own.clone()],
        ))
        .await
        .unwrap();
    let seen = record.lock().take().unwrap();
    assert_eq!(seen.headers["grpc-encoding"], "gzip");
    assert_eq!(seen.headers["grpc-accept-encoding"], "gzip");
    assert_eq!(seen.body.unwrap(), own, "sent as the client encoded it");
    let (headers, body) = read(response).await;
    assert_eq!(headers["grpc-encoding"], "gzip", "left for the client");
    assert_eq!(body.unwrap(), reply);
}

#[tokio::test]
async fn a_reference_refuses_a_bomb_from_a_provider() {
    let record = Record::default();
    let bomb = framed(true, &gzipped(&vec![0; 8 << 20]));
    let limits = CompressionLimits {
        max_decoding_message_size: 1 << 20,
        ..CompressionLimits::default()
    };
    let response = ConsumerCompressionLayer::new(Compression::None, limits)
        .layer(cluster(record.clone(), Some("gzip"), bomb))
        .oneshot(request(&[], vec![framed(false, MESSAGE)]))
        .await
        .unwrap();
    let seen = record.lock().take().unwrap();
    assert!(
        seen.headers.get("grpc-encoding").is_none(),
        "none configured"
    );
    assert_eq!(seen.body.unwrap(), framed(false, MESSAGE));
    let (_, body) = read(response).await;
    assert_eq!(body.unwrap_err().code(), Code::ResourceExhausted);
}

#[tokio::test]
async fn what_the_provider_reads_is_told_to_clients_that_speak_compression() {
    for (headers, told) in [
        (&[][..], false),
        (&[("grpc-accept-encoding", "identity")][..], true),
        (&[("grpc-encoding", "identity")][..], true),
    ] {
        let service = provider(&[]).layer(routes(Record::default(), REPLY));
        let response = service
            .oneshot(request(headers, vec![framed(false, MESSAGE)]))
            .await
            .unwrap();
        let (answer, body) = read(response).await;
        assert_eq!(body.unwrap(), framed(false, REPLY), "{headers:?}");
        assert_eq!(
            answer
                .get("grpc-accept-encoding")
                .map(|v| v.to_str().unwrap()),
            told.then_some("gzip,zstd,identity"),
            "{headers:?}"
        );
    }
}
