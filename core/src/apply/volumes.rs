//! Volume writes: binding a PV to a claim and annotating a claim, and taking either back (undo). Each is
//! an edit run by one generic read-modify-replace loop: read, check the UID, edit, replace with the
//! read's resourceVersion, and answer a 409 with a fresh read (bounded by count and deadline).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{PersistentVolume, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::{Api, Client};
use serde::Serialize;

use super::{ApplyError, ApplyOptions, Observed, Outcome, api_code, api_err};
use crate::action::{Action, ObjectRef};
use crate::plugins::volume_binding::pv_helpers::{
    ANN_BOUND_BY_CONTROLLER, VOLUME_AVAILABLE, bind_volume_to_claim, claim_volume_name,
    is_volume_bound_to_claim,
};

/// A claim as `bind_volume_to_claim` needs it: only its identity.
fn claim_stub(claim: &ObjectRef) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(claim.name.clone()),
            namespace: Some(claim.namespace.clone()),
            uid: claim.uid.clone(),
            ..ObjectMeta::default()
        },
        ..PersistentVolumeClaim::default()
    }
}

fn claim_ref_key(pv: &PersistentVolume) -> Option<String> {
    let r = pv.spec.as_ref()?.claim_ref.as_ref()?;
    Some(format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or(""),
        r.name.as_deref().unwrap_or("")
    ))
}

type VolumeResult = Result<(bool, Option<Observed>), (ApplyError, Option<Observed>)>;

/// What to do with a fresh read of the object a read-modify-replace loop writes.
enum Edit<K> {
    /// It already is as wanted: nothing to write.
    Unchanged,
    /// Replace it with this (which keeps the read's resourceVersion as the precondition).
    Replace(K),
}

/// How a read-modify-replace loop ended without an error.
enum Ended<K> {
    /// Nothing to write: the object read.
    Unchanged(K),
    /// Replaced: the object the server returned.
    Written(K),
    /// The read found no such object.
    Missing,
    /// The replace found the object gone (404): the error, and the object read before it.
    GoneBeforeWrite(kube::Error, K),
}

/// An error of a read-modify-replace loop, with the object read last (for callers that report what
/// they saw), if any.
type LoopError<K> = (ApplyError, Option<K>);

/// Reads `name`, checks it still has the planned `uid` (if any), lets `edit` decide, and replaces it
/// with what `edit` made (the read's resourceVersion as the precondition). A 409 is answered by a fresh
/// read, up to [`ApplyOptions::conflict_retries`] times, and no retry starts past the deadline. `object`
/// (`kind namespace/name`) and `describe` (the action) name it in errors.
async fn read_modify_replace<K>(
    api: &Api<K>,
    name: &str,
    uid: Option<&str>,
    object: &str,
    describe: &str,
    options: &ApplyOptions,
    mut edit: impl FnMut(&K) -> Result<Edit<K>, ApplyError>,
) -> Result<Ended<K>, LoopError<K>>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + Serialize + std::fmt::Debug,
{
    let api_error = |source| ApplyError::Api {
        action: describe.to_string(),
        source,
    };
    let attempts = options.conflict_retries + 1;
    let mut last_seen = None;
    for attempt in 0..attempts {
        if let Err(e) = options.may_attempt(attempt, describe) {
            return Err((e, last_seen));
        }
        let current = match api.get_opt(name).await {
            Ok(Some(current)) => current,
            Ok(None) => return Ok(Ended::Missing),
            Err(e) => return Err((api_error(e), last_seen)),
        };
        if let Some(uid) = uid
            && current.meta().uid.as_deref() != Some(uid)
        {
            let found = current.meta().uid.clone().unwrap_or_default();
            return Err((
                ApplyError::UidMismatch {
                    action: describe.to_string(),
                    object: object.to_string(),
                    expected: uid.to_string(),
                    found,
                },
                Some(current),
            ));
        }
        let updated = match edit(&current) {
            Ok(Edit::Unchanged) => return Ok(Ended::Unchanged(current)),
            Ok(Edit::Replace(updated)) => updated,
            Err(e) => return Err((e, Some(current))),
        };
        match api.replace(name, &options.post(), &updated).await {
            Ok(written) => return Ok(Ended::Written(written)),
            Err(e) if api_code(&e) == Some(409) => last_seen = Some(current),
            Err(e) if api_code(&e) == Some(404) => return Ok(Ended::GoneBeforeWrite(e, current)),
            Err(e) => return Err((api_error(e), Some(current))),
        }
    }
    Err((
        ApplyError::RetriesExhausted {
            action: describe.to_string(),
            attempts,
        },
        last_seen,
    ))
}

