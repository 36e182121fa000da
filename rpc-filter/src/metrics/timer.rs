//! Timing one call, from the request to the end of its response, into its method's
//! histogram under its status code.

use std::sync::Arc;

use tokio::time::Instant;
use tonic::Code;

use super::methods::{MethodHistograms, MethodSeries};
use crate::call_end::OnCallEnd;
use crate::grpc_path::split_path;

/// The start of one call and where its duration goes.
#[derive(Debug)]
pub struct CallTimer {
    series: Series,
    started: Instant,
    /// The call's trace and span ids, for its bucket's exemplar.
    trace: Option<(u128, u64)>,
}

#[derive(Debug)]
enum Series {
    /// The method has its series already: the common case, no allocation.
    Known(Arc<MethodSeries>),
    /// The first call of a method (or a call to a method that does not exist): its
    /// series is chosen when the call ends, by its status.
    New {
        histograms: Arc<MethodHistograms>,
        path: Box<str>,
    },
}

impl CallTimer {
    /// Starts timing a call to `path` (tokio's clock), counted in `histograms`.
    pub fn start(histograms: &Arc<MethodHistograms>, path: &str) -> Self {
        let series = match histograms.known(path) {
            Some(series) => Series::Known(series),
            // Not a gRPC path: it can never get a series of its own.
            None if split_path(path).is_none() => Series::Known(histograms.other().clone()),
            None => Series::New {
                histograms: histograms.clone(),
                path: path.into(),
            },
        };
        Self {
            series,
            started: Instant::now(),
            trace: None,
        }
    }

    /// The same timer, for a call in the trace `trace` (trace and span ids): the call
    /// becomes its bucket's exemplar.
    pub fn in_trace(self, trace: Option<(u128, u64)>) -> Self {
        Self { trace, ..self }
    }
}

impl OnCallEnd for CallTimer {
    fn call_ended(self, code: Code) {
        let took = self.started.elapsed();
        let series = match self.series {
            Series::Known(series) => series,
            // A method nobody serves answers UNIMPLEMENTED: it gets no series of its own,
            // or any caller could add labels at will.
            Series::New { histograms, .. } if code == Code::Unimplemented => {
                histograms.other().clone()
            }
            Series::New { histograms, path } => histograms.series(&path),
        };
        series.observe_call(code as usize, took, self.trace);
    }
}
