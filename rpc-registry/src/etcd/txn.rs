//! The transactions that make an entry belong to the generation that wrote it: a write
//! or delete happens only while the key hangs on this client's lease (or is absent, for
//! a write), compared by etcd in the same step (a `Txn` whose guard compares the key's
//! `LEASE`), so that a client whose lease was lost and renewed never takes back, nor
//! deletes, a key another client (a hot upgrade's next generation) now holds.
//!
//! etcd compares a missing key as an empty one: its `LEASE` is 0, which no granted
//! lease is. A guard is a conjunction, so "absent *or* on our previous lease" is two
//! guards: the first transaction's failure branch holds the second one, which reads the
//! key when it fails too, so the answer says whose lease holds it — one round trip.

use crate::etcd::error::EtcdError;
use crate::etcd::proto::etcdserverpb::compare::{CompareResult, CompareTarget, TargetUnion};
use crate::etcd::proto::etcdserverpb::request_op::Request;
use crate::etcd::proto::etcdserverpb::response_op::Response;
use crate::etcd::proto::etcdserverpb::{
    Compare, DeleteRangeRequest, PutRequest, RangeRequest, RequestOp, TxnRequest, TxnResponse,
};

/// What a conditional write or delete found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    /// The key was ours (or absent, for a write): written or deleted.
    Done,
    /// No such key: nothing to delete.
    Absent,
    /// Another lease holds the key: left alone.
    ByLease(i64),
}

/// Puts `value` at `key` under `lease` if the key hangs on `previous`, else if it is
/// absent; else reads it.
pub(super) fn put_if_absent_or_held(
    key: &str,
    value: &str,
    lease: i64,
    previous: i64,
) -> TxnRequest {
    let put = || RequestOp {
        request: Some(Request::RequestPut(PutRequest {
            key: key.as_bytes().to_vec(),
            value: value.as_bytes().to_vec(),
            lease,
            ..PutRequest::default()
        })),
    };
    let if_absent = TxnRequest {
        compare: vec![lease_is(key, 0)],
        success: vec![put()],
        failure: vec![read(key)],
    };
    TxnRequest {
        compare: vec![lease_is(key, previous)],
        success: vec![put()],
        failure: vec![RequestOp {
            request: Some(Request::RequestTxn(if_absent)),
        }],
    }
}

/// Deletes `key` if it hangs on `lease`; else reads it.
pub(super) fn delete_if_held(key: &str, lease: i64) -> TxnRequest {
    let delete = RequestOp {
        request: Some(Request::RequestDeleteRange(DeleteRangeRequest {
            key: key.as_bytes().to_vec(),
            ..DeleteRangeRequest::default()
        })),
    };
    TxnRequest {
        compare: vec![lease_is(key, lease)],
        success: vec![delete],
        failure: vec![read(key)],
    }
}

/// The outcome of [`put_if_absent_or_held`]: `Done`, or who holds the key.
///
/// # Errors
/// [`EtcdError::Protocol`] for an answer of another shape than the request's.
pub(super) fn put_outcome(answer: &TxnResponse) -> Result<Held, EtcdError> {
    if answer.succeeded {
        return Ok(Held::Done);
    }
    match answer.responses.first().and_then(|r| r.response.as_ref()) {
        Some(Response::ResponseTxn(inner)) if inner.succeeded => Ok(Held::Done),
        // The key exists (the second guard failed), so the read found it.
        Some(Response::ResponseTxn(inner)) => match read_outcome(inner)? {
            Held::Absent => Err(unexpected()),
            held => Ok(held),
        },
        _ => Err(unexpected()),
    }
}

/// The outcome of [`delete_if_held`].
///
/// # Errors
/// [`EtcdError::Protocol`] for an answer of another shape than the request's.
pub(super) fn delete_outcome(answer: &TxnResponse) -> Result<Held, EtcdError> {
    if answer.succeeded {
        return Ok(Held::Done);
    }
    read_outcome(answer)
}