/// A volume write's loop as its action's result: `Ok(true)` when written, `Ok(false)` when the object
/// already was as wanted, each with the object seen. `gone_before_write` answers a 404 on the replace.
fn volume_result<K>(
    ended: Result<Ended<K>, LoopError<K>>,
    observe: fn(K) -> Observed,
    not_found: impl FnOnce() -> ApplyError,
    gone_before_write: impl FnOnce(kube::Error, K) -> (ApplyError, Option<Observed>),
) -> VolumeResult {
    match ended {
        Ok(Ended::Unchanged(seen)) => Ok((false, Some(observe(seen)))),
        Ok(Ended::Written(written)) => Ok((true, Some(observe(written)))),
        Ok(Ended::Missing) => Err((not_found(), None)),
        Ok(Ended::GoneBeforeWrite(e, seen)) => Err(gone_before_write(e, seen)),
        Err((e, seen)) => Err((e, seen.map(observe))),
    }
}

/// An undo's loop as an outcome: a missing object is [`Outcome::Gone`], nothing to write
/// [`Outcome::AlreadyDone`].
fn undo_outcome<K>(
    ended: Result<Ended<K>, LoopError<K>>,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    match ended {
        Ok(Ended::Unchanged(_)) => Ok(Outcome::AlreadyDone),
        Ok(Ended::Written(_)) => Ok(options.done()),
        Ok(Ended::Missing | Ended::GoneBeforeWrite(..)) => Ok(Outcome::Gone),
        Err((e, _)) => Err(e),
    }
}

fn observe_pv(pv: PersistentVolume) -> Observed {
    Observed::Pv(Box::new(pv))
}

fn observe_pvc(pvc: PersistentVolumeClaim) -> Observed {
    Observed::Pvc(Box::new(pvc))
}

/// Binds the PV to the claim: `Ok(true)` when written, `Ok(false)` when it already was.
pub(super) async fn bind_pv(
    client: &Client,
    pv_ref: &ObjectRef,
    claim: &ObjectRef,
    decided_version: Option<&str>,
    options: &ApplyOptions,
) -> VolumeResult {
    let action = Action::BindPv {
        pv: pv_ref.clone(),
        claim: claim.clone(),
        resource_version: decided_version.map(str::to_string),
    };
    let describe = action.describe();
    let object = format!("persistentvolume {}", pv_ref.name);
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let stub = claim_stub(claim);
    let ended = read_modify_replace(
        &api,
        &pv_ref.name,
        pv_ref.uid.as_deref(),
        &object,
        &describe,
        options,
        |pv| {
            let update = bind_volume_to_claim(pv, &stub);
            if !update.dirty {
                return Ok(Edit::Unchanged);
            }
            if pv.spec.as_ref().and_then(|s| s.claim_ref.as_ref()).is_some()
                && !is_volume_bound_to_claim(pv, &stub)
            {
                return Err(ApplyError::Conflict {
                    action: describe.clone(),
                    detail: format!(
                        "persistentvolume {} is bound to claim {}",
                        pv_ref.name,
                        claim_ref_key(pv).unwrap_or_default()
                    ),
                });
            }
            let current_version = pv.metadata.resource_version.as_deref();
            if decided_version.is_some() && current_version != decided_version {
                // The PV changed since the decision: bind only if it still could be chosen for the claim.
                if pv.metadata.deletion_timestamp.is_some() {
                    return Err(ApplyError::Invalid {
                        action: describe.clone(),
                        detail: format!("persistentvolume {} is being deleted", pv_ref.name),
                    });
                }
                let phase = pv.status.as_ref().and_then(|s| s.phase.as_deref()).unwrap_or("");
                if phase != VOLUME_AVAILABLE && !is_volume_bound_to_claim(pv, &stub) {
                    return Err(ApplyError::Conflict {
                        action: describe.clone(),
                        detail: format!("persistentvolume {} is {phase}, not Available", pv_ref.name),
                    });
                }
            }
            Ok(Edit::Replace(update.volume))
        },
    )
    .await;
    let not_found = || ApplyError::NotFound {
        action: describe.clone(),
        object: object.clone(),
    };
    volume_result(ended, observe_pv, not_found, |_, _| (not_found(), None))
}

fn annotation_of<'a>(meta: &'a ObjectMeta, key: &str) -> Option<&'a str> {
    meta.annotations.as_ref()?.get(key).map(String::as_str)
}

