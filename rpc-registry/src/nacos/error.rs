//! What nacos-sdk's errors mean here. The SDK retries by itself and says little: the one
//! distinction this client draws is [`is_refusal`], the server's own answer refusing a
//! request (bad credentials, unknown namespace) as opposed to no answer at all.

pub(super) use nacos_sdk::api::error::Error as NacosError;

/// Whether `error` is the server refusing a request rather than not answering it.
pub(super) fn is_refusal(error: &NacosError) -> bool {
    matches!(error, NacosError::ErrResponse(..))
}