/// Who holds the key a failed guard's read found.
fn read_outcome(failed: &TxnResponse) -> Result<Held, EtcdError> {
    match failed.responses.first().and_then(|r| r.response.as_ref()) {
        Some(Response::ResponseRange(range)) => Ok(range
            .kvs
            .first()
            .map_or(Held::Absent, |kv| Held::ByLease(kv.lease))),
        _ => Err(unexpected()),
    }
}

/// `LEASE(key) == lease` (0: the key is absent, as etcd compares a missing key).
fn lease_is(key: &str, lease: i64) -> Compare {
    Compare {
        result: CompareResult::Equal.into(),
        target: CompareTarget::Lease.into(),
        key: key.as_bytes().to_vec(),
        target_union: Some(TargetUnion::Lease(lease)),
        ..Compare::default()
    }
}

/// Reads `key` (without its value: only its lease matters).
fn read(key: &str) -> RequestOp {
    RequestOp {
        request: Some(Request::RequestRange(RangeRequest {
            key: key.as_bytes().to_vec(),
            keys_only: true,
            ..RangeRequest::default()
        })),
    }
}

fn unexpected() -> EtcdError {
    EtcdError::Protocol("etcd answered a transaction with responses of another shape".into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::etcd::proto::etcdserverpb::{RangeResponse, ResponseOp};
    use crate::etcd::proto::mvccpb::KeyValue;

    fn range(lease: Option<i64>) -> ResponseOp {
        let kvs = lease
            .map(|lease| KeyValue {
                key: b"k".to_vec(),
                lease,
                ..KeyValue::default()
            })
            .into_iter()
            .collect();
        ResponseOp {
            response: Some(Response::ResponseRange(RangeResponse {
                kvs,
                ..RangeResponse::default()
            })),
        }
    }

    fn failed(responses: Vec<ResponseOp>) -> TxnResponse {
        TxnResponse {
            succeeded: false,
            responses,
            ..TxnResponse::default()
        }
    }

    #[test]
    fn a_write_compares_the_previous_lease_then_absence() {
        let request = put_if_absent_or_held("k", "v", 7, 5);
        assert_eq!(request.compare[0].target_union, Some(TargetUnion::Lease(5)));
        let Some(Request::RequestTxn(inner)) = &request.failure[0].request else {
            panic!("the second guard is nested in the failure branch: {request:?}");
        };
        assert_eq!(inner.compare[0].target_union, Some(TargetUnion::Lease(0)));
        for put in [&request.success[0], &inner.success[0]] {
            assert!(
                matches!(&put.request, Some(Request::RequestPut(p)) if p.lease == 7),
                "{put:?}"
            );
        }
    }

    #[test]
    fn outcomes_say_done_absent_or_whose_lease_holds_the_key() {
        let done = TxnResponse {
            succeeded: true,
            ..TxnResponse::default()
        };
        assert_eq!(put_outcome(&done).unwrap(), Held::Done);
        assert_eq!(delete_outcome(&done).unwrap(), Held::Done);

        let absent_write = failed(vec![ResponseOp {
            response: Some(Response::ResponseTxn(TxnResponse {
                succeeded: true,
                ..TxnResponse::default()
            })),
        }]);
        assert_eq!(put_outcome(&absent_write).unwrap(), Held::Done);
        let taken = failed(vec![ResponseOp {
            response: Some(Response::ResponseTxn(failed(vec![range(Some(9))]))),
        }]);
        assert_eq!(put_outcome(&taken).unwrap(), Held::ByLease(9));

        assert_eq!(
            delete_outcome(&failed(vec![range(None)])).unwrap(),
            Held::Absent
        );
        assert_eq!(
            delete_outcome(&failed(vec![range(Some(3))])).unwrap(),
            Held::ByLease(3)
        );
        assert!(put_outcome(&failed(vec![range(None)])).is_err());
    }
}
