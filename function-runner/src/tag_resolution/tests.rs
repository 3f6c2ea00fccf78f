use super::*;

use std::sync::atomic::{AtomicUsize, Ordering};

use proto::pb::EvaluateFunctionRequest;
use runner_core::config::test_support::config;
use runner_core::config::ImageIndex;

/// A registry in memory: each repository's tags, or a failure; counts the
/// listings; `gate`, when set, holds every listing until it is notified.
#[derive(Default)]
struct FakeRegistry {
    tags: Mutex<HashMap<String, Result<Vec<String>, ListFailure>>>,
    listings: AtomicUsize,
    gate: Option<Arc<tokio::sync::Notify>>,
}

impl FakeRegistry {
    fn with(repository: &str, tags: &[&str]) -> Self {
        let registry = FakeRegistry::default();
        registry.set(repository, Ok(tags.iter().map(|t| t.to_string()).collect()));
        registry
    }

    fn set(&self, repository: &str, tags: Result<Vec<String>, ListFailure>) {
        self.tags
            .lock()
            .unwrap()
            .insert(repository.to_string(), tags);
    }

    fn listings(&self) -> usize {
        self.listings.load(Ordering::SeqCst)
    }
}

impl TagSource for FakeRegistry {
    fn list<'a>(&'a self, repository: &'a str) -> BoxFuture<'a, Result<Vec<String>, ListError>> {
        Box::pin(async move {
            self.listings.fetch_add(1, Ordering::SeqCst);
            if let Some(gate) = &self.gate {
                gate.notified().await;
            }
            let answer = self.tags.lock().unwrap().get(repository).cloned();
            answer
                .unwrap_or(Err(ListFailure::NoRepository))
                .map_err(|failure| ListError {
                    registry: "registry.test".into(),
                    repository: repository.to_string(),
                    failure,
                    cause: format!("{failure:?}"),
                })
        })
    }
}

const REPO: &str = "registry.test/fns/set-things";
const TAGS: &[&str] = &[
    "v0.1.0",
    "v0.2.0",
    "v0.2.1",
    "v0.3.0",
    "v0.4.0",
    "v0.4.2",
    "v0.4.10",
    "v0.5.0-rc.1",
    "latest",
    "v0.4",
];

fn resolver(registry: &Arc<FakeRegistry>, ttl: Duration) -> TagResolver {
    TagResolver::new(registry.clone(), ttl, "registry.test/fns")
}

async fn resolve(
    resolver: &TagResolver,
    image: &str,
    tag: &str,
) -> Result<Resolution, ResolveError> {
    let constraint = TagResolver::constraint_of(image, tag).expect("a constraint");
    resolver.resolve(image, tag, &constraint).await
}

