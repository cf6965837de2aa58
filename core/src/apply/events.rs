//! Event recording: an `events.k8s.io/v1` Event about a pod, reported as the plan says (kube-scheduler's
//! events name the profile's scheduler name) or else by the field manager; the reporting instance names
//! the writer. Best-effort: a failed event does not stop the plan.

use k8s_openapi::api::core::v1::ObjectReference;
use k8s_openapi::api::events::v1::Event;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use kube::{Api, Client};

use super::{ApplyError, ApplyOptions, Step, api_err};
use crate::action::{Action, EventSpec, ObjectRef};

pub(super) async fn record_event(
    client: &Client,
    spec: &EventSpec,
    options: &ApplyOptions,
) -> Result<Step, ApplyError> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let reference = |r: &ObjectRef, kind: &str| ObjectReference {
        kind: Some(kind.to_string()),
        api_version: Some("v1".to_string()),
        namespace: (!r.namespace.is_empty()).then(|| r.namespace.clone()),
        name: Some(r.name.clone()),
        uid: r.uid.clone(),
        ..ObjectReference::default()
    };
    let namespace = if spec.regarding.namespace.is_empty() {
        "default".to_string()
    } else {
        spec.regarding.namespace.clone()
    };
    let event = Event {
        metadata: ObjectMeta {
            // The name only has to be unique; the timestamp in hex is what client-go's recorder uses too.
            name: Some(format!("{}.{:x}", spec.regarding.name, now.as_nanosecond())),
            namespace: Some(namespace.clone()),
            ..ObjectMeta::default()
        },
        event_time: Some(MicroTime(now)),
        action: Some(spec.action.clone()),
        reason: Some(spec.reason.clone()),
        note: Some(spec.note.clone()),
        type_: Some(spec.type_.clone()),
        regarding: Some(reference(&spec.regarding, "Pod")),
        related: spec.related.as_ref().map(|r| reference(r, "Pod")),
        reporting_controller: Some(
            spec.reporting_controller
                .clone()
                .unwrap_or_else(|| options.field_manager.clone()),
        ),
        reporting_instance: Some(
            options
                .reporting_instance
                .clone()
                .unwrap_or_else(|| options.field_manager.clone()),
        ),
        ..Event::default()
    };
    let api: Api<Event> = Api::namespaced(client.clone(), &namespace);
    api.create(&options.post(), &event)
        .await
        .map(|_| Step::Done)
        .map_err(|e| api_err(&Action::Event(spec.clone()), e))
}
