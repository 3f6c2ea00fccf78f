//! podExecutor `singleUse`: one call per pod, and a pod no call had before.

use super::*;

fn single_use() -> PodRequestSettings {
    PodRequestSettings {
        single_use: true,
        ..PodRequestSettings::default()
    }
}

#[tokio::test(start_paused = true)]
async fn each_call_gets_a_pod_of_its_own_stopped_after_its_call() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    let first = get(&cache, IMAGE, single_use()).await;
    // Concurrent calls: each its own pod, though maxParallelExecutions is
    // 1 and the waitlist length 2 (they do not bound single-use calls).
    let second = get(&cache, IMAGE, single_use()).await;
    assert_ne!(first.pod_id(), second.pod_id());
    assert!(fake.lock().specs.iter().all(|spec| spec.single_use));
    let first_id = first.pod_id().clone();
    drop(first);
    settle().await;
    assert_eq!(fake.stops(), vec![first_id.clone()]);
    assert_eq!(
        fake.lock().stop_reasons,
        vec![StopReason::Idle(Retire::Used)]
    );
    // A later call never gets a used pod, even one still in the cache.
    let third = get(&cache, IMAGE, single_use()).await;
    assert_ne!(third.pod_id(), second.pod_id());
    assert_ne!(third.pod_id(), &first_id);
    assert_eq!(fake.starts().len(), 3);
    assert!(fake.lock().reused.is_empty(), "no reuse to record");
    drop((second, third));
    settle().await;
    assert_eq!(fake.stops().len(), 3);
    assert!(cache.snapshot().await.image(IMAGE).is_none());
    cache.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_fresh_pod_whose_caller_went_away_serves_the_next_call() {
    let fake = Fake::manual();
    let cache = cache(&fake, CacheSettings::default());
    let gone = spawn_get(&cache, IMAGE, single_use());
    settle().await;
    assert_eq!(fake.pending(), 1);
    gone.abort();
    settle().await;
    // The next call takes the start its predecessor left: no second pod.
    let call = spawn_get(&cache, IMAGE, single_use());
    settle().await;
    assert_eq!(fake.pending(), 1, "no other start");
    let id = fake.finish_ok();
    let lease = call.await.expect("task").expect("a lease");
    assert_eq!(lease.pod_id(), &id);
    // Two calls at once while it starts: the second gets a start of its own.
    let waiting = spawn_get(&cache, IMAGE, single_use());
    let other = spawn_get(&cache, IMAGE, single_use());
    settle().await;
    assert_eq!(fake.pending(), 2);
    let a = fake.finish_ok();
    let b = fake.finish_ok();
    let got = [
        waiting.await.expect("task").expect("lease"),
        other.await.expect("task").expect("lease"),
    ];
    let mut ids: Vec<_> = got.iter().map(|l| l.pod_id().clone()).collect();
    ids.sort();
    let mut want = vec![a, b];
    want.sort();
    assert_eq!(ids, want);
    drop((lease, got));
    cache.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn a_warmed_single_use_pod_serves_one_call_and_a_multi_use_pod_never_serves_one() {
    let fake = Fake::auto();
    let cache = cache(&fake, CacheSettings::default());
    // A pod of the image from before it was single-use (a FunctionConfig
    // changed): it may have served others, so no single-use call gets it.
    drop(get(&cache, IMAGE, defaults()).await);
    settle().await;
    let lease = get(&cache, IMAGE, single_use()).await;
    assert_eq!(fake.starts().len(), 2);
    assert_eq!(lease.pod_id(), &id("pod-2"));
    drop(lease);
    settle().await;
    cache.warm(vec![(OTHER.to_string(), single_use())]).await;
    settle().await;
    let warm = get(&cache, OTHER, single_use()).await;
    assert_eq!(warm.pod_id(), &id("pod-3"), "the warmed pod");
    let next = get(&cache, OTHER, single_use()).await;
    assert_eq!(next.pod_id(), &id("pod-4"));
    drop((warm, next));
    cache.shutdown().await;
}

#[tokio::test(start_paused = true)]
async fn at_max_pods_a_single_use_call_is_refused_not_queued() {
    let fake = Fake::auto();
    let settings = CacheSettings {
        max_pods: 1,
        ..CacheSettings::default()
    };
    let cache = cache(&fake, settings);
    let busy = get(&cache, IMAGE, single_use()).await;
    let err = cache
        .get(IMAGE, single_use())
        .await
        .expect_err("no room, and no pod it may share");
    assert!(matches!(err, CacheError::Full { max: 1, .. }), "{err}");
    drop(busy);
    settle().await;
    drop(get(&cache, IMAGE, single_use()).await);
    cache.shutdown().await;
}