#[test]
fn only_a_constraint_beside_an_untagged_image_is_resolved() {
    for (image, tag) in [
        // Exact tags: used as written, as before.
        ("fn", "v0.4.1"),
        ("fn", "0.4.1"),
        ("fn", "0.4"),
        ("fn", "v1"),
        ("fn", "=v0.4.1"),
        ("fn", " = 0.4.1 "),
        ("fn", "latest"),
        ("fn", "unstable"),
        ("fn", ""),
        // The image carries its own tag or digest.
        ("fn:v1", "~0.4"),
        ("registry.test/fns/fn:v1", ">=0.1"),
        ("fn@sha256:0123", "~0.4"),
    ] {
        assert!(
            TagResolver::constraint_of(image, tag).is_none(),
            "{image} {tag:?}"
        );
    }
    for (image, tag) in [
        ("fn", "~0.4"),
        ("fn", "^1"),
        ("fn", ">=v0.1.0 <v0.3.0"),
        ("fn", "0.4.x"),
        ("fn", "*"),
        ("fn", "=0.4.x"),
        // A registry port is not a tag.
        ("localhost:5000/fns/fn", "~0.4"),
    ] {
        assert!(
            TagResolver::constraint_of(image, tag).is_some(),
            "{image} {tag:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn the_highest_matching_tag_is_taken_and_the_listing_kept_for_the_ttl() {
    let registry = Arc::new(FakeRegistry::with(REPO, TAGS));
    let resolver = resolver(&registry, Duration::from_secs(300));

    let first = resolve(&resolver, "set-things", "~0.4").await.unwrap();
    assert_eq!(
        first,
        Resolution {
            image: "set-things:v0.4.10".into(),
            tag: "v0.4.10".into(),
            cached: false
        }
    );
    assert_eq!(registry.listings(), 1);

    // Warm: another constraint of the same repository, under another name
    // of it, lists nothing.
    let second = resolve(&resolver, REPO, ">=v0.1.0 <v0.3.0").await.unwrap();
    assert_eq!(second.image, format!("{REPO}:v0.2.1"));
    assert!(second.cached);
    tokio::time::advance(Duration::from_secs(299)).await;
    assert!(
        resolve(&resolver, "set-things", "^0.3")
            .await
            .unwrap()
            .cached
    );
    assert_eq!(registry.listings(), 1);

    // Past the TTL the registry is asked again, and a tag pushed since is
    // seen.
    let mut tags: Vec<String> = TAGS.iter().map(|t| t.to_string()).collect();
    tags.push("v0.4.11".into());
    registry.set(REPO, Ok(tags));
    tokio::time::advance(Duration::from_secs(2)).await;
    let fresh = resolve(&resolver, "set-things", "~0.4").await.unwrap();
    assert_eq!((fresh.tag.as_str(), fresh.cached), ("v0.4.11", false));
    assert_eq!(registry.listings(), 2);
}

#[tokio::test(start_paused = true)]
async fn calls_waiting_for_one_repository_share_one_listing() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let registry = FakeRegistry {
        gate: Some(gate.clone()),
        ..FakeRegistry::with(REPO, TAGS)
    };
    let registry = Arc::new(registry);
    let resolver = Arc::new(resolver(&registry, Duration::from_secs(300)));
    let calls: Vec<_> = (0..5)
        .map(|_| {
            let resolver = resolver.clone();
            tokio::spawn(async move { resolve(&resolver, "set-things", "~0.2").await })
        })
        .collect();
    tokio::time::timeout(Duration::from_secs(5), async {
        while registry.listings() == 0 {
            // A sleep, not a yield: paused time moves on while all wait,
            // so the timeout can fire.
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .unwrap();
    gate.notify_one();
    for call in calls {
        assert_eq!(call.await.unwrap().unwrap().tag, "v0.2.1");
    }
    assert_eq!(registry.listings(), 1);
}

#[tokio::test(start_paused = true)]
async fn no_match_names_the_constraint_and_a_bounded_list_of_the_tags() {
    let registry = Arc::new(FakeRegistry::with(REPO, TAGS));
    let resolver = resolver(&registry, Duration::from_secs(300));
    let err = resolve(&resolver, "set-things", "~0.9").await.unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    let text = err.to_string();
    assert!(text.contains("\"~0.9\"") && text.contains(REPO), "{text}");
    assert!(text.contains("10 tag(s): v0.1.0, v0.2.0"), "{text}");

    // Many tags: the first 20 and how many.
    let many: Vec<String> = (0..45).map(|i| format!("v1.0.{i}")).collect();
    registry.set("registry.test/fns/many", Ok(many));
    let err = resolve(&resolver, "many", "~2").await.unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("45 tags: v1.0.0,") && text.contains("v1.0.19, ... (25 more)"),
        "{text}"
    );
    assert!(!text.contains("v1.0.20"), "{text}");
    // The listing was kept: asking again lists nothing.
    assert_eq!(registry.listings(), 2);
    let _ = resolve(&resolver, "many", "~3").await.unwrap_err();
    assert_eq!(registry.listings(), 2);
}

#[tokio::test(start_paused = true)]
async fn registry_failures_answer_their_code_and_are_kept_seconds_only() {
    let registry = Arc::new(FakeRegistry::default());
    let resolver = resolver(&registry, Duration::from_secs(300));
    for (failure, code) in [
        (ListFailure::Unreachable, Code::Unavailable),
        (ListFailure::Refused, Code::FailedPrecondition),
        (ListFailure::Failed, Code::FailedPrecondition),
        (ListFailure::NoRepository, Code::NotFound),
    ] {
        registry.set(REPO, Err(failure));
        // The last failure is answered a few seconds more: past them, asked.
        tokio::time::advance(Duration::from_secs(6)).await;
        let err = resolve(&resolver, "set-things", "~0.4").await.unwrap_err();
        assert_eq!(err.code(), code, "{failure:?}");
        let again = resolve(&resolver, "set-things", "~0.4").await.unwrap_err();
        assert_eq!(again.code(), code, "{failure:?}");
        let text = err.to_string();
        assert!(
            text.contains("registry.test") && text.contains("\"~0.4\""),
            "{text}"
        );
    }
    assert_eq!(
        registry.listings(),
        4,
        "a failure was kept too long, or not at all"
    );
    // The registry is back: the next call past the seconds lists and succeeds.
    registry.set(REPO, Ok(vec!["v0.4.0".into()]));
    tokio::time::advance(Duration::from_secs(6)).await;
    assert_eq!(
        resolve(&resolver, "set-things", "~0.4").await.unwrap().tag,
        "v0.4.0"
    );
}

/// Tags whose TTL passed are used again when listing them anew fails, and
/// listed again seconds later, not at every call.
#[tokio::test(start_paused = true)]
async fn a_registry_blip_answers_with_the_last_listing() {
    let registry = Arc::new(FakeRegistry::with(REPO, TAGS));
    let resolver = resolver(&registry, Duration::from_secs(300));
    assert_eq!(
        resolve(&resolver, "set-things", "~0.4").await.unwrap().tag,
        "v0.4.10"
    );
    tokio::time::advance(Duration::from_secs(301)).await;
    registry.set(REPO, Err(ListFailure::Unreachable));
    let stale = resolve(&resolver, "set-things", "~0.4").await.unwrap();
    assert_eq!((stale.tag.as_str(), stale.cached), ("v0.4.10", true));
    assert_eq!(registry.listings(), 2);
    let _ = resolve(&resolver, "set-things", "~0.4").await.unwrap();
    assert_eq!(registry.listings(), 2, "asked again at once");
    tokio::time::advance(Duration::from_secs(6)).await;
    registry.set(REPO, Ok(vec!["v0.4.12".into()]));
    let fresh = resolve(&resolver, "set-things", "~0.4").await.unwrap();
    assert_eq!((fresh.tag.as_str(), fresh.cached), ("v0.4.12", false));
}

/// The chain behind [`TagResolving`]: records the requests it is handed.
#[derive(Default, Clone)]
struct Recorder(Arc<Mutex<Vec<(String, String)>>>);

impl Evaluator for Recorder {
    fn evaluate(
        &self,
        req: EvalRequest,
    ) -> BoxFuture<'_, Result<EvaluateFunctionResponse, EvalError>> {
        self.0
            .lock()
            .unwrap()
            .push((req.request.image.clone(), req.request.tag.clone()));
        Box::pin(async { Ok(EvaluateFunctionResponse::default()) })
    }
}

fn request(image: &str, tag: &str) -> EvalRequest {
    EvalRequest::new(EvaluateFunctionRequest {
        resource_list: Default::default(),
        image: image.into(),
        tag: tag.into(),
    })
}

fn resolving(registry: &Arc<FakeRegistry>, configs: &[(&str, &str)]) -> (TagResolving, Recorder) {
    let configs: Vec<_> = configs.iter().map(|(n, s)| config(n, s)).collect();
    let (index, errors) = ImageIndex::build(&configs, "registry.test/fns");
    assert!(errors.is_empty(), "{errors:?}");
    let recorder = Recorder::default();
    let evaluator = TagResolving::new(
        Arc::new(resolver(registry, Duration::from_secs(300))),
        LiveIndex::fixed(Arc::new(index)),
        true,
        Box::new(recorder.clone()),
    );
    (evaluator, recorder)
}

#[tokio::test(start_paused = true)]
async fn the_chain_gets_the_resolved_image_and_exact_tags_pass_untouched() {
    let registry = Arc::new(FakeRegistry::with(REPO, TAGS));
    let (evaluator, seen) = resolving(&registry, &[]);
    for (image, tag) in [
        ("set-things", "~0.4"),
        ("set-things", "v0.3.0"),
        ("set-things", "latest"),
        ("set-things:v0.1.0", "~0.4"),
    ] {
        evaluator.evaluate(request(image, tag)).await.unwrap();
    }
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            ("set-things:v0.4.10".to_string(), String::new()),
            ("set-things".into(), "v0.3.0".into()),
            ("set-things".into(), "latest".into()),
            ("set-things:v0.1.0".into(), "~0.4".into()),
        ]
    );
    assert_eq!(registry.listings(), 1, "only the constraint listed");

    // A constraint nothing meets never reaches the chain.
    let err = evaluator
        .evaluate(request("set-things", "~7"))
        .await
        .unwrap_err();
    assert_eq!(err.code(), Code::NotFound);
    assert_eq!(seen.0.lock().unwrap().len(), 4);
}

