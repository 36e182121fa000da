//! The provider's adaptive concurrency limit: refuse the excess of an overload at once,
//! rather than queue it until deadlines expire.
//!
//! A provider past its capacity does not serve more by accepting more: requests queue
//! (in the runtime, in the handler's pools), every one of them gets slower, and callers
//! see their deadlines pass after waiting for most of them. A limit on the requests in
//! flight keeps the queue short; the right limit is not known in advance (it changes
//! with the handler, the hardware and the neighbours), so it is learnt from the
//! round-trip time, as TCP's delay-based congestion control (Vegas) learns a window.
//!
//! # What we follow
//!
//! Netflix's [concurrency-limits] `Gradient2Limit` (see [`Gradient`]): the limit is
//! multiplied by the gradient `tolerance × long-term RTT / current RTT`, clamped to
//! [0.5, 1], plus a small queue allowance, and smoothed. Its defaults are kept for
//! `tolerance` (1.5), `smoothing` (0.2), `queue_size` (4) and `long_window` (600).
//!
//! Where we differ:
//! - **Windows, not every sample.** Netflix moves the limit on every request's sample
//!   (or per window with its `WindowedLimit`); we always aggregate a window (default
//!   100 ms and at least 10 samples, as `WindowedLimit` does with 1 s) and use its mean
//!   RTT, as Envoy's [adaptive concurrency] filter samples per interval. This keeps the
//!   per-request path to atomics: admission is one add on the in-flight count compared
//!   with the limit, a request's end is a few relaxed adds, and the one request that
//!   closes a window updates the algorithm under a `try_lock` (never waiting). So
//!   `long_window` counts windows, not requests.
//! - **No separate min-RTT probe.** Envoy measures a minimum RTT by periodically
//!   dropping the limit to a floor; Gradient2 (and we) use the long-term average instead,
//!   decayed by 5 % a window while it is more than twice the current RTT, so the
//!   provider never sheds load on purpose to measure itself.
//! - **Defaults**: initial 100, min 50, max 1 000 (Netflix: 20 / 20 / 200): a provider
//!   here serves thousands of short requests a second, and a limit that starts too low
//!   refuses healthy load until it has grown. The floor of 50 is measured, not taken:
//!   the gradient reads CPU contention (the provider sharing its cores) as queueing,
//!   and with a floor of 8 the limit collapsed under a 1.5× overload of
//!   `benches/overload.sh` and refused load the chain could serve (goodput 0.49× the
//!   healthy rate; with 50, see docs/benchmarks.md).
//!
//! # The refusal
//!
//! Over the limit a request is answered at once, without running, as a trailers-only
//! `RESOURCE_EXHAUSTED` with `rpc-not-executed: overloaded`. Health checks
//! (`grpc.health.v1.Health`) are never limited. A plain gRPC client sees an ordinary
//! RESOURCE_EXHAUSTED; our consumers may place the request on another instance, but
//! only a bounded number of times (lossless-rpc-cluster's `FailureKind::Overloaded`): each
//! re-route is more work for a fleet that may be overloaded as a whole.
//!
//! The filter sits inside the graceful filter (a closing provider refuses as closing,
//! first) and inside the call metrics, so refusals are counted and traced like other
//! calls; [`ConcurrencyLimiter::refused`] counts them for the provider's metrics.
//!
//! [concurrency-limits]: https://github.com/Netflix/concurrency-limits
//! [adaptive concurrency]: https://www.envoyproxy.io/docs/envoy/latest/configuration/http/http_filters/adaptive_concurrency_filter

mod gradient;
mod layer;
mod limiter;

pub use gradient::{Gradient, GradientConfig, WindowSample};
pub use layer::{ConcurrencyLimit, ConcurrencyLimitLayer};
pub use limiter::{ConcurrencyLimiter, Permit};
