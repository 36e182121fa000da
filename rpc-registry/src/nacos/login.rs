//! Nacos username/password login, in place of nacos-sdk's own HTTP login plugin.
//!
//! The SDK's plugin writes the password to its debug log and, when the server cannot be
//! reached, logs the request URL with the password in its query string. This one posts
//! the credentials as a form body over a minimal HTTP/1.0 exchange and never logs them. It
//! asks for a new token when a tenth of the token's lifetime has passed, as the SDK does
//! (the SDK calls `login` every 30 s).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use nacos_sdk::api::plugin::{AuthContext, AuthPlugin, LoginIdentityContext, RequestResource};
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::time::Instant;

/// The key under which the SDK sends the token with every request.
const ACCESS_TOKEN: &str = "accessToken";

/// Logs in with a user name and password over HTTP (`POST /nacos/v1/auth/login`).
pub(crate) struct HttpLogin {
    user: String,
    password: String,
    timeout: Duration,
    token: Mutex<Option<(String, Instant)>>,
}

impl fmt::Debug for HttpLogin {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpLogin")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl HttpLogin {
    /// A login as `user`, each attempt bounded by `timeout`.
    pub(crate) fn new(user: String, password: String, timeout: Duration) -> Self {
        Self {
            user,
            password,
            timeout,
            token: Mutex::new(None),
        }
    }

    /// One login against `server` (`host:port` of its HTTP API): the token and how long
    /// until it should be renewed.
    async fn login_at(&self, server: &str) -> Result<(String, Duration), String> {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("username", &self.user)
            .append_pair("password", &self.password)
            .finish();
        let request = format!(
            "POST /nacos/v1/auth/login HTTP/1.0\r\nHost: {server}\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        );
        let exchange = async {
            let mut stream = tokio::net::TcpStream::connect(server).await?;
            stream.write_all(request.as_bytes()).await?;
            let mut response = Vec::new();
            stream.read_to_end(&mut response).await?;
            Ok::<_, std::io::Error>(response)
        };
        let response = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(response)) => response,
            Ok(Err(error)) => return Err(format!("login request failed: {error}")),
            Err(_) => return Err(format!("no login answer within {:?}", self.timeout)),
        };
        let response = String::from_utf8_lossy(&response);
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.lines().next().unwrap_or_default();
        if status.split_whitespace().nth(1) != Some("200") {
            return Err(format!("login refused: {status}"));
        }
        let json: serde_json::Value = serde_json::from_str(body)
            .map_err(|error| format!("login answer is not JSON: {error}"))?;
        let token = json
            .get(ACCESS_TOKEN)
            .and_then(|t| t.as_str())
            .ok_or("login answer has no accessToken")?;
        let ttl = json
            .get("tokenTtl")
            .and_then(|t| t.as_u64())
            .unwrap_or(18_000);
        Ok((token.to_owned(), Duration::from_secs((ttl / 10).max(1))))
    }
}

#[async_trait]
impl AuthPlugin for HttpLogin {
    async fn login(&self, servers: Arc<Vec<String>>, _context: Arc<AuthContext>) {
        if matches!(&*self.token.lock(), Some((_, renew_at)) if Instant::now() < *renew_at) {
            return;
        }
        for server in servers.iter() {
            match self.login_at(server).await {
                Ok((token, renew_after)) => {
                    *self.token.lock() = Some((token, Instant::now() + renew_after));
                    return;
                }
                Err(error) => {
                    tracing::warn!(%server, user = %self.user, %error, "Nacos login failed")
                }
            }
        }
    }

    fn get_login_identity(&self, _resource: RequestResource) -> LoginIdentityContext {
        match &*self.token.lock() {
            Some((token, _)) => {
                LoginIdentityContext::default().add_context(ACCESS_TOKEN, token.clone())
            }
            None => LoginIdentityContext::default(),
        }
    }
}