#[tokio::test(start_paused = true)]
async fn a_local_function_config_keeps_its_constraint_and_asks_no_registry() {
    let registry = Arc::new(FakeRegistry::default());
    let (evaluator, seen) = resolving(
        &registry,
        &[
            (
                "bin",
                "image: local-bin\nbinaryExecutor:\n  tags: [v1.0.0]\n  path: /bin/cat\n",
            ),
            (
                "go",
                "image: local-go\ngoExecutor:\n  tags: [v0.4.1]\n  id: set-namespace\n",
            ),
            // A pod's settings follow the resolved tag: its constraint is
            // the registry's to resolve.
            ("pod", "image: pod-fn\npodExecutor:\n  tags: [v1.0.0]\n"),
        ],
    );
    evaluator
        .evaluate(request("local-bin", "^1"))
        .await
        .unwrap();
    evaluator
        .evaluate(request("local-go", "~0.4"))
        .await
        .unwrap();
    assert_eq!(registry.listings(), 0);
    registry.set(
        "registry.test/fns/pod-fn",
        Ok(vec!["v1.0.0".into(), "v1.1.0".into()]),
    );
    evaluator.evaluate(request("pod-fn", "^1")).await.unwrap();
    assert_eq!(registry.listings(), 1);
    assert_eq!(
        *seen.0.lock().unwrap(),
        [
            ("local-bin".to_string(), "^1".to_string()),
            ("local-go".into(), "~0.4".into()),
            ("pod-fn:v1.1.0".into(), String::new()),
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn a_registry_slower_than_the_deadline_ends_the_call_at_the_deadline() {
    let gate = Arc::new(tokio::sync::Notify::new());
    let registry = Arc::new(FakeRegistry {
        gate: Some(gate),
        ..FakeRegistry::with(REPO, TAGS)
    });
    let (evaluator, seen) = resolving(&registry, &[]);
    let mut req = request("set-things", "~0.4");
    req.deadline = Some(Instant::now() + Duration::from_secs(2));
    let err = evaluator.evaluate(req).await.unwrap_err();
    assert_eq!(err.code(), Code::DeadlineExceeded);
    assert!(seen.0.lock().unwrap().is_empty());
}

#[test]
fn client_errors_are_classified() {
    use oci_client::errors::{OciEnvelope, OciError};
    let envelope = |code| OciDistributionError::RegistryError {
        envelope: OciEnvelope {
            errors: vec![OciError {
                code,
                message: "m".into(),
                detail: serde_json::Value::Null,
            }],
        },
        url: "u".into(),
    };
    let server = |code| OciDistributionError::ServerError {
        code,
        url: "u".into(),
        message: "m".into(),
    };
    assert_eq!(
        failure_of(&envelope(OciErrorCode::NameUnknown)),
        ListFailure::NoRepository
    );
    assert_eq!(
        failure_of(&envelope(OciErrorCode::Denied)),
        ListFailure::Refused
    );
    assert_eq!(failure_of(&server(404)), ListFailure::NoRepository);
    assert_eq!(failure_of(&server(401)), ListFailure::Refused);
    assert_eq!(failure_of(&server(503)), ListFailure::Unreachable);
    assert_eq!(failure_of(&server(400)), ListFailure::Failed);
}
