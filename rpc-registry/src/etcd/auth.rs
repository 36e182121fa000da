//! etcd authentication as the client keeps it: the credentials of the URL, the token
//! every request carries (in its `token` metadata), and replacing that token once when
//! etcd refuses it.
//!
//! etcd's tokens do not last: a simple token expires after `--auth-token-ttl` (5 minutes
//! by default) without use, and a restarted etcd knows none of the tokens it gave. A
//! request whose token is refused authenticates again and is sent again, once; requests
//! that were refused the same token at the same time authenticate once between them (the
//! first replaces the token, the others find it replaced and use the new one).

use std::future::Future;

use parking_lot::RwLock;
use tokio::sync::Mutex;
use tonic::Request;
use tonic::metadata::AsciiMetadataValue;

use crate::etcd::error::EtcdError;

/// The metadata key etcd reads the authentication token from.
const TOKEN_KEY: &str = "token";

/// A token etcd gave.
pub(super) type Token = AsciiMetadataValue;

/// The credentials and the current token of one client.
pub(super) struct Auth {
    /// User and password, if etcd authentication is on.
    credentials: Option<(String, String)>,
    /// The token every request carries, once authenticated.
    token: RwLock<Option<Token>>,
    /// Held while authenticating again, so that concurrent refusals authenticate once.
    renewing: Mutex<()>,
}

impl Auth {
    /// No token yet; with `credentials`, [`Auth::renew`] gets one.
    pub(super) fn new(credentials: Option<(String, String)>) -> Self {
        Self {
            credentials,
            token: RwLock::new(None),
            renewing: Mutex::new(()),
        }
    }

    /// Whether there are credentials, so a refused token can be replaced.
    pub(super) fn enabled(&self) -> bool {
        self.credentials.is_some()
    }

    /// The token requests carry now.
    pub(super) fn token(&self) -> Option<Token> {
        self.token.read().clone()
    }

    /// Replaces the token `stale` with one from `authenticate`, unless a concurrent
    /// request already replaced it; nothing without credentials.
    ///
    /// # Errors
    /// What `authenticate` fails with.
    pub(super) async fn renew<F, Fut>(
        &self,
        stale: Option<Token>,
        authenticate: F,
    ) -> Result<(), EtcdError>
    where
        F: FnOnce((String, String)) -> Fut,
        Fut: Future<Output = Result<Token, EtcdError>>,
    {
        let Some(credentials) = &self.credentials else {
            return Ok(());
        };
        let _one_at_a_time = self.renewing.lock().await;
        if *self.token.read() != stale {
            return Ok(());
        }
        let token = authenticate(credentials.clone()).await?;
        *self.token.write() = Some(token);
        Ok(())
    }
}

/// The token etcd answered `Authenticate` with, as metadata.
///
/// # Errors
/// [`EtcdError::Protocol`] for a token that cannot be metadata (not visible ASCII).
pub(super) fn token_from(text: String) -> Result<Token, EtcdError> {
    Token::try_from(text).map_err(|_| {
        EtcdError::Protocol("etcd answered with a token that is not valid metadata".to_owned())
    })
}

/// `message` as a request carrying `token`, if any.
pub(super) fn with_token<M>(message: M, token: Option<Token>) -> Request<M> {
    let mut request = Request::new(message);
    if let Some(token) = token {
        request.metadata_mut().insert(TOKEN_KEY, token);
    }
    request
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_travels_as_metadata_only_when_there_is_one() {
        let token = Token::from_static("abc.42");
        let request = with_token((), Some(token));
        assert_eq!(
            request
                .metadata()
                .get(TOKEN_KEY)
                .and_then(|v| v.to_str().ok()),
            Some("abc.42")
        );
        assert!(with_token((), None).metadata().get(TOKEN_KEY).is_none());
        assert!(token_from("line\nbreak".to_owned()).is_err());
    }

    #[tokio::test]
    async fn a_refused_token_is_replaced_once_and_only_with_credentials() {
        let auth = Auth::new(Some(("u".into(), "p".into())));
        let issue = |text: &'static str| {
            move |(user, _): (String, String)| {
                assert_eq!(user, "u");
                std::future::ready(Ok(Token::from_static(text)))
            }
        };
        auth.renew(None, issue("t1")).await.unwrap();
        assert_eq!(auth.token(), Some(Token::from_static("t1")));
        // A request refused with the old token after another replaced it: nothing to do.
        auth.renew(None, issue("t2")).await.unwrap();
        assert_eq!(auth.token(), Some(Token::from_static("t1")));
        auth.renew(auth.token(), issue("t2")).await.unwrap();
        assert_eq!(auth.token(), Some(Token::from_static("t2")));

        let anonymous = Auth::new(None);
        assert!(!anonymous.enabled());
        anonymous.renew(None, issue("never")).await.unwrap();
        assert_eq!(anonymous.token(), None);
    }
}
