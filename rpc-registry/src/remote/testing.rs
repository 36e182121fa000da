//! Checks every network backend's unit tests make alike, written once so that the three
//! backends are held to the same standard.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use tokio::time::Instant;

use rpc_core::{Instance, InstanceId, RegistryError, ServiceKey, Unreachability};

use crate::url::RegistryUrl;

/// The password every helper here puts in URLs, and looks for where it must not be.
const PASSWORD: &str = "hunter2";

/// What `from_url` reads from `url`, or the text of its error (or of the URL's).
pub(crate) fn parse<T>(
    url: &str,
    from_url: impl FnOnce(&RegistryUrl) -> Result<T, RegistryError>,
) -> Result<T, String> {
    let url = RegistryUrl::parse(url).map_err(|e| e.to_string())?;
    from_url(&url).map_err(|e| e.to_string())
}

/// Asserts that the password `hunter2` shows neither in the error `from_url` gives for
/// `bad` nor in the `Debug` of what it reads from `good`.
pub(crate) fn assert_password_hidden<T: fmt::Debug>(
    from_url: impl Fn(&RegistryUrl) -> Result<T, RegistryError>,
    bad: &str,
    good: &str,
) {
    let error = parse(bad, &from_url).unwrap_err();
    assert!(!error.contains(PASSWORD), "{error}");
    let debug = format!("{:?}", parse(good, &from_url).unwrap());
    assert!(!debug.contains(PASSWORD), "{debug}");
}

/// Asserts that `connect`, given `<scheme_and_user>:hunter2@127.0.0.1:<a port nothing
/// listens on>?connect_timeout=<timeout>`, fails as unreachable within that timeout,
/// with an error that says the connection was refused (issue 15: not "timed out",
/// which it was not) and does not show the password.
///
/// Meant for a test on tokio's paused clock (`start_paused = true`): a refused dial on
/// loopback fails at once, without an I/O wait, so time passes only by the backend's
/// own timers, and "within" is exact. (etcd's client reports the refusal at once; the
/// ZooKeeper and Nacos clients retry until the timeout, then the probe names the
/// cause: exactly the timeout.)
pub(crate) async fn assert_unreachable_in_time<R, F>(
    scheme_and_user: &str,
    timeout: Duration,
    connect: impl FnOnce(RegistryUrl) -> F,
) where
    F: Future<Output = Result<R, RegistryError>>,
{
    let port = closed_port();
    let url = RegistryUrl::parse(&format!(
        "{scheme_and_user}:{PASSWORD}@127.0.0.1:{port}?connect_timeout={timeout:?}"
    ))
    .unwrap();
    let started = Instant::now();
    let Err(error) = connect(url).await else {
        panic!("connected to a closed port");
    };
    assert!(
        started.elapsed() <= timeout,
        "reported after {:?} of tokio's clock, past its connect_timeout ({timeout:?})",
        started.elapsed()
    );
    assert!(
        matches!(
            error,
            RegistryError::Unreachable { timeout: bound, cause: Unreachability::Refused, .. }
                if bound == timeout
        ),
        "{error:?}"
    );
    let message = error.to_string();
    assert!(
        message.contains("refused the connection") && !message.contains(PASSWORD),
        "{message}"
    );
}

/// Asserts how a backend stores an instance of `service` whose id is `id`: at the key or
/// path `expected` (`place` gives it), as data that `decode` turns back into the same
/// instance; and that data which is not an instance decodes to nothing.
#[cfg_attr(not(any(feature = "etcd", feature = "zookeeper")), allow(dead_code))]
pub(crate) fn assert_stored_form<D: AsRef<[u8]>, E: fmt::Debug>(
    (service, id): (ServiceKey, &str),
    (place, expected): (impl Fn(&Instance) -> String, &str),
    encode: impl FnOnce(&Instance) -> Result<D, E>,
    decode: impl Fn(&[u8]) -> Option<Instance>,
) {
    let mut instance = Instance::new(service, "10.0.0.1", 80);
    instance.id = InstanceId::new(id);
    assert_eq!(place(&instance), expected);
    let stored = encode(&instance).unwrap();
    assert_eq!(decode(stored.as_ref()), Some(instance));
    assert_eq!(decode(b"not json"), None);
}

/// A loopback port nothing listens on (bound, then released).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}