/// Sets one annotation on a claim: `Ok(true)` when written, `Ok(false)` when it already had the value.
pub(super) async fn annotate_pvc(
    client: &Client,
    pvc_ref: &ObjectRef,
    key: &str,
    value: &str,
    decided_version: Option<&str>,
    options: &ApplyOptions,
) -> VolumeResult {
    let action = Action::AnnotatePvc {
        pvc: pvc_ref.clone(),
        key: key.to_string(),
        value: value.to_string(),
        resource_version: decided_version.map(str::to_string),
    };
    let describe = action.describe();
    let object = format!("persistentvolumeclaim {}", pvc_ref.key());
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pvc_ref.namespace);
    let ended = read_modify_replace(
        &api,
        &pvc_ref.name,
        pvc_ref.uid.as_deref(),
        &object,
        &describe,
        options,
        |pvc| {
            match annotation_of(&pvc.metadata, key) {
                Some(current) if current == value => return Ok(Edit::Unchanged),
                Some(current) => {
                    return Err(ApplyError::Conflict {
                        action: describe.clone(),
                        detail: format!(
                            "persistentvolumeclaim {} already has {key}={current}",
                            pvc_ref.key()
                        ),
                    });
                }
                None => {}
            }
            let volume = claim_volume_name(pvc);
            if !volume.is_empty() {
                return Err(ApplyError::Conflict {
                    action: describe.clone(),
                    detail: format!(
                        "persistentvolumeclaim {} is already bound to persistentvolume {volume}",
                        pvc_ref.key()
                    ),
                });
            }
            if pvc.metadata.deletion_timestamp.is_some() {
                return Err(ApplyError::Invalid {
                    action: describe.clone(),
                    detail: format!("persistentvolumeclaim {} is being deleted", pvc_ref.key()),
                });
            }
            let mut pvc = pvc.clone();
            pvc.metadata
                .annotations
                .get_or_insert_with(BTreeMap::new)
                .insert(key.to_string(), value.to_string());
            Ok(Edit::Replace(pvc))
        },
    )
    .await;
    let not_found = || ApplyError::NotFound {
        action: describe.clone(),
        object: object.clone(),
    };
    volume_result(ended, observe_pvc, not_found, |e, seen| {
        (api_err(&action, e), Some(observe_pvc(seen)))
    })
}

/// Removes the PV's claimRef if it still names `claim` (and the bound-by-controller annotation with it).
pub(super) async fn unbind_pv(
    client: &Client,
    pv_ref: &ObjectRef,
    claim: &ObjectRef,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    let describe = format!(
        "unbind persistentvolume {} from claim {}",
        pv_ref.name,
        claim.key()
    );
    let object = format!("persistentvolume {}", pv_ref.name);
    let api: Api<PersistentVolume> = Api::all(client.clone());
    let stub = claim_stub(claim);
    let ended = read_modify_replace(&api, &pv_ref.name, None, &object, &describe, options, |pv| {
        if !is_volume_bound_to_claim(pv, &stub) {
            return Ok(Edit::Unchanged);
        }
        let mut pv = pv.clone();
        if let Some(spec) = pv.spec.as_mut() {
            spec.claim_ref = None;
        }
        if let Some(annotations) = pv.metadata.annotations.as_mut() {
            annotations.remove(ANN_BOUND_BY_CONTROLLER);
        }
        Ok(Edit::Replace(pv))
    })
    .await;
    undo_outcome(ended, options)
}

/// Removes `key` from the claim's annotations if it still has `value`.
pub(super) async fn remove_pvc_annotation(
    client: &Client,
    pvc_ref: &ObjectRef,
    key: &str,
    value: &str,
    options: &ApplyOptions,
) -> Result<Outcome, ApplyError> {
    let describe = format!(
        "remove annotation {key} from persistentvolumeclaim {}",
        pvc_ref.key()
    );
    let object = format!("persistentvolumeclaim {}", pvc_ref.key());
    let api: Api<PersistentVolumeClaim> = Api::namespaced(client.clone(), &pvc_ref.namespace);
    let ended = read_modify_replace(&api, &pvc_ref.name, None, &object, &describe, options, |pvc| {
        if annotation_of(&pvc.metadata, key) != Some(value) {
            return Ok(Edit::Unchanged);
        }
        let mut pvc = pvc.clone();
        if let Some(annotations) = pvc.metadata.annotations.as_mut() {
            annotations.remove(key);
        }
        Ok(Edit::Replace(pvc))
    })
    .await;
    undo_outcome(ended, options)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_ref_key_and_stub() {
        let stub = claim_stub(&ObjectRef::new("ns", "c").with_uid("u1"));
        let pv = PersistentVolume::default();
        let update = bind_volume_to_claim(&pv, &stub);
        assert!(update.dirty && update.set_bound_by_controller);
        assert_eq!(claim_ref_key(&update.volume).as_deref(), Some("ns/c"));
        // A second binding of the written PV to the same claim changes nothing: the plan is idempotent.
        assert!(!bind_volume_to_claim(&update.volume, &stub).dirty);
    }
}
